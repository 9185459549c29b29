// The server's key-list data path without the network: ShardStore::PushAndRead
// (a push, then the same keys read back under the same slice locks: the
// PushPull RPC's work) of 10,000 random keys, on a dense table of 1M keys
// and on a sparse table (TABLE_SPARSE, hashed ids), with AdaGrad, width 1
// and 16. The keys come grouped by slice, in the order the client's planner
// sends them (worker/client/planner.h), and the same keys are pushed on
// every iteration (as ps_bench's sparse cases do), so the sparse table holds
// 10,000 rows. BM_MemoryCopy gives the machine's copy bandwidth in the same
// run. The process is tuned as ps_server's is (common/process_tuning.h).
//
// Run: bazel run //server:store_bench -- --benchmark_min_time=0.5
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "common/placement.h"
#include "common/process_tuning.h"
#include "common/table_layout.h"
#include "server/store/shard_store.h"

namespace ps {
namespace {

constexpr uint64_t kDenseKeys = 1000000;
constexpr size_t kKeys = 10000;

void BM_MemoryCopy(benchmark::State& state) {
  std::vector<float> src(size_t{16} << 20, 1.0f), dst(size_t{16} << 20, 0.0f);
  const size_t bytes = src.size() * sizeof(float);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(2 * bytes));
}
BENCHMARK(BM_MemoryCopy)->Unit(benchmark::kMicrosecond);

// state.range(0): 1 = sparse table, 0 = dense; state.range(1): width;
// state.range(2): a sparse table's buckets (slices), or a dense table's keys
// a slice (0: the default, 4096). The dense table of 1M keys has 245 slices
// of 4096 keys: 256 buckets give the sparse table as many slices (and slice
// locks per push), the default 1024 four times as many; slices of 1024 keys
// give the dense table 977, about as many as those 1024.
void BM_KeyPushAndRead(benchmark::State& state) {
  const bool sparse = state.range(0) == 1;
  const uint32_t width = static_cast<uint32_t>(state.range(1));
  const uint32_t buckets = static_cast<uint32_t>(state.range(2));
  PlacementConfig config;
  if (!sparse && state.range(2) > 0) config.slice_size = static_cast<uint64_t>(state.range(2));
  const Placement placement(1, config);
  ShardStore store(0, placement);
  proto::TableDef def;
  def.set_name("t");
  def.set_width(width);
  def.set_optimizer(proto::OPT_ADAGRAD);
  def.set_initial_accumulator(0.1f);
  def.set_learning_rate(0.01f);
  if (sparse) {
    def.set_kind(proto::TABLE_SPARSE);
    def.set_num_buckets(buckets);
  } else {
    def.set_num_keys(kDenseKeys);
  }
  if (!store.CreateTable(def).ok()) {
    state.SkipWithError("CreateTable failed");
    return;
  }
  const TableLayout layout = LayoutOf(def);
  std::mt19937_64 rng(1);
  std::vector<uint64_t> keys(kKeys);
  for (uint64_t& k : keys) {
    k = rng() % kDenseKeys;
    if (sparse) k *= 0x9e3779b97f4a7c15ULL;  // a bijection: ids spread over uint64
  }
  std::stable_sort(keys.begin(), keys.end(), [&](uint64_t a, uint64_t b) {
    return placement.SliceOf(layout, a) < placement.SliceOf(layout, b);
  });
  const std::vector<float> grads(kKeys * width, 1e-3f);
  std::vector<float> out(kKeys * width);
  const auto admit = []() -> absl::StatusOr<bool> { return true; };
  const auto into = [&](size_t) { return reinterpret_cast<char*>(out.data()); };
  // Rows are created (sparse) and pages touched before the timing.
  if (!store.PushAndRead("t", KeySpec::List(keys), grads, 0, admit, into).ok()) {
    state.SkipWithError("PushAndRead failed");
    return;
  }
  for (auto _ : state) {
    absl::StatusOr<ShardStore::PushResult> r =
        store.PushAndRead("t", KeySpec::List(keys), grads, 0, admit, into);
    if (!r.ok()) {
      state.SkipWithError("PushAndRead failed");
      return;
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * kKeys);
  state.counters["bytes_used"] = static_cast<double>(store.bytes_used());
}
BENCHMARK(BM_KeyPushAndRead)
    ->ArgNames({"sparse", "width", "slicing"})
    ->Args({0, 1, 0})
    ->Args({0, 1, 1024})
    ->Args({1, 1, 1024})
    ->Args({1, 1, 256})
    ->Args({0, 16, 0})
    ->Args({0, 16, 1024})
    ->Args({1, 16, 1024})
    ->Args({1, 16, 256})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace ps

int main(int argc, char** argv) {
  // As ps_server does (no mapped and faulted-in buffers, no lock graph).
  ps::TuneProcessForDataPath();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
