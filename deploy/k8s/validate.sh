#!/usr/bin/env bash
# Offline validation of the Kubernetes manifests (no cluster needed):
#
#   deploy/k8s/validate.sh [BASE_DIR]    (default: deploy/k8s/base)
#       1. yamllint (config deploy/k8s/.yamllint, warnings are errors);
#       2. validate/validate.js: the kustomization, every object against the
#          Kubernetes API schema (npm kubernetes-models), unknown fields, and
#          the cross-references no schema sees (see its header).
#       Prints one line per object and `k8s manifests: N objects valid`;
#       exits non-zero on any problem.
#   deploy/k8s/validate.sh --self-test
#       validates deliberately broken copies of the base (in a temporary
#       directory) and fails unless each is rejected with the expected
#       message naming the broken object; the intact copy must pass.
#
# Installs yamllint with apt-get when missing (as root), and the npm packages
# pinned by validate/package.json + package-lock.json into
# ${XDG_CACHE_HOME:-~/.cache}/paramserver/k8s-validate/<hash of both files>
# (never into the repository). Later runs reuse it and need no network.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

usage() {
  echo "usage: $0 [BASE_DIR] | --self-test" >&2
  exit 2
}

ensure_yamllint() {
  command -v yamllint >/dev/null && return 0
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    echo "yamllint is missing; installing it with apt-get" >&2
    local log
    log=$(mktemp)
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y yamllint >"$log" 2>&1; then
      # The package lists may be missing or stale.
      if ! { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y yamllint; } >"$log" 2>&1; then
        tail -n 20 "$log" >&2
        rm -f "$log"
        echo "could not install yamllint" >&2
        return 1
      fi
    fi
    rm -f "$log"
  else
    echo "yamllint is missing: sudo apt-get install -y yamllint" >&2
    return 1
  fi
}

# Sets deps_dir to a directory whose node_modules holds the locked packages.
ensure_node_deps() {
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "node and npm are needed" >&2
    return 1
  fi
  local cache_root key
  cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/paramserver/k8s-validate
  key=$(cat "$here/validate/package.json" "$here/validate/package-lock.json" | sha256sum | cut -c1-16)
  deps_dir=$cache_root/$key
  [[ -f $deps_dir/.complete ]] && return 0
  mkdir -p "$cache_root"
  (
    # One installer at a time; a second run waits, then finds it done.
    flock 9
    [[ -f $deps_dir/.complete ]] && exit 0
    echo "installing the npm packages into $deps_dir" >&2
    tmp=$(mktemp -d "$cache_root/.install.XXXXXX")
    cp "$here/validate/package.json" "$here/validate/package-lock.json" "$tmp/"
    if ! (cd "$tmp" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) >"$tmp.log" 2>&1; then
      cat "$tmp.log" >&2
      rm -rf "$tmp" "$tmp.log"
      echo "npm ci failed" >&2
      exit 1
    fi
    rm -f "$tmp.log"
    touch "$tmp/.complete"
    rm -rf "$deps_dir"
    mv "$tmp" "$deps_dir"
  ) 9>"$cache_root/.lock"
}

validate() {
  local base=$1 files lint=0 check=0
  [[ -d $base ]] || { echo "$base is not a directory" >&2; return 2; }
  files=$(find "$base" -name '*.yaml' -o -name '*.yml' | wc -l)
  yamllint --strict -c "$here/.yamllint" -f parsable "$base" "$here/.yamllint" || lint=$?
  if [[ $lint -eq 0 ]]; then
    echo "yamllint: $files file(s) in $base clean"
  else
    echo "yamllint: FAILED (exit $lint)"
  fi
  # Both run, so that one run shows every problem.
  PS_K8S_DEPS_DIR=$deps_dir node "$here/validate/validate.js" "$base" || check=$?
  [[ $lint -eq 0 && $check -eq 0 ]]
}

# ---------------------------------------------------------------------------
# The self-test: each case breaks a fresh copy of the base with sed (and
# checks that the edit took), then expects validation to fail with output
# matching every given pattern (extended regular expressions).

