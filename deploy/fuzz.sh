#!/usr/bin/env bash
# Builds the libFuzzer targets of //fuzz with clang, libFuzzer and
# AddressSanitizer (bazel --config=fuzz, see .bazelrc) and runs each for a
# bounded time on a copy of its seed corpus (fuzz/corpus/<target>; the
# repository's corpus is never modified).
#   deploy/fuzz.sh                 # 20 s per target, every target
#   deploy/fuzz.sh 60              # 60 s per target
#   deploy/fuzz.sh 30 idx libsvm   # only these targets
# Environment: FUZZ_JOBS (default 1) targets run at once; FUZZ_OUT a
# directory for the run's logs and crash inputs (default a new /tmp dir).
# Prints per target the executions and the result; exits non-zero if the
# build fails or any fuzzer stops with a crash, leak, timeout or out-of-memory
# (libFuzzer's exit code != 0), naming the input that triggers it. To replay
# one: bazel-out/k8-opt-fuzz/bin/fuzz/<target>_fuzzer <input>, or under gcc
# without sanitizers: bazel run //fuzz:<target>_fuzzer_corpus_test -- <input>.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-20}"
shift || true
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
  echo "usage: $0 [SECONDS_PER_TARGET] [TARGET...]" >&2
  exit 2
fi
if [ $# -gt 0 ]; then
  targets=("$@")
else
  targets=()
  for f in fuzz/*_fuzzer.cc; do
    name="$(basename "$f" _fuzzer.cc)"
    targets+=("$name")
  done
fi
for t in "${targets[@]}"; do
  if [ ! -f "fuzz/${t}_fuzzer.cc" ] || [ ! -d "fuzz/corpus/$t" ]; then
    echo "fuzz.sh: unknown target '$t' (no fuzz/${t}_fuzzer.cc or fuzz/corpus/$t)" >&2
    exit 2
  fi
done

if ! command -v clang >/dev/null || ! command -v clang++ >/dev/null; then
  deploy/setup.sh
fi

labels=()
for t in "${targets[@]}"; do labels+=("//fuzz:${t}_fuzzer"); done
echo "fuzz.sh: bazel build --config=fuzz ${labels[*]}"
build_start=$SECONDS
nice -n 10 bazel build --config=fuzz -- "${labels[@]}"
echo "fuzz.sh: build took $((SECONDS - build_start))s"

# --platform_suffix=-fuzz puts the binaries in bazel-out/k8-opt-fuzz/bin; ask
# bazel rather than trust the bazel-bin symlink (it points at the gcc build).
bin="$(bazel info --config=fuzz bazel-bin 2>/dev/null)/fuzz"
[ -x "$bin/${targets[0]}_fuzzer" ] || bin="bazel-out/k8-opt-fuzz/bin/fuzz"

out="${FUZZ_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/ps-fuzz.XXXXXX")}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
jobs="${FUZZ_JOBS:-1}"
echo "fuzz.sh: ${#targets[@]} targets, ${seconds}s each, $jobs at a time; logs in $out"

# Runs one target; leaves $out/<t>/{log,rc,crashes/}.
run_one() {
  local t="$1" dir="$out/$1"
  rm -rf "$dir"
  mkdir -p "$dir/corpus" "$dir/crashes"
  cp -R "fuzz/corpus/$t/." "$dir/corpus/"
  local rc=0
  (cd "$dir" && nice -n 10 "$bin/${t}_fuzzer" corpus \
    -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=10 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="$dir/crashes/" \
    >"$dir/log" 2>&1) || rc=$?
  echo "$rc" >"$dir/rc"
}

run_start=$SECONDS
running=0
for t in "${targets[@]}"; do
  run_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait || true

failed=0
printf '%-22s %12s %8s %7s  %s\n' TARGET EXECS EXEC/S CORPUS RESULT
for t in "${targets[@]}"; do
  dir="$out/$t"
  rc="$(cat "$dir/rc")"
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -1)"
  speed="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/log" | tail -1)"
  if [ -z "$execs" ]; then  # no final stats after a crash: the last status line
    execs="$(grep -o '^#[0-9]*' "$dir/log" | tail -1 | tr -d '#')"
  fi
  units="$(find "$dir/corpus" -type f | wc -l)"
  if [ "$rc" = 0 ]; then
    result="ok"
  else
    failed=$((failed + 1))
    what="$(grep -m1 -o 'ERROR: [A-Za-z]*Sanitizer: [a-z-]*\|ERROR: libFuzzer: [a-z-]*\|FUZZ INVARIANT BROKEN.*' "$dir/log" || true)"
    artifacts="$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$dir/log" | tr '\n' ' ')"
    result="FAILED (exit $rc) ${what:-see $dir/log}; input: ${artifacts:-none written}"
  fi
  printf '%-22s %12s %8s %7s  %s\n' "$t" "${execs:-?}" "${speed:-?}" "$units" "$result"
done
echo "fuzz.sh: fuzzing took $((SECONDS - run_start))s"

if [ "$failed" -gt 0 ]; then
  echo "fuzz.sh: $failed of ${#targets[@]} fuzzers FAILED; logs and crash inputs under $out" >&2
  exit 1
fi
# Nothing found: drop the corpus copies, keep the logs.
for t in "${targets[@]}"; do rm -rf "${out:?}/$t/corpus"; done
echo "fuzz.sh: all ${#targets[@]} fuzzers ran clean; logs in $out"
