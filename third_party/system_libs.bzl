"""Repository rule exposing Debian's system C++ libraries to Bazel.

Each library becomes a cc_library in @system whose link flags come from
pkg-config (headers live in /usr/include, which the compiler already
searches). Eigen's headers sit in /usr/include/eigen3, so they are linked
into the repository and exported with an include path; so are Python's (for
the pybind11 extension in python/) and Open MPI's (for worker/collective/),
from the directories pkg-config names.
"""

# Target name -> pkg-config modules.
_PKG_CONFIG_LIBS = {
    "grpcpp": ["grpc++"],
    "protobuf": ["protobuf"],
    "absl_flags": ["absl_flags", "absl_flags_parse", "absl_flags_usage"],
    "absl_status": ["absl_status", "absl_statusor"],
    "absl_strings": ["absl_strings", "absl_str_format"],
    "absl_synchronization": ["absl_synchronization"],
    "absl_time": ["absl_time"],
    "absl_hash": ["absl_hash", "absl_raw_hash_set"],
    "absl_inlined_vector": ["absl_inlined_vector"],
    "absl_random": ["absl_random_random"],
    "zlib": ["zlib"],
    "httplib": ["cpp-httplib"],
    "gtest": ["gtest", "gmock"],
    "gtest_main": ["gtest_main"],
    "benchmark": ["benchmark"],
    "rocksdb": ["rocksdb"],
}

# Libraries whose headers must be compiled with the -D flags pkg-config
# gives: Debian's cpp-httplib is a compiled library built with OpenSSL
# support, which changes the layout of its Request and client classes; code
# that includes httplib.h without the same macros would disagree with it.
_WITH_DEFINES = ["httplib"]

# Libraries without a pkg-config module: target name -> link flags.
_PLAIN_LIBS = {
    "grpcpp_reflection": ["-lgrpc++_reflection"],
}

# Libraries only the tests and benchmarks use: target name -> the package
# that has it and the deploy/setup.sh profile that installs it. Missing,
# their targets fail to build saying so, and the binaries build without them
# (deploy/setup.sh --build does not install them).
_OPTIONAL = {
    "gtest": ("libgmock-dev", "--test"),
    "gtest_main": ("libgtest-dev", "--test"),
    "benchmark": ("libbenchmark-dev", "--test"),
    "rocksdb": ("librocksdb-dev", "--test"),
}

def _pkg_config_libs(ctx, modules):
    result = ctx.execute(["pkg-config", "--libs"] + modules)
    if result.return_code != 0:
        fail("pkg-config could not find %s: %s\nRun deploy/setup.sh to install the system libraries." %
             (" ".join(modules), result.stderr))
    return result.stdout.strip().split(" ")

def _unbuildable(name, message):
    """A cc_library `name` whose every use fails the build with `message`."""
    return [
        "genrule(",
        "    name = %r," % (name + "_missing"),
        "    outs = [%r]," % (name + "_missing.h"),
        "    cmd = %r," % ("echo '%s' >&2; exit 1" % message),
        ")",
        "",
        "cc_library(",
        "    name = %r," % name,
        "    hdrs = [%r]," % (":" + name + "_missing.h"),
        ")",
        "",
    ]

def _system_libs_impl(ctx):
    lines = ['package(default_visibility = ["//visibility:public"])', ""]
    for name, modules in _PKG_CONFIG_LIBS.items():
        if name in _OPTIONAL and ctx.execute(["pkg-config", "--exists"] + modules).return_code != 0:
            package, profile = _OPTIONAL[name]
            lines.extend(_unbuildable(name, "%s needs %s: run deploy/setup.sh %s." %
                                            (name, package, profile)))
            continue
        linkopts = [f for f in _pkg_config_libs(ctx, modules) if f]
        if name == "benchmark":
            linkopts = linkopts + ["-lpthread"]
        lines.append("cc_library(")
        lines.append("    name = %r," % name)
        lines.append("    linkopts = %r," % linkopts)
        if name in _WITH_DEFINES:
            cflags = ctx.execute(["pkg-config", "--cflags"] + modules).stdout.strip().split(" ")
            lines.append("    defines = %r," % [f[2:] for f in cflags if f.startswith("-D")])
        lines.append(")")
        lines.append("")

    for name, flags in _PLAIN_LIBS.items():
        lines.append("cc_library(")
        lines.append("    name = %r," % name)
        lines.append("    linkopts = %r," % flags)
        lines.append('    deps = [":grpcpp"],')
        lines.append(")")
        lines.append("")

    eigen = ctx.path("/usr/include/eigen3")
    if not eigen.exists:
        fail("/usr/include/eigen3 not found. Run deploy/setup.sh (package libeigen3-dev).")
    ctx.symlink(eigen, "eigen3")
    lines.append("cc_library(")
    lines.append('    name = "eigen",')
    lines.append('    hdrs = glob(["eigen3/Eigen/**", "eigen3/unsupported/Eigen/**"]),')
    lines.append('    includes = ["eigen3"],')
    lines.append(")")
    lines.append("")
    lines.extend(_python_libs(ctx))
    lines.extend(_mpi_lib(ctx))
    ctx.file("WORKSPACE", 'workspace(name = "%s")\n' % ctx.name)
    ctx.file("BUILD", "\n".join(lines) + "\n")

