// Tests' view inside a PsCore: its store and clock tracker, to read values
// and clocks without the request path. Test-only (//server/core:ps_core_test_peer
// is testonly); production code goes through CoreStateIo (core_state.h).
#ifndef PS_SERVER_CORE_PS_CORE_TEST_PEER_H_
#define PS_SERVER_CORE_PS_CORE_TEST_PEER_H_

#include "server/core/clock_tracker.h"
#include "server/core/ps_core.h"
#include "server/store/shard_store.h"

namespace ps {

class PsCoreTestPeer {
 public:
  static ShardStore& store(PsCore& core) { return core.store_; }
  static ClockTracker& clocks(PsCore& core) { return core.clocks_; }
};

}  // namespace ps

#endif  // PS_SERVER_CORE_PS_CORE_TEST_PEER_H_
