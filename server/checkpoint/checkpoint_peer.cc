#include "server/checkpoint/checkpoint_peer.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_channels.h"
#include "common/grpc_status.h"
#include "grpcpp/client_context.h"
#include "proto/admin.grpc.pb.h"

namespace ps {
namespace {

class GrpcCheckpointPeer final : public CheckpointPeer {
 public:
  // shard >= 0: every call names that shard (a replicated server's).
  GrpcCheckpointPeer(std::string name, const std::string& address, int shard,
                     const PeerSecurity* security)
      : name_(std::move(name)), shard_(shard) {
    stub_ = proto::PsAdmin::NewStub(NewPeerChannel(address, security));
  }

  absl::StatusOr<proto::CheckpointResponse> Call(const proto::CheckpointRequest& request,
                                                 absl::Duration timeout) override {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    proto::CheckpointResponse response;
    proto::CheckpointRequest named = request;
    if (shard_ >= 0) named.set_shard(static_cast<uint32_t>(shard_));
    absl::Status status = FromGrpcStatus(stub_->Checkpoint(&context, named, &response));
    if (!status.ok()) {
      return absl::Status(status.code(), absl::StrCat(name_, ": ", status.message()));
    }
    return response;
  }

  const std::string& name() const override { return name_; }

 private:
  const std::string name_;
  const int shard_;
  std::unique_ptr<proto::PsAdmin::Stub> stub_;
};

}  // namespace

std::unique_ptr<CheckpointPeer> NewGrpcCheckpointPeer(int server_index, const std::string& address,
                                                      const PeerSecurity* security) {
  return std::make_unique<GrpcCheckpointPeer>(
      absl::StrCat("server ", server_index, " (", address, ")"), address, -1, security);
}

absl::StatusOr<std::vector<std::unique_ptr<CheckpointPeer>>> NewShardCheckpointPeers(
    const ShardRing& ring, const PeerSecurity* security) {
  std::vector<std::unique_ptr<CheckpointPeer>> peers;
  for (int shard = 0; shard < ring.num_shards(); ++shard) {
    std::optional<uint32_t> primary = ring.Primary(shard);
    if (!primary) {
      return absl::UnavailableError(absl::StrCat(
          "shard ", shard, " has no primary in ring version ", ring.version(),
          " (every copy lost, or its servers have not come back): no consistent cut can be taken"));
    }
    const std::string address = ring.Address(*primary);
    peers.push_back(std::make_unique<GrpcCheckpointPeer>(
        absl::StrCat("shard ", shard, " at server ", *primary, " (", address, ")"), address, shard,
        security));
  }
  return peers;
}

}  // namespace ps
