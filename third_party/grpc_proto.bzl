"""cc_grpc_library: C++ protobuf + gRPC code from one .proto file.

Runs the system protoc with grpc_cpp_plugin (Debian's protobuf-compiler and
protobuf-compiler-grpc) and wraps the generated sources in a cc_library.
Generated headers are included as "<package>/<name>.pb.h".
"""

def cc_grpc_library(name, src, deps = [], imports = [], visibility = None):
    """`imports`: the .proto files `src` imports (their code comes from `deps`)."""
    if not src.endswith(".proto"):
        fail("cc_grpc_library %s: src must be a .proto file, got %s" % (name, src))
    base = src[:-len(".proto")]
    hdrs = [base + ".pb.h", base + ".grpc.pb.h"]
    srcs = [base + ".pb.cc", base + ".grpc.pb.cc"]
    native.genrule(
        name = name + "_codegen",
        srcs = [src] + imports,
        outs = hdrs + srcs,
        cmd = ("protoc --proto_path=. --cpp_out=$(GENDIR) --grpc_out=$(GENDIR) " +
               "--plugin=protoc-gen-grpc=$$(command -v grpc_cpp_plugin) $(location %s)") % src,
        message = "protoc + grpc_cpp_plugin " + src,
    )
    native.cc_library(
        name = name,
        srcs = srcs,
        hdrs = hdrs,
        deps = deps + ["@system//:grpcpp", "@system//:protobuf"],
        visibility = visibility,
    )
