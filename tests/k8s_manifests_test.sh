#!/usr/bin/env bash
# The Kubernetes manifests, validated offline (no cluster runs here): yamllint,
# the Kubernetes API schema (npm kubernetes-models) and cross-references
# (deploy/k8s/validate.sh); then the validator's self-test, which must reject
# deliberately broken copies. The npm packages are cached per machine.
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
export XDG_CACHE_HOME="${PS_CACHE_DIR:-/var/tmp/paramserver-cache}"
"$root/deploy/k8s/validate.sh"
"$root/deploy/k8s/validate.sh" --self-test
echo "PASS: manifests valid; broken copies rejected"
