// OnEachMember: runs fn(rank, member) on one thread per member of a
// LocalGroup and joins them, for tests that play a group's members.
#ifndef PS_WORKER_COLLECTIVE_ON_EACH_MEMBER_H_
#define PS_WORKER_COLLECTIVE_ON_EACH_MEMBER_H_

#include <thread>
#include <vector>

#include "worker/collective/local_collective.h"

namespace ps {

template <typename Fn>
void OnEachMember(LocalGroup& group, Fn fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < group.size(); ++r) {
    threads.emplace_back([&group, &fn, r] { fn(r, group.Member(r)); });
  }
  for (std::thread& t : threads) t.join();
}

}  // namespace ps

#endif  // PS_WORKER_COLLECTIVE_ON_EACH_MEMBER_H_
