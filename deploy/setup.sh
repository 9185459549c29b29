#!/usr/bin/env bash
# Installs with apt what one purpose of the project needs, and no more.
# Idempotent: when everything asked for is present it prints one line and
# exits at once. Run as root (or with sudo available).
#
#   deploy/setup.sh [PROFILE...]     several profiles add up; none: --test
#     --build   build ps_server, ps_worker and ps_admin with Bazel, and the
#               Fashion-MNIST data: deploy/local_cluster.sh's default job and
#               the container image's build stage (deploy/docker/Dockerfile)
#     --etcd    a replicated cluster (local_cluster.sh --replicas)
#     --python  the Python module and PyTorch workers (--python_workers)
#     --plot    training-curve plots (local_cluster.sh --plot)
#     --mpi     Open MPI and mpirun (local_cluster.sh --model_partitions,
#               --dense_sync; the container image)
#     --test    everything the tests and CI need (deploy/test.sh): all of
#               the above and the test and check tools
#     --bench   --test, and what the benchmarks need (deploy/bench.sh)
set -euo pipefail

# Each profile: Debian package -> why the project needs it. apt brings every
# package's dependencies; a reason names those the project uses directly.

# What `bazel build` of the binaries needs: the toolchain, and every library
# the @system repository asks pkg-config for (third_party/system_libs.bzl)
# but Open MPI (--mpi) and the test libraries (--test), without which it
# builds the binaries anyway.
BUILD=(
  "bazel-bootstrap:build system (Bazel 4.2.3, works offline); brings the C++ compiler g++ (build-essential), zlib1g-dev (the IDX files' gzip reader) and python3"
  "libgrpc++-dev:gRPC C++ runtime (client and server); brings Abseil (libabsl-dev: Status, flags, Mutex, time) and pkg-config, which locates the libraries for Bazel"
  "protobuf-compiler-grpc:grpc_cpp_plugin for protoc; brings protoc (protobuf-compiler)"
  "libprotobuf-dev:protobuf C++ runtime"
  "libeigen3-dev:Eigen (models and optimizer kernels)"
  "libcpp-httplib-dev:HTTP for etcd's v3 JSON gateway and the metrics endpoints"
  "nlohmann-json3-dev:JSON for etcd's v3 JSON gateway"
  "dataset-fashion-mnist:Fashion-MNIST data set, which the default job trains on"
)

ETCD=(
  "etcd-server:membership and ring versions for replicated clusters (--replicas)"
  "etcd-client:etcdctl, which waits for etcd to answer and inspects a cluster's membership records"
)

PYTHON=(
  "pybind11-dev:the Python module's bindings over the client library (python/paramserver_ext.cc)"
  "python3-dev:Python.h, for building the Python module"
  "python3-numpy:the Python module's arrays"
  "python3-torch:PyTorch CPU: the examples in python/examples (local_cluster.sh --python_workers), their tests, and the single-process training baseline"
  "libopenblas0-pthread:optimized BLAS for PyTorch (Debian's default BLAS is the reference one)"
)

PLOT=(
  "gnuplot-nox:training-curve plots (deploy/plot_training.sh)"
)

MPI=(
  "libopenmpi-dev:Open MPI, linked into ps_worker for the collectives of worker/collective (dense layers by allreduce, model partitions); without it ps_worker builds and refuses those options"
  "openmpi-bin:mpirun, which starts the MPI processes of --model_partitions and --dense_sync allreduce jobs and of mpi_collective_test"
)

