#!/usr/bin/env bash
# deploy/lbfgs_reference.py, the single-process L-BFGS reference of issue
# 29's comparisons, on heart_scale (a small real LibSVM set, from Debian's
# liblinear-tools): the loss at w = 0 is log 2, the gradient agrees with
# finite differences, the run converges to a loss below that, a second run
# ends at the same loss, and a malformed line is named with file and line.
set -euo pipefail
script="$TEST_SRCDIR/$TEST_WORKSPACE/deploy/lbfgs_reference.py"
data=/usr/share/doc/liblinear-tools/examples/heart_scale
fail() { echo "lbfgs_reference_test: $*" >&2; exit 1; }
[ -s "$data" ] || fail "$data missing: deploy/setup.sh installs liblinear-tools"
out="$TEST_TMPDIR/run.log"
/usr/bin/python3 "$script" --data "$data" --check_gradient >"$out" || { cat "$out"; fail "the reference failed"; }
field() { sed -n "s/^RESULT .*$1=\([^ ]*\).*/\1/p" "$out" | head -1; }
awk -v v="$(field initial_loss)" 'BEGIN { exit !(v - log(2) < 1e-12 && log(2) - v < 1e-12) }' ||
  fail "loss at w = 0 is $(field initial_loss), not log 2"
awk -v v="$(field gradient_error)" 'BEGIN { exit !(v < 1e-6) }' || fail "gradient error $(field gradient_error)"
[ "$(field converged)" = 1 ] || { cat "$out"; fail "did not converge"; }
awk -v v="$(field grad_norm)" 'BEGIN { exit !(v < 1e-6) }' || fail "final gradient norm $(field grad_norm)"
loss=$(field reference_loss)
awk -v v="$loss" 'BEGIN { exit !(v < 0.5) }' || fail "final loss $loss not below 0.5"
again=$(/usr/bin/python3 "$script" --data "$data" | sed -n 's/^RESULT .*reference_loss=\([^ ]*\).*/\1/p')
[ "$again" = "$loss" ] || fail "a second run ended at $again, not $loss"
printf '1 1:0.5\n+1 2:1 3\n' >"$TEST_TMPDIR/bad.svm"
if /usr/bin/python3 "$script" --data "$TEST_TMPDIR/bad.svm" 2>"$TEST_TMPDIR/bad.err"; then
  fail "a malformed file was accepted"
fi
grep -q "bad.svm:2: feature '3' is not index:value" "$TEST_TMPDIR/bad.err" ||
  { cat "$TEST_TMPDIR/bad.err"; fail "the malformed line was not named"; }
echo "lbfgs_reference_test: PASS: loss $(field initial_loss) -> $loss in $(field iterations) iterations"
