"""Assembles the paramserver wheel from the package's files and the built extension.

  make_wheel.py --package_dir=python/paramserver \\
      --extension=bazel-bin/python/paramserver/_paramserver.so --out_dir=out

Writes paramserver-<version>-<tag>-<tag>-<platform>.whl (the tags of the
interpreter running this script, which must be the one the extension was
built for: Debian's /usr/bin/python3) and prints its path. A wheel is a zip
of the package and a .dist-info directory (METADATA, WHEEL, RECORD with
each file's sha256); writing it here needs nothing beyond the standard
library, so it works offline. Entries are sorted and dated 1980-01-01, so
the same inputs give the same bytes.
"""

import argparse
import ast
import base64
import hashlib
import importlib.machinery
import os
import sys
import sysconfig
import zipfile

NAME = "paramserver"
PACKAGE_FILES = ["__init__.py", "_errors.py", "flags.py", "py.typed", "torch/__init__.py",
                 "torch/_embedding.py", "torch/_metrics.py", "torch/_parameters.py",
                 "torch/_progress.py", "torch/_row_cache.py", "torch/_tables.py",
                 "torch/_trainer.py"]
SUMMARY = "Python client of the parameter server (NumPy arrays, over the C++ client library)"
ZIP_DATE = (1980, 1, 1, 0, 0, 0)


def version_of(init_py):
    """__version__ of the package, read without importing it."""
    with open(init_py, encoding="utf-8") as f:
        tree = ast.parse(f.read(), init_py)
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and getattr(node.targets[0], "id", None) == "__version__"):
            return ast.literal_eval(node.value)
    sys.exit(f"make_wheel: no __version__ = '...' in {init_py}")


def wheel_tag():
    """cp311-cp311-linux_x86_64 for Debian's Python 3.11 on x86-64."""
    python = f"cp{sys.version_info.major}{sys.version_info.minor}"
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"{python}-{python}-{platform}"


def record_hash(data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode("ascii")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--package_dir", required=True, help="python/paramserver")
    p.add_argument("--extension", required=True, help="the built _paramserver.so")
    p.add_argument("--out_dir", required=True, help="where the wheel goes (created if needed)")
    args = p.parse_args()

    version = version_of(os.path.join(args.package_dir, "__init__.py"))
    tag = wheel_tag()
    dist_info = f"{NAME}-{version}.dist-info"
    # The interpreter's own suffix (.cpython-311-x86_64-linux-gnu.so): pip
    # and importers then see which Python the extension is for.
    extension_name = "_paramserver" + importlib.machinery.EXTENSION_SUFFIXES[0]

    files = []  # (path in the wheel, bytes, executable)
    for name in PACKAGE_FILES:
        with open(os.path.join(args.package_dir, name), "rb") as f:
            files.append((f"{NAME}/{name}", f.read(), False))
    with open(args.extension, "rb") as f:
        files.append((f"{NAME}/{extension_name}", f.read(), True))
    metadata = "\n".join([
        "Metadata-Version: 2.1",
        f"Name: {NAME}",
        f"Version: {version}",
        f"Summary: {SUMMARY}",
        f"Requires-Python: =={sys.version_info.major}.{sys.version_info.minor}.*",
        "Requires-Dist: numpy",
        "",
        "The extension links Debian's gRPC, protobuf and Abseil shared libraries",
        "(deploy/setup.sh installs them). paramserver.torch needs Debian's",
        "python3-torch (and python3-tqdm for its progress bar). See docs/guide/python.md.",
        "",
    ])
    wheel = "\n".join([
        "Wheel-Version: 1.0",
        "Generator: paramserver python/make_wheel.py",
        "Root-Is-Purelib: false",
        f"Tag: {tag}",
        "",
    ])
    files.append((f"{dist_info}/METADATA", metadata.encode("utf-8"), False))
    files.append((f"{dist_info}/WHEEL", wheel.encode("utf-8"), False))
    files.append((f"{dist_info}/top_level.txt", f"{NAME}\n".encode("utf-8"), False))
    record_path = f"{dist_info}/RECORD"
    record = "".join(f"{path},{record_hash(data)},{len(data)}\n" for path, data, _ in files)
    files.append((record_path, (record + f"{record_path},,\n").encode("utf-8"), False))

    os.makedirs(args.out_dir, exist_ok=True)
    out = os.path.join(args.out_dir, f"{NAME}-{version}-{tag}.whl")
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as z:
        # RECORD last, as the wheel format recommends; the rest sorted.
        for path, data, executable in sorted(files[:-1]) + files[-1:]:
            entry = zipfile.ZipInfo(path, date_time=ZIP_DATE)
            entry.compress_type = zipfile.ZIP_DEFLATED
            entry.external_attr = (0o755 if executable else 0o644) << 16
            z.writestr(entry, data)
    print(out)


if __name__ == "__main__":
    main()