# The tests and checks, beyond the profiles above.
TEST=(
  "libgmock-dev:GoogleTest and GoogleMock (libgtest-dev) for the tests"
  "libbenchmark-dev:Google Benchmark for the benchmarks (deploy/bench), which bazel test //... builds"
  "librocksdb-dev:RocksDB, one of the disk tier's two stores for sparse tables larger than memory (server/store/rocksdb_row_store), compared with the project's own log"
  "clang:second C++ compiler: checks the thread-safety annotations (deploy/clang_tsa_build.sh) and builds the fuzzers (deploy/fuzz.sh)"
  "clang-format:the C++ format check (deploy/check_format.sh)"
  "clang-tidy:the static checks of server/ and worker/client/ (deploy/clang_tidy.sh)"
  "shellcheck:the shell scripts' lint (deploy/lint_shell.sh)"
  "iproute2:network namespaces for the partition test"
  "python3-scipy:L-BFGS for the single-process reference of the algorithm comparisons (deploy/lbfgs_reference.py)"
  "liblinear-tools:heart_scale, a small real LibSVM data set (lbfgs_reference_test, the comparisons)"
  "prometheus:scrapes the servers' and workers' metrics in prometheus_test"
  "curl:HTTP checks of the metrics and health endpoints in tests"
  "openssl:the CA and certificates security_test makes"
  "yamllint:lints the Kubernetes manifests (deploy/k8s/validate.sh)"
  "slurm-wlm:single-node Slurm for slurm_test (deploy/slurm)"
  "munge:Slurm's authentication, run by deploy/slurm/local_slurm.sh"
  "libpmix-dev:pmix2/lib/libpmix.so, which Slurm's mpi/pmix plugin loads for srun --mpi=pmix (MPI workers under Slurm); slurm-wlm does not depend on it"
  "docker.io:Docker engine and its client for the image and the Compose cluster (deploy/docker, tests/compose_test.sh)"
  "docker-compose:runs the Compose cluster of deploy/docker (tests/compose_test.sh)"
  "debootstrap:builds the debian:bookworm base image from Debian's archive when no registry answers (deploy/docker/base_image.sh)"
  "python3-venv:the fresh virtual environment python/tests/wheel_test.sh installs the wheel into"
  "python3-tqdm:the progress bar of paramserver.torch's Trainer (python:torch_test checks it)"
  "chromium:headless Chromium, which loads the web UI in web_ui_test"
)

BENCH=(
  "iperf3:loopback TCP bandwidth, the network limit benchmarks are compared with"
  "fio:the disk's sequential bandwidth and random-read IOPS, which the disk tier's benchmark is compared with (deploy/bench/row_store.sh)"
)

[ $# -gt 0 ] || set -- --test
PACKAGES=()
for profile in "$@"; do
  case "$profile" in
    --build) PACKAGES+=("${BUILD[@]}") ;;
    --etcd) PACKAGES+=("${ETCD[@]}") ;;
    --python) PACKAGES+=("${PYTHON[@]}") ;;
    --plot) PACKAGES+=("${PLOT[@]}") ;;
    --mpi) PACKAGES+=("${MPI[@]}") ;;
    --test) PACKAGES+=("${BUILD[@]}" "${ETCD[@]}" "${PYTHON[@]}" "${PLOT[@]}" "${MPI[@]}" "${TEST[@]}") ;;
    --bench) PACKAGES+=("${BUILD[@]}" "${ETCD[@]}" "${PYTHON[@]}" "${PLOT[@]}" "${MPI[@]}" "${TEST[@]}" "${BENCH[@]}") ;;
    *) echo "usage: $0 [--build] [--etcd] [--python] [--plot] [--mpi] [--test] [--bench] (none: --test)" >&2; exit 2 ;;
  esac
done

# Each package once (profiles overlap), in the order first named.
declare -A seen=()
missing=()
reasons=()
for entry in "${PACKAGES[@]}"; do
  pkg="${entry%%:*}"
  [ -z "${seen[$pkg]:-}" ] || continue
  seen[$pkg]=1
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
    reasons+=("  - $pkg: ${entry#*:}")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup.sh: all ${#seen[@]} packages present ($*)"
  exit 0
fi

echo "setup.sh: installing ${#missing[@]} missing package(s) ($*):"
printf '%s\n' "${reasons[@]}"

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup.sh: done"

# Bazel reads the installed libraries into @system (third_party/system_libs.bzl)
# once per server: stop this workspace's server, if one runs, so that the
# next build sees what was just installed (Python's headers after a first
# build without them, say). Outside a workspace (the image's package layer)
# there is none.
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ -f "$root/WORKSPACE" ] && command -v bazel >/dev/null; then
  (cd "$root" && bazel shutdown) || true
fi
