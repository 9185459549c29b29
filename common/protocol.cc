#include "common/protocol.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"

namespace ps {
namespace {

// The path of the service's unary method from `input` to `output`.
std::string MethodPathFor(const google::protobuf::Descriptor* input,
                          const google::protobuf::Descriptor* output) {
  const google::protobuf::ServiceDescriptor* service =
      input->file()->FindServiceByName("ParameterServer");
  for (int i = 0; service != nullptr && i < service->method_count(); ++i) {
    const google::protobuf::MethodDescriptor* m = service->method(i);
    if (m->input_type() == input && m->output_type() == output && !m->client_streaming() &&
        !m->server_streaming()) {
      return absl::StrCat("/", service->full_name(), "/", m->name());
    }
  }
  std::abort();  // proto/ps.proto no longer has the method: a build error in spirit
}

}  // namespace

const std::string& PushMethodPath() {
  static const std::string* const path = new std::string(
      MethodPathFor(proto::PushRequest::descriptor(), proto::PushResponse::descriptor()));
  return *path;
}

const std::string& PullMethodPath() {
  static const std::string* const path = new std::string(
      MethodPathFor(proto::PullRequest::descriptor(), proto::PullResponse::descriptor()));
  return *path;
}

const std::string& PushPullMethodPath() {
  static const std::string* const path = new std::string(
      MethodPathFor(proto::PushPullRequest::descriptor(), proto::PushPullResponse::descriptor()));
  return *path;
}

}  // namespace ps