def _python_libs(ctx):
    """python_headers (Python.h and what it includes) and pybind11 (header-only).

    Extension modules do not link libpython: the interpreter that loads them
    provides its symbols. Python.h's directory (the first -I of pkg-config's
    python3) is linked into the repository; the architecture's pyconfig.h it
    includes is reached through /usr/include.

    Without python3-dev or pybind11-dev only the Python module fails to
    build, saying which package is missing: the rest of the repository (and
    an image that installs only what the servers need) builds without them.
    """
    result = ctx.execute(["pkg-config", "--cflags-only-I", "python3"])
    include_dirs = [f[2:] for f in result.stdout.strip().split(" ") if f.startswith("-I")]
    missing = []
    if result.return_code != 0 or not include_dirs or not ctx.path(include_dirs[0] + "/Python.h").exists:
        missing.append("python3-dev")
    if not ctx.path("/usr/include/pybind11/pybind11.h").exists:
        missing.append("pybind11-dev")
    if missing:
        message = "The Python module needs %s: run deploy/setup.sh." % " and ".join(missing)
        return [
            "genrule(",
            '    name = "python_missing",',
            '    outs = ["python_missing.h"],',
            "    cmd = %r," % ("echo '%s' >&2; exit 1" % message),
            ")",
            "",
            "cc_library(",
            '    name = "python_headers",',
            '    hdrs = [":python_missing.h"],',
            ")",
            "",
            "cc_library(",
            '    name = "pybind11",',
            '    deps = [":python_headers"],',
            ")",
            "",
        ]
    ctx.symlink(include_dirs[0], "python_include")
    return [
        "cc_library(",
        '    name = "python_headers",',
        '    hdrs = glob(["python_include/**/*.h"]),',
        '    includes = ["python_include"],',
        ")",
        "",
        "# Its headers are in /usr/include/pybind11.",
        "cc_library(",
        '    name = "pybind11",',
        '    deps = [":python_headers"],',
        ")",
        "",
    ]

def _mpi_lib(ctx):
    """mpi: Open MPI's C library (libopenmpi-dev), its headers linked in.

    Without it, `mpi` defines PS_NO_MPI: worker/collective/mpi_collective.cc
    then builds an MpiCollective whose Start() says how to get MPI, so that
    the default job's binaries build without Open MPI's 56 packages.
    """
    cflags = ctx.execute(["pkg-config", "--cflags-only-I", "ompi-c"])
    libs = ctx.execute(["pkg-config", "--libs", "ompi-c"])
    include_dirs = [f[2:] for f in cflags.stdout.strip().split(" ") if f.startswith("-I")]
    if (cflags.return_code != 0 or libs.return_code != 0 or not include_dirs or
        not ctx.path(include_dirs[0] + "/mpi.h").exists):
        return [
            "cc_library(",
            '    name = "mpi",',
            '    defines = ["PS_NO_MPI"],',
            ")",
            "",
        ]
    ctx.symlink(include_dirs[0], "mpi_include")
    return [
        "cc_library(",
        '    name = "mpi",',
        '    hdrs = glob(["mpi_include/**/*.h"]),',
        '    includes = ["mpi_include"],',
        "    linkopts = %r," % [f for f in libs.stdout.strip().split(" ") if f],
        ")",
        "",
    ]

system_libs = repository_rule(
    implementation = _system_libs_impl,
    local = True,
    environ = ["PKG_CONFIG_PATH"],
)
