// grpc.health.v1.Health/Check on the server's call queue (gRPC's own health
// service runs on gRPC's callback threads, whose polling would undo the
// queue's single thread: docs/experiments/2026-11-27-grpc-threads.md).
// Answers SERVING or NOT_SERVING for the whole server ("") and for each of
// its services, as the ServerTicker last set it; NOT_FOUND for other names.
// Watch is not served (UNIMPLEMENTED). Thread-safe.
#ifndef PS_SERVER_RPC_HEALTH_SERVICE_H_
#define PS_SERVER_RPC_HEALTH_SERVICE_H_

#include <atomic>

#include "server/rpc/data_call_queue.h"

namespace ps {

class HealthService {
 public:
  void Register(DataCallQueue* queue);
  void SetServing(bool serving) { serving_.store(serving); }

 private:
  void Check(DataCall* call);

  std::atomic<bool> serving_{false};
};

}  // namespace ps

#endif  // PS_SERVER_RPC_HEALTH_SERVICE_H_
