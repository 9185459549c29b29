"""fuzz_target: a libFuzzer target, its corpus replay test and its binary."""

def fuzz_target(name, deps):
    """Defines <name>_fuzzer_lib, <name>_fuzzer_corpus_test and <name>_fuzzer.

    Args:
      name: the target's name; its source is <name>_fuzzer.cc and its seed
        corpus corpus/<name>/.
      deps: the libraries the target fuzzes.
    """
    native.cc_library(
        name = name + "_fuzzer_lib",
        srcs = [name + "_fuzzer.cc"],
        deps = [":fuzz_util"] + deps,
        # LLVMFuzzerTestOneInput is only referenced by libFuzzer's main or
        # replay_main: keep it in the link.
        alwayslink = True,
    )
    native.cc_test(
        name = name + "_fuzzer_corpus_test",
        size = "small",
        srcs = [],
        args = ["fuzz/corpus/" + name],
        data = native.glob(["corpus/" + name + "/**"]),
        deps = [
            ":" + name + "_fuzzer_lib",
            ":replay_main",
        ],
    )
    native.cc_binary(
        name = name + "_fuzzer",
        tags = ["manual"],
        deps = [":" + name + "_fuzzer_lib"],
    )
