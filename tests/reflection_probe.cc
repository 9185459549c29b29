// reflection_probe SERVER SYMBOL: asks a server, through gRPC server
// reflection, for its services, and for the file that defines SYMBOL (a
// service's full name). Prints
//   service NAME            for each service listed
//   method SERVICE.METHOD   for each method of every service in that file
// and exits 0; on any error, prints it and exits 1. reflection_test.sh
// checks the output against what ps_server serves.
#include <cstdio>
#include <memory>
#include <string>

#include "google/protobuf/descriptor.pb.h"
#include "grpcpp/grpcpp.h"
#include "tests/reflection_probe.grpc.pb.h"

namespace {

namespace reflection = ::grpc::reflection::v1alpha;

int Fail(const std::string& what) {
  std::fprintf(stderr, "reflection_probe: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return Fail("usage: reflection_probe HOST:PORT SYMBOL");
  auto stub = reflection::ServerReflection::NewStub(
      grpc::CreateChannel(argv[1], grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto stream = stub->ServerReflectionInfo(&context);

  reflection::ServerReflectionRequest list;
  list.set_list_services("*");
  reflection::ServerReflectionResponse reply;
  if (!stream->Write(list) || !stream->Read(&reply)) return Fail("no answer to list_services");
  if (!reply.has_list_services_response()) {
    return Fail("list_services: " + reply.error_response().error_message());
  }
  for (const auto& service : reply.list_services_response().service()) {
    std::printf("service %s\n", service.name().c_str());
  }

  reflection::ServerReflectionRequest describe;
  describe.set_file_containing_symbol(argv[2]);
  if (!stream->Write(describe) || !stream->Read(&reply)) {
    return Fail("no answer to file_containing_symbol");
  }
  if (!reply.has_file_descriptor_response()) {
    return Fail(std::string("file_containing_symbol ") + argv[2] + ": " +
                reply.error_response().error_message());
  }
  for (const std::string& bytes : reply.file_descriptor_response().file_descriptor_proto()) {
    google::protobuf::FileDescriptorProto file;
    if (!file.ParseFromString(bytes)) return Fail("a file descriptor does not parse");
    for (const auto& service : file.service()) {
      for (const auto& method : service.method()) {
        std::printf("method %s.%s.%s\n", file.package().c_str(), service.name().c_str(),
                    method.name().c_str());
      }
    }
  }
  stream->WritesDone();
  const grpc::Status status = stream->Finish();
  if (!status.ok()) return Fail("stream ended with " + status.error_message());
  return 0;
}
