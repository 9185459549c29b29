#include "server/ps_service.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/table_def.h"
#include "common/wire.h"

namespace ps {
namespace {

// The keys of a request, viewing packed key bytes in place when aligned.
template <typename Request>
absl::StatusOr<KeySpec> KeysOf(const Request& req, std::vector<uint64_t>* storage) {
  if (!req.key_list().empty()) {
    if (req.ranges_size() > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("request for table '", req.table(), "' has both ranges and key_list"));
    }
    auto keys = DecodeArray<uint64_t>(req.key_list(), storage, "key_list");
    if (!keys.ok()) return keys.status();
    return KeySpec::List(*keys);
  }
  if (req.ranges_size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("request for table '", req.table(), "' names no keys (ranges or key_list)"));
  }
  std::vector<KeySpec::Range> ranges;
  ranges.reserve(req.ranges_size());
  for (const proto::KeyRange& r : req.ranges()) ranges.push_back({r.begin(), r.end()});
  return KeySpec::Ranges(std::move(ranges));
}

}  // namespace

PsService::PsService(ShardStore* store, int64_t max_message_bytes)
    : store_(store), max_message_bytes_(max_message_bytes) {}

grpc::Status PsService::CreateTable(grpc::ServerContext*, const proto::CreateTableRequest* req,
                                    proto::CreateTableResponse* resp) {
  absl::StatusOr<bool> created = store_->CreateTable(req->table());
  if (!created.ok()) return ToGrpcStatus(created.status());
  resp->set_created(*created);
  if (*created) {
    LogEvent(absl::StrCat("ps_server ", store_->server_index(), " ", address_),
             absl::StrCat("table created: ", TableDefSummary(req->table())));
  }
  return grpc::Status::OK;
}

grpc::Status PsService::Push(grpc::ServerContext*, const proto::PushRequest* req,
                             proto::PushResponse* resp) {
  std::vector<uint64_t> key_storage;
  absl::StatusOr<KeySpec> keys = KeysOf(*req, &key_storage);
  if (!keys.ok()) return ToGrpcStatus(keys.status());
  std::vector<float> value_storage;
  auto values = DecodeArray<float>(req->values(), &value_storage,
                                   absl::StrCat("push values for table '", req->table(), "'"));
  if (!values.ok()) return ToGrpcStatus(values.status());
  auto result = store_->Push(req->table(), *keys, *values, req->worker_id(), req->request_id());
  if (!result.ok()) return ToGrpcStatus(result.status());
  resp->set_duplicate(result->duplicate);
  resp->set_version(result->version);
  return grpc::Status::OK;
}

grpc::Status PsService::Pull(grpc::ServerContext*, const proto::PullRequest* req,
                             proto::PullResponse* resp) {
  std::vector<uint64_t> key_storage;
  absl::StatusOr<KeySpec> keys = KeysOf(*req, &key_storage);
  if (!keys.ok()) return ToGrpcStatus(keys.status());
  auto def = store_->GetTableDef(req->table());
  if (!def.ok()) return ToGrpcStatus(def.status());
  const uint64_t bytes = keys->size() * def->width() * sizeof(float);
  if (bytes > static_cast<uint64_t>(max_message_bytes_)) {
    return ToGrpcStatus(absl::ResourceExhaustedError(
        absl::StrCat("pull of ", keys->size(), " keys of table '", req->table(), "' is ", bytes,
                     " bytes, over this server's message limit of ", max_message_bytes_,
                     " bytes (ps_server --max_message_mb); split the request")));
  }
  auto version = store_->Pull(req->table(), *keys, resp->mutable_values());
  if (!version.ok()) return ToGrpcStatus(version.status());
  resp->set_version(*version);
  return grpc::Status::OK;
}

grpc::Status PsService::Info(grpc::ServerContext*, const proto::InfoRequest*,
                             proto::InfoResponse* resp) {
  resp->set_server_index(store_->server_index());
  resp->set_num_servers(store_->placement().num_servers());
  resp->set_virtual_nodes(store_->placement().config().virtual_nodes);
  resp->set_slice_size(store_->placement().config().slice_size);
  resp->set_address(address_);
  return grpc::Status::OK;
}

}  // namespace ps
