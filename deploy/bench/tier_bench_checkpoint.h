// tier_bench --checkpoints: full checkpoints of a tiered table two ways,
// alternated in one run (deploy/bench/tier_bench.cc).
#ifndef PS_DEPLOY_BENCH_TIER_BENCH_CHECKPOINT_H_
#define PS_DEPLOY_BENCH_TIER_BENCH_CHECKPOINT_H_

#include <string>

#include "server/store/shard_store.h"

namespace ps {

// `rounds` times each, alternating: a full checkpoint of `store` (whose
// one tiered table is `table`) into a directory under `dir` with the rows
// on disk read into records, then one with them left in a snapshot of the
// store (the servers' way); each timed from the mark to its files synced,
// read back whole as a restore reads it (rows counted, not loaded), and
// restored into an empty tiered table of a fresh store.
// With `cold`, the store's segment files are paged out (page_out(dir))
// before each. Prints each round, the medians, and a RESULT line.
void RunTierCheckpoints(ShardStore& store, const std::string& table, const std::string& dir,
                        int rounds, bool cold, void (*page_out)(const std::string& dir));

}  // namespace ps

#endif  // PS_DEPLOY_BENCH_TIER_BENCH_CHECKPOINT_H_
