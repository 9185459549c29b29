#include "worker/client/push_batcher.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ps {

struct PushBatcher::BatchCall {
  Items items;
  proto::PushBatchRequest request;
  proto::PushBatchResponse reply;
};

PushBatcher::PushBatcher(Transport* transport, const CallRunner* runner, const CallPolicy& policy)
    : transport_(transport), runner_(runner), policy_(policy) {
  for (int s = 0; s < transport->num_servers(); ++s) servers_.push_back(std::make_unique<Server>());
}

PushBatcher::~PushBatcher() {
  // No push is submitted any more: a server whose batches have all returned
  // stays idle.
  for (const std::unique_ptr<Server>& server : servers_) {
    Server& b = *server;
    absl::MutexLock lock(&b.mu);
    auto idle = [&b]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(b.mu) { return b.in_flight == 0; };
    b.mu.Await(absl::Condition(&idle));
  }
}

void PushBatcher::Submit(int server, std::unique_ptr<Item> item) {
  Server& b = *servers_[server];
  Items batch;
  {
    absl::MutexLock lock(&b.mu);
    b.queue.push_back(std::move(item));
    if (b.in_flight == kBatchesInFlight) return;  // goes out when a batch returns
    ++b.in_flight;
    batch.swap(b.queue);
  }
  Send(server, std::move(batch));
}

void PushBatcher::Send(int server, Items items) {
  auto call = std::make_shared<BatchCall>();
  call->items = std::move(items);
  for (auto& item : call->items) call->request.add_pushes()->Swap(&item->request);
  // Retries resend every push with its own request id: each is de-duplicated
  // on its own.
  runner_->RunAsync(
      {server}, "PushBatch", policy_,
      [this, server, call](size_t, absl::Time deadline, Transport::Done d) {
        call->reply.Clear();
        transport_->PushBatch(server, call->request, deadline, &call->reply, std::move(d));
      },
      [this, server, call](std::vector<absl::Status> statuses) {
        Finish(server, *call, statuses[0]);
      });
}

void PushBatcher::Finish(int server, BatchCall& call, const absl::Status& status) {
  const proto::PushBatchResponse& reply = call.reply;
  std::vector<absl::Status> results(call.items.size());
  for (size_t i = 0; i < results.size(); ++i) {
    if (!status.ok()) {
      results[i] = status;
    } else if (i >= static_cast<size_t>(reply.results_size())) {
      results[i] = absl::InternalError(absl::StrCat(transport_->ServerName(server),
                                                    ": PushBatch reply has ", reply.results_size(),
                                                    " results for ", call.items.size(), " pushes"));
    } else if (reply.results(i).code() != 0) {
      results[i] = absl::Status(
          static_cast<absl::StatusCode>(reply.results(i).code()),
          absl::StrCat(transport_->ServerName(server), ": Push: ", reply.results(i).message()));
    }
  }
  // The dones first: pushes they start queue behind this batch's slot and go
  // out together in the next batch.
  for (size_t i = 0; i < results.size(); ++i) {
    const uint64_t version = results[i].ok() ? reply.results(i).version() : 0;
    call.items[i]->done(std::move(results[i]), version);
  }
  // This batch's slot passes to what queued meanwhile, or is freed (last:
  // the batcher may be destroyed once no slot is taken).
  Server& b = *servers_[server];
  Items next;
  {
    absl::MutexLock lock(&b.mu);
    if (b.queue.empty()) {
      --b.in_flight;
    } else {
      next.swap(b.queue);
    }
  }
  if (!next.empty()) Send(server, std::move(next));
}

}  // namespace ps
