#!/usr/bin/env bash
# Runs clang-tidy, with the check set of the root .clang-tidy (findings are
# errors there), over every .cc under server/ and worker/client/ except the
# unit tests (*_test.cc); fixtures, benchmarks and the headers they include
# from server/, worker/ and common/ are checked. Builds //proto/... for the
# generated headers, writes a compile_commands.json (the flags the BUILD
# files give: -std=c++17, -I., the generated headers, Eigen) to a temporary
# directory, runs clang-tidy on 2 files at a time, prints the findings and a
# one-line summary. Exits 1 on any finding (2 when it cannot run).
#   deploy/clang_tidy.sh                          # the whole set
#   deploy/clang_tidy.sh server/core/ps_core.cc   # only these files
#   CLANG_TIDY_JOBS=4 deploy/clang_tidy.sh        # more files at a time
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

clang_tidy="${CLANG_TIDY:-clang-tidy}"
jobs="${CLANG_TIDY_JOBS:-2}"
if ! command -v "$clang_tidy" >/dev/null; then
  echo "clang_tidy.sh: $clang_tidy not found (apt-get install clang-tidy)" >&2
  exit 2
fi

if [ $# -gt 0 ]; then
  files=("$@")
else
  mapfile -t files < <(find server worker/client -name '*.cc' ! -name '*_test.cc' | sort)
fi

start=$SECONDS
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# The generated proto headers, copied so that a concurrent build cannot
# change them under clang-tidy.
echo "clang_tidy.sh: bazel build //proto/..."
if ! nice -n 19 bazel build //proto/... >"$tmp/bazel.log" 2>&1; then
  cat "$tmp/bazel.log" >&2
  echo "clang_tidy.sh: bazel build //proto/... failed" >&2
  exit 2
fi
bin="$(bazel info bazel-bin 2>/dev/null)"
mkdir -p "$tmp/gen/proto"
cp "$bin"/proto/*.pb.h "$tmp/gen/proto/"

# Outside headers are -isystem so that clang-tidy reports nothing in them.
# The static analyzer (clang-analyzer-core.*) runs in its shallow mode: it
# inlines only small callees, which makes it ~6x faster (in deep mode it is
# most of the time: 10 s for server/core/clock_tracker.cc alone).
flags=(-std=c++17 -I. -isystem "$tmp/gen" -Xclang -analyzer-config -Xclang mode=shallow)
for f in $(pkg-config --cflags grpc++ protobuf absl_strings absl_status absl_synchronization \
  absl_time absl_flags eigen3); do
  case "$f" in
    -I*) flags+=(-isystem "${f#-I}") ;;
    *) flags+=("$f") ;;
  esac
done
python3 - "$root" "$tmp/compile_commands.json" "${flags[@]}" -- "${files[@]}" <<'EOF'
import json, os, sys
root, out = sys.argv[1], sys.argv[2]
sep = sys.argv.index("--")
flags, files = sys.argv[3:sep], sys.argv[sep + 1:]
db = [{"directory": root, "file": os.path.join(root, f),
       "arguments": ["clang++"] + flags + ["-c", os.path.join(root, f)]} for f in files]
with open(out, "w") as fh:
    json.dump(db, fh, indent=1)
EOF

echo "clang_tidy.sh: generated headers ready after $((SECONDS - start))s;" \
  "clang-tidy on ${#files[@]} files, $jobs at a time"
mkdir "$tmp/out"
export clang_tidy tmp
# One log per file (the path with / as __), so parallel output does not interleave.
printf '%s\n' "${files[@]}" | xargs -P "$jobs" -I{} sh -c \
  'f="$1"; log="$tmp/out/$(echo "$f" | sed "s|/|__|g").log";
   if nice -n 19 "$clang_tidy" -p "$tmp" --quiet "$f" >"$log" 2>&1; then rm -f "$log"; fi' \
  sh {} || true

failed=0
for log in "$tmp"/out/*.log; do
  [ -e "$log" ] || continue
  failed=$((failed + 1))
  grep -vE '^[0-9]+ warnings? (generated|treated as errors)\.?$' "$log" || true
done
# A finding in a header shows up once per file that includes it: count it once.
findings=0
if [ "$failed" -gt 0 ]; then
  findings=$(cat "$tmp"/out/*.log | grep -E '^[^ ].*:[0-9]+:[0-9]+: (warning|error):' |
    sed 's|/\./|/|' | sort -u | wc -l || true)
fi

elapsed=$((SECONDS - start))
if [ "$failed" -gt 0 ]; then
  echo "clang_tidy.sh: $findings findings in $failed of ${#files[@]} files (${elapsed}s);" \
    "the check set is in .clang-tidy"
  exit 1
fi
echo "clang_tidy.sh: ${#files[@]} files clean (${elapsed}s)"