# shellcheck disable=SC2016  # the $(VAR) and ${VAR} in single quotes are meant literally
self_test() {
  local tmp cases=0
  self_test_tmp=$(mktemp -d)
  trap 'rm -rf "$self_test_tmp"' EXIT
  tmp=$self_test_tmp

  fresh() {  # NAME: a fresh copy of the base in $tmp/NAME
    rm -rf "${tmp:?}/$1"
    cp -r "$here/base" "$tmp/$1"
  }
  edit() {  # CASE FILE SED_SCRIPT
    local f=$tmp/$1/$2
    cp "$f" "$f.orig"
    sed -i "$3" "$f"
    if cmp -s "$f" "$f.orig"; then
      echo "self-test: the edit '$3' changed nothing in $2 (the manifests changed?)" >&2
      exit 1
    fi
    rm "$f.orig"
  }
  expect_failure() {  # CASE DESCRIPTION PATTERN...
    local name=$1 what=$2 out rc=0
    shift 2
    out=$("$here/validate.sh" "$tmp/$name" 2>&1) || rc=$?
    if [[ $rc -eq 0 ]]; then
      printf '%s\n' "$out" >&2
      echo "self-test: FAILED: $name ($what) was accepted" >&2
      exit 1
    fi
    local p
    for p in "$@"; do
      if ! grep -Eq -- "$p" <<<"$out"; then
        printf '%s\n' "$out" >&2
        echo "self-test: FAILED: $name ($what) was rejected, but without a line matching: $p" >&2
        exit 1
      fi
    done
    cases=$((cases + 1))
    echo "self-test: ok  $name: rejected ($what)"
  }

  # The intact copy passes (so the failures below come from the breakage).
  fresh intact
  if ! out=$("$here/validate.sh" "$tmp/intact" 2>&1); then
    printf '%s\n' "$out" >&2
    echo "self-test: FAILED: the intact copy of the base was rejected" >&2
    exit 1
  fi
  echo "self-test: ok  intact: accepted"

  fresh replicas-and-probe
  edit replicas-and-probe ps-server.yaml 's/^  replicas: 3 /  replicas: "three" /'
  edit replicas-and-probe ps-server.yaml '/readinessProbe:/,/port:/s/port: 9100/port: 9999/'
  expect_failure replicas-and-probe 'replicas: "three", readiness probe on a missing port' \
    'StatefulSet/ps-server: schema: spec\.replicas: must be integer' \
    'StatefulSet/ps-server: .*readinessProbe\.httpGet targets port 9999' \
    '^k8s manifests: INVALID'

  fresh unknown-field
  edit unknown-field ps-server.yaml 's/^          livenessProbe:/          livenessProb:/'
  expect_failure unknown-field 'misspelt livenessProbe' \
    'StatefulSet/ps-server: schema: spec\.template\.spec\.containers\[0\]\.livenessProb: unknown field'

  fresh selector
  edit selector ps-server.yaml '0,/^        app\.kubernetes\.io\/component: server$/s//        app.kubernetes.io\/component: srv/'
  expect_failure selector 'pod template labels no longer match the selectors' \
    'StatefulSet/ps-server: spec\.selector .* does not match the pod template labels' \
    'Service/ps-server: spec\.selector .* selects no pod template' \
    'PodDisruptionBudget/ps-server: spec\.selector .* selects no pod template'

  fresh service-name
  edit service-name ps-server.yaml 's/^  serviceName: ps-server$/  serviceName: etcd/'
  expect_failure service-name 'serviceName names a ClusterIP Service' \
    "StatefulSet/ps-server: spec\.serviceName 'etcd' names a Service that is not headless"

  fresh var-ref
  edit var-ref ps-worker.yaml 's/--cluster=\$(PS_CLUSTER)/--cluster=$(PS_CLUSTR)/'
  expect_failure var-ref 'args refer to an undefined $(VAR)' \
    'Job/ps-worker: .*refers to \$\(PS_CLUSTR\)'

  fresh shell-ref
  edit shell-ref ps-server.yaml 's/\${POD_NAMESPACE}/${POD_NAMESPCE}/'
  expect_failure shell-ref 'sh -c script uses an undefined ${VAR}' \
    'StatefulSet/ps-server: .*uses \$\{POD_NAMESPCE\}'

  fresh flags
  edit flags ps-server.yaml 's/--num_servers=3$/--num_servers=4/'
  expect_failure flags '--num_servers disagrees with replicas' \
    'StatefulSet/ps-server: .*--num_servers=4 but spec\.replicas is 3'

  fresh unknown-kind
  edit unknown-kind ps-server.yaml 's/^kind: PodDisruptionBudget$/kind: PodDisruptionBudgett/'
  expect_failure unknown-kind 'a kind the schema does not have' \
    'PodDisruptionBudgett/ps-server: unknown apiVersion/kind policy/v1 PodDisruptionBudgett'

  fresh unlisted
  printf 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: stray\n' >"$tmp/unlisted/stray.yaml"
  expect_failure unlisted 'a YAML file the kustomization does not list' \
    'stray\.yaml is not listed in resources'

  fresh missing
  rm "$tmp/missing/config.yaml"
  expect_failure missing 'a listed file is missing' \
    "resources entry 'config\.yaml' does not exist" \
    "Job/ps-worker: .*names ConfigMap 'paramserver-config', which is not in the base"

  fresh lint
  edit lint config.yaml 's/^  cluster: fashion-mnist$/  cluster: fashion-mnist   /'
  expect_failure lint 'trailing spaces (yamllint)' \
    'config\.yaml:[0-9]+:[0-9]+: \[error\] trailing spaces'

  echo "self-test: $cases broken copies rejected as expected; the intact copy accepted"
}

mode=validate
base=$here/base
case $# in
  0) ;;
  1)
    case $1 in
      --self-test) mode=self-test ;;
      -h | --help | -*) usage ;;
      *) base=$1 ;;
    esac
    ;;
  *) usage ;;
esac

ensure_yamllint
ensure_node_deps
if [[ $mode == self-test ]]; then
  self_test
else
  validate "$base"
fi
