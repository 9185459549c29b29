// Single-threaded throughput of the server-side optimizer kernels, next to
// the machine's memory bandwidth measured in the same run.
//
// BM_MemoryCopy and BM_MemoryTriad stream arrays far larger than the caches
// and give the bandwidth ceiling; BM_<Rule>Apply time Optimizer::Apply over
// a slice that fits in cache (4096 values, one slice of the default
// placement) and over one that does not (32M values). Bytes processed count
// the memory each kernel must touch:
//   copy   read src, write dst                    2 x 4 bytes per float
//   triad  read b and c, write a                  3 x 4 bytes per float
//   rule   read g, read+write w and each state float (3 + 2 x state_per_value)
//          x 4 bytes per value: SGD 3, AdaGrad/Momentum/RMSProp 5, Adam/FTRL 7
// so a kernel's bytes/s divided by BM_MemoryCopy's says how close it comes to
// being memory bound. BM_AdagradClippedApply adds clipping by row norm and
// weight decay (rows of 16), BM_AdamApplyRows rows of a key list (width 8,
// scattered over 32M values).
//
// Run: bazel run //server:optimizer_bench -- --benchmark_min_time=0.5
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "benchmark/benchmark.h"
#include "common/optimizer/optimizer.h"

namespace ps {
namespace {

constexpr size_t kCopyFloats = size_t{64} << 20;   // 256 MiB per array
constexpr size_t kTriadFloats = size_t{32} << 20;  // 128 MiB per array
constexpr int64_t kInCache = 4096;
constexpr int64_t kOutOfCache = int64_t{32} << 20;

// Hyper-parameters as the worker's defaults (ps_worker --learning_rate etc.);
// the other rules' are the usual ones (momentum 0.9, Adam 0.9 and 0.999).
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

proto::TableDef Def(proto::OptimizerKind kind) {
  proto::TableDef def;
  def.set_name("bench");
  def.set_optimizer(kind);
  def.set_learning_rate(kLearningRate);
  def.set_initial_accumulator(kInitialAccumulator);
  def.set_epsilon(kEpsilon);
  def.set_momentum(0.9f);
  def.set_rho(0.9f);
  def.set_beta1(0.9f);
  def.set_beta2(0.999f);
  def.set_ftrl_beta(1.0f);
  def.set_l1(1e-4f);
  def.set_l2(1e-4f);
  return def;
}

std::unique_ptr<Optimizer> Make(const proto::TableDef& def) {
  absl::StatusOr<std::unique_ptr<Optimizer>> opt = MakeOptimizer(def);
  if (!opt.ok()) std::abort();
  return *std::move(opt);
}

// Times opt.Apply over n values, in rows of `width`.
void RunApply(benchmark::State& state, const proto::TableDef& def, size_t width = 1) {
  const std::unique_ptr<Optimizer> opt = Make(def);
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<float> w(n, 0.01f);
  std::vector<float> g(n, kGradient);
  const size_t spv = opt->state_per_value();
  // At least one float so that data() is never null for SGD (no state).
  std::vector<float> opt_state(std::max<size_t>(1, n * spv));
  opt->InitState(opt_state.data(), n * spv);
  uint64_t clock = 0;
  for (auto _ : state) {
    opt->Apply(w.data(), opt_state.data(), g.data(), n / width, width, clock++);
    benchmark::DoNotOptimize(w.data());
    benchmark::DoNotOptimize(opt_state.data());
    benchmark::ClobberMemory();
  }
  const int64_t values = state.iterations() * static_cast<int64_t>(n);
  state.SetBytesProcessed(values * static_cast<int64_t>((3 + 2 * spv) * sizeof(float)));
  state.counters["updates/s"] =
      benchmark::Counter(static_cast<double>(values), benchmark::Counter::kIsRate);
}

void BM_SgdApply(benchmark::State& state) { RunApply(state, Def(proto::OPT_SGD)); }
BENCHMARK(BM_SgdApply)->Arg(kInCache)->Arg(kOutOfCache);

void BM_AdagradApply(benchmark::State& state) { RunApply(state, Def(proto::OPT_ADAGRAD)); }
BENCHMARK(BM_AdagradApply)->Arg(kInCache)->Arg(kOutOfCache);

void BM_MomentumApply(benchmark::State& state) { RunApply(state, Def(proto::OPT_MOMENTUM)); }
BENCHMARK(BM_MomentumApply)->Arg(kInCache)->Arg(kOutOfCache);

void BM_RmsPropApply(benchmark::State& state) { RunApply(state, Def(proto::OPT_RMSPROP)); }
BENCHMARK(BM_RmsPropApply)->Arg(kInCache)->Arg(kOutOfCache);

void BM_AdamApply(benchmark::State& state) { RunApply(state, Def(proto::OPT_ADAM)); }
BENCHMARK(BM_AdamApply)->Arg(kInCache)->Arg(kOutOfCache);

void BM_FtrlApply(benchmark::State& state) { RunApply(state, Def(proto::OPT_FTRL)); }
BENCHMARK(BM_FtrlApply)->Arg(kInCache)->Arg(kOutOfCache);

void BM_AdagradClippedApply(benchmark::State& state) {
  proto::TableDef def = Def(proto::OPT_ADAGRAD);
  def.set_clip_norm(1.0f);
  def.set_weight_decay(1e-4f);
  RunApply(state, def, /*width=*/16);
}
BENCHMARK(BM_AdagradClippedApply)->Arg(kInCache)->Arg(kOutOfCache);

// Rows of a key list: 4096 rows of width 8 at random places in 32M values.
void BM_AdamApplyRows(benchmark::State& state) {
  const std::unique_ptr<Optimizer> opt = Make(Def(proto::OPT_ADAM));
  constexpr size_t kWidth = 8, kRows = 4096, kValues = size_t{32} << 20;
  const size_t spv = opt->state_per_value();
  std::vector<float> w(kValues, 0.01f), opt_state(kValues * spv);
  opt->InitState(opt_state.data(), opt_state.size());
  std::vector<float> g(kRows * kWidth, kGradient);
  std::vector<float*> w_rows(kRows), state_rows(kRows);
  uint64_t x = 88172645463325252u;  // xorshift64: a fixed scattering
  for (size_t r = 0; r < kRows; ++r) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const size_t row = x % (kValues / kWidth);
    w_rows[r] = w.data() + row * kWidth;
    state_rows[r] = opt_state.data() + row * kWidth * spv;
  }
  uint64_t clock = 0;
  for (auto _ : state) {
    opt->ApplyRows(w_rows.data(), state_rows.data(), g.data(), kRows, kWidth, clock++, nullptr);
    benchmark::DoNotOptimize(w.data());
    benchmark::ClobberMemory();
  }
  state.counters["rows/s"] = benchmark::Counter(static_cast<double>(state.iterations() * kRows),
                                                benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AdamApplyRows);

}  // namespace
}  // namespace ps

BENCHMARK_MAIN();
