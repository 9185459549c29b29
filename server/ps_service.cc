#include "server/ps_service.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/raw_message.h"
#include "common/table_def.h"
#include "common/wire.h"

namespace ps {
namespace {

// Field numbers of the large bytes fields (see proto/ps.proto).
constexpr int kPushKeyList = 3, kPushValues = 4;
constexpr int kPullKeyList = 3;
constexpr int kPullReplyValues = 1;

grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* ctx, const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// Splits a raw request into its parsed small fields and its raw fields.
template <typename Request>
absl::Status ParseRaw(const grpc::ByteBuffer& buffer, absl::Span<const int> raw_fields,
                      std::vector<grpc::Slice>* slices, Request* header, SplitFields* fields) {
  if (!buffer.Dump(slices).ok()) return absl::InternalError("could not read the request bytes");
  if (absl::Status s = SplitMessage(*slices, raw_fields, fields); !s.ok()) return s;
  if (!header->ParseFromString(fields->header)) {
    return absl::InvalidArgumentError("malformed request: header fields do not parse");
  }
  return absl::OkStatus();
}

// The keys of a request: its ranges, or its packed key list (viewed in place
// when aligned, else copied into *storage).
template <typename Request>
absl::StatusOr<KeySpec> KeysOf(const Request& header, const SegmentedBytes& key_list,
                               std::string* flat, std::vector<uint64_t>* storage) {
  if (!key_list.empty()) {
    if (header.ranges_size() > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("request for table '", header.table(), "' has both ranges and key_list"));
    }
    auto keys = DecodeArray<uint64_t>(key_list.Flatten(flat), storage, "key_list");
    if (!keys.ok()) return keys.status();
    return KeySpec::List(*keys);
  }
  if (header.ranges_size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat("request for table '", header.table(),
                                                   "' names no keys (ranges or key_list)"));
  }
  std::vector<KeySpec::Range> ranges;
  ranges.reserve(header.ranges_size());
  for (const proto::KeyRange& r : header.ranges()) ranges.push_back({r.begin(), r.end()});
  return KeySpec::Ranges(std::move(ranges));
}

grpc::ByteBuffer SerializeToBuffer(const google::protobuf::MessageLite& message) {
  grpc::Slice slice(message.SerializeAsString());
  return grpc::ByteBuffer(&slice, 1);
}

}  // namespace

PsService::PsService(ShardStore* store, int64_t max_message_bytes)
    : store_(store), max_message_bytes_(max_message_bytes) {}

grpc::ServerUnaryReactor* PsService::CreateTable(grpc::CallbackServerContext* ctx,
                                                 const proto::CreateTableRequest* req,
                                                 proto::CreateTableResponse* resp) {
  return Finish(ctx, DoCreateTable(*req, resp));
}

absl::Status PsService::DoCreateTable(const proto::CreateTableRequest& req,
                                      proto::CreateTableResponse* resp) {
  absl::StatusOr<bool> created = store_->CreateTable(req.table());
  if (!created.ok()) return created.status();
  resp->set_created(*created);
  if (*created) {
    LogEvent(absl::StrCat("ps_server ", store_->server_index(), " ", address_),
             absl::StrCat("table created: ", TableDefSummary(req.table())));
  }
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* PsService::Push(grpc::CallbackServerContext* ctx,
                                          const grpc::ByteBuffer* req, grpc::ByteBuffer* resp) {
  return Finish(ctx, DoPush(*req, resp));
}

absl::Status PsService::DoPush(const grpc::ByteBuffer& req, grpc::ByteBuffer* resp) {
  std::vector<grpc::Slice> slices;
  proto::PushRequest header;
  SplitFields fields;
  if (absl::Status s = ParseRaw(req, {kPushKeyList, kPushValues}, &slices, &header, &fields);
      !s.ok()) {
    return s;
  }
  std::string flat_keys, flat_values;
  std::vector<uint64_t> key_storage;
  absl::StatusOr<KeySpec> keys = KeysOf(header, fields.Raw(kPushKeyList), &flat_keys, &key_storage);
  if (!keys.ok()) return keys.status();
  std::vector<float> value_storage;
  auto values = DecodeArray<float>(fields.Raw(kPushValues).Flatten(&flat_values), &value_storage,
                                   absl::StrCat("push values for table '", header.table(), "'"));
  if (!values.ok()) return values.status();
  auto result =
      store_->Push(header.table(), *keys, *values, header.worker_id(), header.request_id());
  if (!result.ok()) return result.status();
  proto::PushResponse reply;
  reply.set_duplicate(result->duplicate);
  reply.set_version(result->version);
  *resp = SerializeToBuffer(reply);
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* PsService::Pull(grpc::CallbackServerContext* ctx,
                                          const grpc::ByteBuffer* req, grpc::ByteBuffer* resp) {
  return Finish(ctx, DoPull(*req, resp));
}

absl::Status PsService::DoPull(const grpc::ByteBuffer& req, grpc::ByteBuffer* resp) {
  std::vector<grpc::Slice> slices;
  proto::PullRequest header;
  SplitFields fields;
  if (absl::Status s = ParseRaw(req, {kPullKeyList}, &slices, &header, &fields); !s.ok()) {
    return s;
  }
  std::string flat_keys;
  std::vector<uint64_t> key_storage;
  absl::StatusOr<KeySpec> keys = KeysOf(header, fields.Raw(kPullKeyList), &flat_keys, &key_storage);
  if (!keys.ok()) return keys.status();
  auto def = store_->GetTableDef(header.table());
  if (!def.ok()) return def.status();
  const uint64_t bytes = keys->size() * def->width() * sizeof(float);
  if (bytes > static_cast<uint64_t>(max_message_bytes_)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("pull of ", keys->size(), " keys of table '", header.table(), "' is ", bytes,
                     " bytes, over this server's message limit of ", max_message_bytes_,
                     " bytes (ps_server --max_message_mb); split the request"));
  }
  // The values are copied from the store straight into the reply's slice.
  grpc::Slice payload;
  auto version = store_->Pull(header.table(), *keys, [&payload](size_t n) {
    payload = grpc::Slice(n);
    return reinterpret_cast<char*>(const_cast<uint8_t*>(payload.begin()));
  });
  if (!version.ok()) return version.status();
  proto::PullResponse reply;
  reply.set_version(*version);
  *resp = BuildMessage(reply, kPullReplyValues, std::move(payload));
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* PsService::Info(grpc::CallbackServerContext* ctx,
                                          const proto::InfoRequest*, proto::InfoResponse* resp) {
  resp->set_server_index(store_->server_index());
  resp->set_num_servers(store_->placement().num_servers());
  resp->set_virtual_nodes(store_->placement().config().virtual_nodes);
  resp->set_slice_size(store_->placement().config().slice_size);
  resp->set_address(address_);
  return Finish(ctx, absl::OkStatus());
}

}  // namespace ps
