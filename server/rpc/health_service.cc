#include "server/rpc/health_service.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"

namespace ps {
namespace {

// grpc.health.v1's messages, hand-coded (Debian ships no generated code for
// them): HealthCheckRequest { string service = 1; } and
// HealthCheckResponse { ServingStatus status = 1; }, SERVING = 1,
// NOT_SERVING = 2.
constexpr uint32_t kServiceTag = (1 << 3) | 2;
constexpr char kServing = 1, kNotServing = 2;

// The service name asked for, or false when the request does not parse.
bool ParseService(const grpc::ByteBuffer& request, std::string* service) {
  grpc::Slice flat;
  if (!request.DumpToSingleSlice(&flat).ok()) return false;
  google::protobuf::io::CodedInputStream in(flat.begin(), static_cast<int>(flat.size()));
  service->clear();
  while (uint32_t tag = in.ReadTag()) {
    if (tag == kServiceTag) {
      uint32_t length = 0;
      if (!in.ReadVarint32(&length) || length > (1 << 10) || !in.ReadString(service, length)) {
        return false;
      }
    } else if (!google::protobuf::internal::WireFormatLite::SkipField(&in, tag)) {
      return false;
    }
  }
  return in.ConsumedEntireMessage();
}

}  // namespace

void HealthService::Register(DataCallQueue* queue) {
  queue->Handle("/grpc.health.v1.Health/Check", [this](DataCall* call) { Check(call); });
}

void HealthService::Check(DataCall* call) {
  std::string service;
  if (!ParseService(call->request(), &service)) {
    return call->Finish(absl::InvalidArgumentError("malformed HealthCheckRequest"));
  }
  if (!service.empty() && service != "ps.proto.ParameterServer" && service != "ps.proto.PsAdmin" &&
      service != "ps.proto.PsReplication") {
    return call->Finish(absl::NotFoundError(absl::StrCat("unknown service '", service, "'")));
  }
  const char reply[] = {8, serving_.load() ? kServing : kNotServing};
  grpc::Slice slice(reply, sizeof reply);
  call->Finish(absl::OkStatus(), grpc::ByteBuffer(&slice, 1));
}

}  // namespace ps
