// The protocol constants both sides of the raw data path need, taken from the
// generated code (proto/ps.proto) rather than written out by hand: the field
// numbers of the large bytes fields, and the method paths of the raw Push
// and Pull methods. Thread-safe.
#ifndef PS_COMMON_PROTOCOL_H_
#define PS_COMMON_PROTOCOL_H_

#include <string>

#include "proto/ps.pb.h"

namespace ps {

constexpr int kPushKeyListField = proto::PushRequest::kKeyListFieldNumber;
constexpr int kPushValuesField = proto::PushRequest::kValuesFieldNumber;
constexpr int kPullKeyListField = proto::PullRequest::kKeyListFieldNumber;
constexpr int kPullReplyValuesField = proto::PullResponse::kValuesFieldNumber;

// "/ps.proto.ParameterServer/<method>" of the unary method of the service
// that takes PushRequest (resp. PullRequest), found in the service's
// generated descriptor.
const std::string& PushMethodPath();
const std::string& PullMethodPath();

}  // namespace ps

#endif  // PS_COMMON_PROTOCOL_H_
