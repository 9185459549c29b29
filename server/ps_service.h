// gRPC adapter for the ParameterServer service: converts protos, calls the
// ShardStore, converts the status. Holds no state of its own beyond what it
// reports in Info. Thread-safe (the store is).
#ifndef PS_SERVER_PS_SERVICE_H_
#define PS_SERVER_PS_SERVICE_H_

#include <cstdint>
#include <string>

#include "proto/ps.grpc.pb.h"
#include "server/shard_store.h"

namespace ps {

class PsService final : public proto::ParameterServer::Service {
 public:
  // `store` must outlive the service. `max_message_bytes` bounds the size of
  // a pull response.
  PsService(ShardStore* store, int64_t max_message_bytes);

  // Set once the listening port is known; used in Info and in log lines.
  void set_address(const std::string& address) { address_ = address; }

  grpc::Status CreateTable(grpc::ServerContext* ctx, const proto::CreateTableRequest* req,
                           proto::CreateTableResponse* resp) override;
  grpc::Status Push(grpc::ServerContext* ctx, const proto::PushRequest* req,
                    proto::PushResponse* resp) override;
  grpc::Status Pull(grpc::ServerContext* ctx, const proto::PullRequest* req,
                    proto::PullResponse* resp) override;
  grpc::Status Info(grpc::ServerContext* ctx, const proto::InfoRequest* req,
                    proto::InfoResponse* resp) override;

 private:
  ShardStore* const store_;
  const int64_t max_message_bytes_;
  std::string address_;
};

}  // namespace ps

#endif  // PS_SERVER_PS_SERVICE_H_
