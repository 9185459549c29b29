// PushBatcher: small asynchronous pushes to a server, sent together in
// PushBatch calls. At most kBatchesInFlight batches are in flight to each
// server: a push that finds a free slot goes out at once with whatever
// queued; otherwise it queues, and when a batch returns (after its pushes'
// dones have run) its slot passes to what queued meanwhile. No thread waits
// for a slot.
//
// Owned by PsClient; the Transport and CallRunner must outlive it.
// Thread-safe. The destructor waits for the batches in flight; no Submit
// may race with it.
#ifndef PS_WORKER_CLIENT_PUSH_BATCHER_H_
#define PS_WORKER_CLIENT_PUSH_BATCHER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "proto/ps.pb.h"
#include "worker/client/call_runner.h"
#include "worker/client/transport.h"

namespace ps {

class PushBatcher {
 public:
  static constexpr int kBatchesInFlight = 4;

  struct Item {
    proto::PushRequest request;  // with its values inline
    // Runs exactly once, on a transport or timer thread, or in Submit:
    // OK with the table's version after the push, or the push's error
    // (version 0): the batch call's final error (CallRunner::Run's), the
    // server's refusal of this push ("server 1 (addr): Push: ..."), or
    // INTERNAL for a reply without this push's result. May Submit again.
    std::function<void(absl::Status status, uint64_t version)> done;
  };

  // Batches go out with `policy` (every retry resends each push with its
  // own request id, so each is de-duplicated on its own).
  PushBatcher(Transport* transport, const CallRunner* runner, const CallPolicy& policy);
  ~PushBatcher();
  PushBatcher(const PushBatcher&) = delete;
  PushBatcher& operator=(const PushBatcher&) = delete;

  // Sends `item` to `server` in a batch, now or when a slot frees.
  void Submit(int server, std::unique_ptr<Item> item);

 private:
  using Items = std::vector<std::unique_ptr<Item>>;
  struct Server {
    absl::Mutex mu;
    Items queue ABSL_GUARDED_BY(mu);
    int in_flight ABSL_GUARDED_BY(mu) = 0;
  };
  struct BatchCall;

  // Sends `items` in one PushBatch call, on a slot already taken.
  void Send(int server, Items items);
  // A batch came back: runs its items' dones, then passes its slot on.
  void Finish(int server, BatchCall& call, const absl::Status& status);

  Transport* const transport_;
  const CallRunner* const runner_;
  const CallPolicy policy_;
  std::vector<std::unique_ptr<Server>> servers_;  // by server index
};

}  // namespace ps

#endif  // PS_WORKER_CLIENT_PUSH_BATCHER_H_
