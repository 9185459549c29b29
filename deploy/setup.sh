#!/usr/bin/env bash
# Installs, with apt, exactly what building, testing and running the local
# cluster need. Idempotent:
# when everything is present it prints one line and exits at once. Run as
# root (or with sudo available).
#   --bench  also what the benchmarks (deploy/bench.sh) need
#   --build  only what building ps_server, ps_worker and ps_admin with Bazel
#            needs, plus the Fashion-MNIST data the image ships (the
#            container image's build stage, deploy/docker/Dockerfile)
set -euo pipefail

# Debian package -> why the project needs it.
PACKAGES=(
  "bazel-bootstrap:build system (Bazel 4.2.3, works offline)"
  "g++:C++ compiler"
  "clang:second C++ compiler: checks the thread-safety annotations (deploy/clang_tsa_build.sh)"
  "clang-format:the C++ format check (deploy/check_format.sh)"
  "clang-tidy:the static checks of server/ and worker/client/ (deploy/clang_tidy.sh)"
  "shellcheck:the shell scripts' lint (deploy/lint_shell.sh)"
  "pkg-config:locates the system libraries for Bazel"
  "libgrpc++-dev:gRPC C++ runtime (client and server)"
  "protobuf-compiler:protoc"
  "protobuf-compiler-grpc:grpc_cpp_plugin for protoc"
  "libprotobuf-dev:protobuf C++ runtime"
  "libabsl-dev:Abseil (Status, flags, Mutex, time)"
  "libeigen3-dev:Eigen (models and optimizer kernels)"
  "libgtest-dev:GoogleTest"
  "libgmock-dev:GoogleMock (matchers used in tests)"
  "libbenchmark-dev:Google Benchmark"
  "zlib1g-dev:gzip reader for the IDX data files"
  "dataset-fashion-mnist:Fashion-MNIST data set"
  "etcd-server:membership and ring versions for replicated clusters (--replicas)"
  "etcd-client:etcdctl, to inspect a cluster's membership records"
  "libcpp-httplib-dev:HTTP client for etcd's v3 JSON gateway"
  "nlohmann-json3-dev:JSON for etcd's v3 JSON gateway"
  "iproute2:network namespaces for the partition test"
  "python3-numpy:the Python module's arrays; reads exported checkpoints in ckpt_export_test"
  "python3-scipy:L-BFGS for the single-process reference of the algorithm comparisons (deploy/lbfgs_reference.py)"
  "liblinear-tools:heart_scale, a small real LibSVM data set (lbfgs_reference_test, the comparisons)"
  "prometheus:scrapes the servers' and workers' metrics in prometheus_test"
  "gnuplot-nox:training-curve plots of deploy/local_cluster.sh"
  "curl:HTTP checks of the metrics and health endpoints in tests"
  "openssl:the CA and certificates security_test makes"
  "yamllint:lints the Kubernetes manifests (deploy/k8s/validate.sh)"
  "slurm-wlm:single-node Slurm for slurm_test (deploy/slurm)"
  "munge:Slurm's authentication, run by deploy/slurm/local_slurm.sh"
  "docker.io:Docker engine and its client for the image and the Compose cluster (deploy/docker, tests/compose_test.sh)"
  "docker-compose:runs the Compose cluster of deploy/docker (tests/compose_test.sh)"
  "debootstrap:builds the debian:bookworm base image from Debian's archive when no registry answers (deploy/docker/base_image.sh)"
  "pybind11-dev:the Python module's bindings over the client library (python/paramserver_ext.cc)"
  "python3-dev:Python.h, for building the Python module"
  "python3-venv:the fresh virtual environment python/tests/wheel_test.sh installs the wheel into"
  "python3-torch:PyTorch CPU: the examples in python/examples (local_cluster.sh --python_workers), their tests, and the single-process training baseline"
  "libopenblas0-pthread:optimized BLAS for PyTorch (Debian's default BLAS is the reference one)"
  "libopenmpi-dev:Open MPI's library and headers, for the collectives of worker/collective (dense layers by allreduce)"
  "openmpi-bin:mpirun, which starts the MPI processes of mpi_collective_test"
  "libpmix-dev:pmix2/lib/libpmix.so, which Slurm's mpi/pmix plugin loads for srun --mpi=pmix (MPI workers under Slurm); slurm-wlm does not depend on it"
)

# What `bazel build` of the binaries needs: the toolchain, and every library
# the @system repository asks pkg-config for (third_party/system_libs.bzl).
BUILD_ONLY=" bazel-bootstrap g++ pkg-config libgrpc++-dev protobuf-compiler protobuf-compiler-grpc
  libprotobuf-dev libabsl-dev libeigen3-dev libgtest-dev libgmock-dev libbenchmark-dev zlib1g-dev
  libcpp-httplib-dev nlohmann-json3-dev dataset-fashion-mnist "

case "${1:-}" in
  ""|--bench) ;;
  --build)
    kept=()
    for entry in "${PACKAGES[@]}"; do
      [[ "$BUILD_ONLY" == *[[:space:]]"${entry%%:*}"[[:space:]]* ]] && kept+=("$entry")
    done
    PACKAGES=("${kept[@]}")
    ;;
  *) echo "usage: $0 [--bench | --build]" >&2; exit 2 ;;
esac

if [ "${1:-}" = "--bench" ]; then
  PACKAGES+=(
    "iperf3:loopback TCP bandwidth, the network limit benchmarks are compared with"
  )
fi

missing=()
for entry in "${PACKAGES[@]}"; do
  pkg="${entry%%:*}"
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup.sh: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "setup.sh: installing ${#missing[@]} missing package(s):"
for entry in "${PACKAGES[@]}"; do
  pkg="${entry%%:*}"
  for m in "${missing[@]}"; do
    [ "$m" = "$pkg" ] && echo "  - $pkg: ${entry#*:}"
  done
done

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup.sh: done"
