#!/usr/bin/env bash
# Runs the whole test suite (unit and integration) with Bazel, installing the
# system packages the tests need first (deploy/setup.sh --test) when any is
# missing. Extra arguments go to bazel test.
set -euo pipefail
cd "$(dirname "$0")/.."
deploy/setup.sh --test
bazel test //... "$@"
