// Single-threaded throughput of the server-side optimizer kernels, next to
// the machine's memory bandwidth measured in the same run.
//
// BM_MemoryCopy and BM_MemoryTriad stream arrays far larger than the caches
// and give the bandwidth ceiling; BM_SgdApply and BM_AdagradApply time
// Optimizer::Apply over a slice that fits in cache (4096 values, one slice of
// the default placement) and over one that does not (32M values). Bytes
// processed count the memory each kernel must touch:
//   copy   read src, write dst                    2 x 4 bytes per float
//   triad  read b and c, write a                  3 x 4 bytes per float
//   SGD    read g, read+write w                   3 x 4 bytes per value
//   AdaGrad read g, read+write w and acc          5 x 4 bytes per value
// so a kernel's bytes/s divided by BM_MemoryCopy's says how close it comes to
// being memory bound.
//
// Run: bazel run //server:optimizer_bench -- --benchmark_min_time=0.5
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "benchmark/benchmark.h"
#include "server/optimizer.h"

namespace ps {
namespace {

constexpr size_t kCopyFloats = size_t{64} << 20;   // 256 MiB per array
constexpr size_t kTriadFloats = size_t{32} << 20;  // 128 MiB per array
constexpr int64_t kInCache = 4096;
constexpr int64_t kOutOfCache = int64_t{32} << 20;

// Hyper-parameters as the worker's defaults (ps_worker --learning_rate etc.).
constexpr float kLearningRate = 0.05f;
constexpr float kInitialAccumulator = 0.1f;
constexpr float kEpsilon = 1e-8f;
// Small enough that weights and accumulators stay finite however many
// iterations the benchmark runs.
constexpr float kGradient = 1e-3f;

void BM_MemoryCopy(benchmark::State& state) {
  // std::vector value-initializes, so every page is touched before timing.
  std::vector<float> src(kCopyFloats, 1.0f);
  std::vector<float> dst(kCopyFloats, 0.0f);
  const size_t bytes = kCopyFloats * sizeof(float);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(2 * bytes));
}
BENCHMARK(BM_MemoryCopy)->Unit(benchmark::kMillisecond);

// STREAM's triad. The store to a is a plain store, so on most CPUs it also
// costs a read of a (write-allocate) that the byte count does not include.
void BM_MemoryTriad(benchmark::State& state) {
  std::vector<float> a(kTriadFloats, 0.0f);
  std::vector<float> b(kTriadFloats, 1.0f);
  std::vector<float> c(kTriadFloats, 2.0f);
  float s = 0.5f;
  benchmark::DoNotOptimize(s);
  float* __restrict pa = a.data();
  const float* __restrict pb = b.data();
  const float* __restrict pc = c.data();
  for (auto _ : state) {
    for (size_t i = 0; i < kTriadFloats; ++i) pa[i] = pb[i] + s * pc[i];
    benchmark::DoNotOptimize(pa);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() *
                          static_cast<int64_t>(3 * kTriadFloats * sizeof(float)));
}
BENCHMARK(BM_MemoryTriad)->Unit(benchmark::kMillisecond);

// Times opt.Apply over n values; `arrays_touched` is the number of float
// arrays the kernel reads or writes, each counted once per read and once
// per write (3 for SGD, 5 for AdaGrad).
void RunApply(benchmark::State& state, const Optimizer& opt, int arrays_touched) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<float> w(n, 0.01f);
  std::vector<float> g(n, kGradient);
  // At least one float so that data() is never null for SGD (no state).
  std::vector<float> opt_state(std::max<size_t>(1, n * opt.state_per_value()));
  opt.InitState(opt_state.data(), n * opt.state_per_value());
  for (auto _ : state) {
    opt.Apply(w.data(), opt_state.data(), g.data(), n);
    benchmark::DoNotOptimize(w.data());
    benchmark::DoNotOptimize(opt_state.data());
    benchmark::ClobberMemory();
  }
  const int64_t values = state.iterations() * static_cast<int64_t>(n);
  state.SetBytesProcessed(values * arrays_touched * static_cast<int64_t>(sizeof(float)));
  state.counters["updates/s"] =
      benchmark::Counter(static_cast<double>(values), benchmark::Counter::kIsRate);
}

void BM_SgdApply(benchmark::State& state) {
  const std::unique_ptr<Optimizer> opt = MakeSgd(kLearningRate);
  RunApply(state, *opt, /*arrays_touched=*/3);
}
BENCHMARK(BM_SgdApply)->Arg(kInCache)->Arg(kOutOfCache);

void BM_AdagradApply(benchmark::State& state) {
  const std::unique_ptr<Optimizer> opt = MakeAdagrad(kLearningRate, kInitialAccumulator, kEpsilon);
  RunApply(state, *opt, /*arrays_touched=*/5);
}
BENCHMARK(BM_AdagradApply)->Arg(kInCache)->Arg(kOutOfCache);

}  // namespace
}  // namespace ps

BENCHMARK_MAIN();
