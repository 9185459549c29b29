#!/usr/bin/env bash
# The wheel: assembled from the built extension as build_wheel.sh does (Bazel
# has built it already), installed with pip --no-index into a fresh virtual
# environment of Debian's Python, and used from there: help(paramserver)
# describes the module, a round trip against a real ps_server works, and
# paramserver.torch and paramserver.flags import.
set -euo pipefail
# shellcheck source=tests/cluster_lib.sh
source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/cluster_lib.sh"

/usr/bin/python3 "$root/python/make_wheel.py" --package_dir="$root/python/paramserver" \
  --extension="$root/python/paramserver/_paramserver.so" --out_dir="$dir/wheel" \
  >"$dir/make_wheel.log" 2>&1 || { cat "$dir/make_wheel.log"; fail "make_wheel.py failed"; }
wheel=$(tail -n 1 "$dir/make_wheel.log")
tag=$(/usr/bin/python3 -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
[[ $(basename "$wheel") =~ ^paramserver-[0-9.]+-$tag-$tag-linux_x86_64\.whl$ ]] ||
  fail "unexpected wheel name $wheel"
echo "wheel: $(basename "$wheel"), $(stat -c %s "$wheel") bytes"

/usr/bin/python3 -m venv --system-site-packages "$dir/venv" || fail "venv failed"
"$dir/venv/bin/python" -m pip install --no-index --no-cache-dir --disable-pip-version-check \
  "$wheel" >"$dir/pip.log" 2>&1 || { cat "$dir/pip.log"; fail "pip install of the wheel failed"; }

start_servers "$root" "$dir" 1
# Outside the source tree and without PYTHONPATH: the venv's copy is imported.
cd "$dir"
env -u PYTHONPATH PS_SERVERS="$spec" "$dir/venv/bin/python" - <<'PY' || fail "the installed module failed"
import os
import pydoc

import numpy as np

import paramserver as ps

assert os.path.join("venv", "lib") in ps.__file__, ps.__file__
text = pydoc.render_doc(ps, renderer=pydoc.plaintext)
for fragment in ["Python client of the parameter server", "ps.Client(servers=",
                 "class Client", "class Error", "push_pull(self, table: str, grads",
                 "checkpoint(servers"]:
    assert fragment in text, f"help(paramserver) lacks {fragment!r}"
with ps.Client(servers=os.environ["PS_SERVERS"]) as c:
    c.create_table("wheel", size=100, width=2, optimizer="sgd", learning_rate=0.5)
    values = c.push_pull("wheel", np.ones((100, 2), dtype=np.float32))
    assert values.shape == (100, 2) and (values == -0.5).all(), values
    rows = c.pull_keys("wheel", np.array([0, 99], dtype=np.uint64))
    assert (rows == -0.5).all(), rows
# paramserver.torch and the flags come with it (torch from Debian's site packages).
from paramserver.torch import ServerParameters, ShardedEmbeddingBag, Trainer  # noqa: E402
import paramserver.flags  # noqa: E402
assert ShardedEmbeddingBag.__module__.startswith("paramserver.torch"), ShardedEmbeddingBag
print(f"installed paramserver {ps.__version__} from {ps.__file__}: help and a round trip work")
PY
echo "PASS: the wheel installs offline into a fresh venv and works from there"
