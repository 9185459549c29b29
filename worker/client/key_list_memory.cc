#include "worker/client/key_list_memory.h"

#include <utility>

namespace ps {

KeyListMemory::KeyListMemory(int num_servers, size_t lists_per_server)
    : capacity_(lists_per_server) {
  for (int s = 0; s < num_servers; ++s) servers_.push_back(std::make_unique<Server>());
}

bool KeyListMemory::Known(int server, uint64_t signature) {
  Server& s = *servers_[server];
  absl::MutexLock lock(&s.mu);
  return s.known.contains(signature);
}

void KeyListMemory::Remember(int server, uint64_t signature) {
  if (capacity_ == 0) return;
  Server& s = *servers_[server];
  absl::MutexLock lock(&s.mu);
  if (!s.known.insert(signature).second) return;
  s.order.push_back(signature);
  while (s.order.size() > capacity_) {
    s.known.erase(s.order.front());
    s.order.pop_front();
  }
}

void KeyListMemory::Forget(int server, uint64_t signature) {
  Server& s = *servers_[server];
  absl::MutexLock lock(&s.mu);
  // Left in `order`: it ages out with the others (a later Remember of the
  // same signature adds it once more, harmlessly).
  s.known.erase(signature);
}

void SendWithKeyLists(std::function<void(KeyListDone)> send,
                      std::function<bool(const absl::Status&)> missed,
                      std::function<bool()> restore, KeyListDone done) {
  KeyListDone first = [send, missed = std::move(missed), restore = std::move(restore),
                       done = std::move(done)](absl::Status status) mutable {
    // Nothing of a missed request was applied: sent again at once, with its
    // lists (no backoff: the server is there).
    if (missed(status) && restore()) {
      send(std::move(done));
      return;
    }
    done(std::move(status));
  };
  send(std::move(first));
}

void OfferKeyLists(KeyListMemory& memory, int server, proto::PushPullRequest* request,
                   std::vector<std::string>* held) {
  for (int k = 0; k < request->pushes_size(); ++k) {
    OfferKeyList(memory, server, request->mutable_pushes(k), &(*held)[k]);
  }
}

bool RestoreKeyLists(KeyListMemory& memory, int server, proto::PushPullRequest* request,
                     std::vector<std::string>* held) {
  bool restored = false;
  for (int k = 0; k < request->pushes_size(); ++k) {
    restored |= RestoreKeyList(memory, server, request->mutable_pushes(k), &(*held)[k]);
  }
  return restored;
}

void NoteKeyListsSent(KeyListMemory& memory, int server, const proto::PushPullRequest& request,
                      const proto::PushPullResponse& reply) {
  for (int k = 0; k < request.pushes_size() && k < reply.results_size(); ++k) {
    if (reply.results(k).code() == 0) NoteKeyListSent(memory, server, request.pushes(k));
  }
}

bool AnyKeyListMiss(const absl::Status& status, const proto::PushPullResponse& reply) {
  if (!status.ok()) return false;
  for (const proto::PullResponse& r : reply.results()) {
    if (IsKeyListMiss(absl::Status(static_cast<absl::StatusCode>(r.code()), r.message()))) {
      return true;
    }
  }
  return false;
}

}  // namespace ps
