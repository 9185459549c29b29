// Key-list caching, the client's half (PS paper, section 4.2): which key
// lists each server has been sent in full, so that a repeat sends only the
// list's signature (proto PushRequest.key_list_signature). The memory is a
// guess: a server may have dropped a list since (its cache is bounded, or it
// restarted); the server then answers "key list not cached" and the client
// sends the list again (OfferKeyList, RestoreKeyList, SendWithKeyLists).
// Bounded per server, oldest first out. Thread-safe.
#ifndef PS_WORKER_CLIENT_KEY_LIST_MEMORY_H_
#define PS_WORKER_CLIENT_KEY_LIST_MEMORY_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "common/hash.h"
#include "common/protocol.h"
#include "proto/ps.pb.h"

namespace ps {

class KeyListMemory {
 public:
  // Lists of fewer keys are always sent: their signature saves too little.
  static constexpr size_t kMinKeys = 8;

  KeyListMemory(int num_servers, size_t lists_per_server);

  bool Known(int server, uint64_t signature);
  void Remember(int server, uint64_t signature);
  void Forget(int server, uint64_t signature);

 private:
  struct Server {
    absl::Mutex mu;
    absl::flat_hash_set<uint64_t> known ABSL_GUARDED_BY(mu);
    std::deque<uint64_t> order ABSL_GUARDED_BY(mu);  // oldest first
  };
  const size_t capacity_;
  std::vector<std::unique_ptr<Server>> servers_;
};

// The server's answer to a signature it does not hold.
inline bool IsKeyListMiss(const absl::Status& status) {
  return status.code() == absl::StatusCode::kFailedPrecondition &&
         absl::StrContains(status.message(), kKeyListNotCached);
}

// Before a request (PushRequest or PullRequest) with a key list goes to
// `server`: stamps the list's signature and, when the server is known to
// hold the list, moves the list into *held so that only the signature is
// sent.
template <typename Request>
void OfferKeyList(KeyListMemory& memory, int server, Request* request, std::string* held) {
  const std::string& list = request->key_list();
  const size_t n = list.size() / sizeof(uint64_t);
  if (n < KeyListMemory::kMinKeys) return;
  std::vector<uint64_t> keys(n);  // aligned, whatever the string's storage
  std::memcpy(keys.data(), list.data(), n * sizeof(uint64_t));
  const uint64_t signature = KeyListSignature(keys.data(), n);
  request->set_key_list_signature(signature);
  if (memory.Known(server, signature)) {
    *held = std::move(*request->mutable_key_list());
    request->clear_key_list();
  }
}

// After the server missed the request's list: puts the list back (true), or
// false when the list had been sent (nothing to restore).
template <typename Request>
bool RestoreKeyList(KeyListMemory& memory, int server, Request* request, std::string* held) {
  if (held->empty()) return false;
  memory.Forget(server, request->key_list_signature());
  request->set_key_list(std::move(*held));
  held->clear();
  return true;
}

// The resend of a request whose list the server missed: calls send(first),
// and when missed(status) says the server did not hold a list sent as its
// signature and restore() put the lists back, calls send(done) once more,
// at once (nothing of the request was applied and the server is there);
// otherwise done(status). `done` runs exactly once.
using KeyListDone = std::function<void(absl::Status)>;
void SendWithKeyLists(std::function<void(KeyListDone)> send,
                      std::function<bool(const absl::Status&)> missed,
                      std::function<bool()> restore, KeyListDone done);

// After the server applied the request: a list it was sent in full is one
// it now holds.
template <typename Request>
void NoteKeyListSent(KeyListMemory& memory, int server, const Request& request) {
  if (request.key_list_signature() != 0 && !request.key_list().empty()) {
    memory.Remember(server, request.key_list_signature());
  }
}

// The same for each push of a PushPull request (held[k] is push k's list).
void OfferKeyLists(KeyListMemory& memory, int server, proto::PushPullRequest* request,
                   std::vector<std::string>* held);
bool RestoreKeyLists(KeyListMemory& memory, int server, proto::PushPullRequest* request,
                     std::vector<std::string>* held);
// After a PushPull call answered: the lists of the pushes applied.
void NoteKeyListsSent(KeyListMemory& memory, int server, const proto::PushPullRequest& request,
                      const proto::PushPullResponse& reply);
// Whether a PushPull call that answered (status OK) refused a push for a
// list the server did not hold: that push alone failed, nothing of it
// applied.
bool AnyKeyListMiss(const absl::Status& status, const proto::PushPullResponse& reply);

}  // namespace ps

#endif  // PS_WORKER_CLIENT_KEY_LIST_MEMORY_H_
