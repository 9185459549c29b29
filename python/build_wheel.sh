#!/usr/bin/env bash
# Builds the paramserver wheel: the extension with Bazel, then the wheel
# (python/make_wheel.py, with Debian's /usr/bin/python3, whose version and
# platform the wheel is tagged with).
#
#   python/build_wheel.sh [OUT_DIR]     (default: out/ at the repository root)
#
# Install it into any environment of Debian's Python 3.11, offline:
#   /usr/bin/python3 -m venv --system-site-packages ENV
#   ENV/bin/pip install --no-index OUT_DIR/paramserver-*.whl
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out=$(realpath -m "${1:-$repo/out}")
cd "$repo"
bazel build //python:paramserver/_paramserver.so
/usr/bin/python3 python/make_wheel.py --package_dir=python/paramserver \
  --extension=bazel-bin/python/paramserver/_paramserver.so --out_dir="$out"
