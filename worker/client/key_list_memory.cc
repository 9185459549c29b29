#include "worker/client/key_list_memory.h"

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

}  // namespace ps
