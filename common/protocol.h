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
constexpr int kPushPullValuesField = proto::PushPullRequest::kValuesFieldNumber;
constexpr int kPushPullReplyValuesField = proto::PushPullResponse::kValuesFieldNumber;

// Starts the message of the FAILED_PRECONDITION a server returns for a
// key_list_signature it does not hold (proto PushRequest): the client sends
// the request again with its key list.
constexpr char kKeyListNotCached[] = "key list not cached";

// gRPC metadata key of every data call: the logical shard it is for. A
// replicated server holds several shards and serves the one named; a static
// server checks that it is its own.
constexpr char kShardMetadataKey[] = "x-ps-shard";

// "/ps.proto.ParameterServer/<method>" of the unary method of the service
// with the given request and reply types, found in the service's generated
// descriptor: Push (PushRequest -> PushResponse), Pull (PullRequest ->
// PullResponse), PushPull (PushPullRequest -> PushPullResponse).
const std::string& PushMethodPath();
const std::string& PullMethodPath();
const std::string& PushPullMethodPath();

}  // namespace ps

#endif  // PS_COMMON_PROTOCOL_H_
