// pslite_bench: the cases of ps_bench that deploy/bench_compare.sh reports,
// measured against ps-lite (github.com/dmlc/ps-lite) instead of ps_server,
// for the side-by-side of deploy/bench/pslite_compare.sh.
//
// Not built by Bazel: pslite_compare.sh compiles it with g++ against a ps-lite
// clone (include/ps/ps.h, build/libps.a, and the ZeroMQ and protobuf libraries
// ps-lite's make/ps.mk names). One binary takes the role ps-lite's DMLC_ROLE
// gives it, with ps-lite's other DMLC_* variables (one worker only:
// DMLC_NUM_WORKER=1):
//   - scheduler: only ps-lite's bookkeeping;
//   - server: a KVServer<float> whose request handle applies AdaGrad
//     (learning rate 0.1, initial accumulator 0.1, epsilon 1e-8) to each pushed
//     gradient and answers each pull with the current values. Keys below 2^20
//     live in two contiguous arrays (a contiguous run of them, a dense range,
//     is applied as one loop over the arrays); other keys in a hash map, a row
//     made by its first push. ps-lite calls the handle from one thread, one
//     request at a time, so the store takes no lock;
//   - worker: runs the cases below one after another, each --warmup_seconds
//     unmeasured and then --seconds measured, and prints one line per case in
//     ps_bench's format:
//
//   RESULT side=pslite round=R kind=dense op=pushpull values=1024 width=1 servers=1 clients=1
//          inflight=1 ops_per_s=... values_per_s=... gbytes_per_s=... p50_us=... p99_us=...
//
// The cases (ps_bench --ops=pushpull --dense_values=1024,1048576
// --small_inflight=16 --sparse_widths=1 prints the same five):
//   kind=dense  op=pushpull values=1024     the Downpour step: keys 0..1023, ZPush of the
//                                           gradient and ZPull of the values, Wait for both
//   kind=dense  op=pushpull values=1048576  the same on keys 0..2^20-1
//   kind=dense  op=push values=1024 inflight=16
//                                           16 ZPush outstanding: Wait for the oldest, start
//                                           another (latency: ZPush to its callback)
//   kind=sparse op=pushpull values=10000    10,000 distinct random keys below 1,000,000
//   kind=hashed op=pushpull values=10000    those keys times an odd constant (a bijection of
//                                           the key type), spread over it like hashed ids
// ps-lite wants each request's keys sorted and unique: the key lists are drawn
// without repeats (ps_bench's may repeat a few keys) and sorted before the
// clock starts. Like ps_bench, a case sends the same key list every time;
// --key_sets=N draws N lists and sends them in turn. --pushpull_combined makes
// a step one ZPushPull instead of a ZPush and a ZPull (refused when the clone
// is too old to have ZPushPull). ps-lite sends the keys with every request and
// every answer (8 bytes a key, 4 with USE_KEY32), dense ranges too;
// gbytes_per_s counts, as ps_bench does, only the payload: 4 bytes per value
// each way, a push+pull moving the values twice. ops_per_s: the operations
// started in the measured time (and finished), over --seconds.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ps/ps.h"

namespace pslite_bench {
namespace {

constexpr char kUsage[] =
    "usage: DMLC_ROLE=scheduler|server|worker DMLC_PS_ROOT_URI=... DMLC_PS_ROOT_PORT=...\n"
    "         DMLC_NUM_SERVER=N DMLC_NUM_WORKER=1 pslite_bench [flags]\n"
    "(deploy/bench/pslite_compare.sh starts the three roles on 127.0.0.1.) Flags:\n"
    "  --seconds=S            measured time per case (2)\n"
    "  --warmup_seconds=S     unmeasured time before each case (0.3)\n"
    "  --round=R              printed as round=R on each RESULT line (0)\n"
    "  --key_sets=N           key lists per key-list case, sent in turn (1, as ps_bench)\n"
    "  --pushpull_combined    a step is one ZPushPull instead of a ZPush and a ZPull\n";

// AdaGrad: acc += g^2; w -= lr * g / (sqrt(acc) + epsilon).
constexpr float kLearningRate = 0.1f;
constexpr float kInitialAccumulator = 0.1f;
constexpr float kEpsilon = 1e-8f;
// Keys below this live in the server's arrays: the dense ranges (up to 2^20
// keys) and the kind=sparse key space.
constexpr size_t kDenseKeys = size_t{1} << 20;
// The kind=sparse and kind=hashed lists: keys drawn below kKeySpace.
constexpr uint64_t kKeySpace = 1000000;
constexpr size_t kListKeys = 10000;
// An odd multiplier: a bijection of the 64-bit (and, truncated, the 32-bit)
// integers, so as many distinct keys, spread like hashed ids.
constexpr uint64_t kSpread = 0x9e3779b97f4a7c15ULL;

struct Flags {
  double seconds = 2.0;
  double warmup_seconds = 0.3;
  int round = 0;
  int key_sets = 1;
  bool pushpull_combined = false;
};

struct Case {
  const char* kind;  // dense (keys 0..values-1), sparse or hashed (key lists)
  const char* op;    // pushpull, or push (with inflight > 1)
  size_t values;
  int inflight;
};

// In ps_bench's order.
constexpr Case kCases[] = {
    {"dense", "pushpull", 1024, 1},        // the Downpour step on 1K floats
    {"dense", "pushpull", kDenseKeys, 1},  // push+pull of 1M floats
    {"dense", "push", 1024, 16},           // 1K-float pushes, 16 in flight
    {"sparse", "pushpull", kListKeys, 1},  // 10,000 random keys below 1M
    {"hashed", "pushpull", kListKeys, 1},  // the same keys, spread
};

// --- Across ps-lite versions ----------------------------------------------------
// Today's ps-lite (master) has Start(customer_id, argv0), Finalize(customer_id,
// do_barrier), KVWorker(app_id, customer_id), KVWorker::ZPushPull and
// KVMeta::pull; older clones have Start(argv0), Finalize() or
// Finalize(do_barrier), KVWorker(app_id), no ZPushPull and no KVMeta::pull.
// Each is chosen at compile time, so the file builds against either.

template <typename F>
void CallStart(F start, const char* argv0) {
  if constexpr (std::is_invocable_v<F, int, const char*>) {
    start(0, argv0);
  } else {
    start(argv0);
  }
}

template <typename F>
void CallFinalize(F finalize) {
  if constexpr (std::is_invocable_v<F, int, bool>) {
    finalize(0, true);
  } else if constexpr (std::is_invocable_v<F, bool>) {
    finalize(true);
  } else {
    finalize();
  }
}

template <typename W>
std::unique_ptr<W> MakeWorker() {
  if constexpr (std::is_constructible_v<W, int, int>) {
    return std::make_unique<W>(0, 0);
  } else {
    return std::make_unique<W>(0);
  }
}

template <typename W, typename = void>
struct HasZPushPull : std::false_type {};
template <typename W>
struct HasZPushPull<
    W, std::void_t<decltype(std::declval<W&>().ZPushPull(
           std::declval<const ps::SArray<ps::Key>&>(), std::declval<const ps::SArray<float>&>(),
           std::declval<ps::SArray<float>*>()))>> : std::true_type {};

// One ZPushPull; Main() refuses --pushpull_combined when W has none.
template <typename W>
int ZPushPull(W* kv, const ps::SArray<ps::Key>& keys, const ps::SArray<float>& grads,
              ps::SArray<float>* values) {
  if constexpr (HasZPushPull<W>::value) {
    return kv->ZPushPull(keys, grads, values);
  } else {
    std::abort();
  }
}

// Before ZPushPull, KVMeta had no `pull`: a request was a push or a pull.
template <typename M, typename = void>
struct HasPullField : std::false_type {};
template <typename M>
struct HasPullField<M, std::void_t<decltype(std::declval<const M&>().pull)>> : std::true_type {};

template <typename M>
bool IsPull(const M& meta) {
  if constexpr (HasPullField<M>::value) {
    return meta.pull;
  } else {
    return !meta.push;
  }
}

// --- Flags -------------------------------------------------------------------------

bool ParseDouble(const std::string& text, double* out) {
  char* end = nullptr;
  *out = std::strtod(text.c_str(), &end);
  return !text.empty() && *end == '\0' && std::isfinite(*out);
}

bool ParseInt(const std::string& text, int* out) {
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  *out = static_cast<int>(v);
  return !text.empty() && *end == '\0' && v >= 0 && v <= 1000000;
}

// Fills *flags from argv. Returns -1 to go on, 0 after printing the usage
// (--help), 2 after saying on stderr which flag is wrong.
int ParseFlags(int argc, char** argv, Flags* flags) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    const bool has_value = eq != std::string::npos;
    const std::string value = has_value ? arg.substr(eq + 1) : "";
    bool ok = has_value;
    if (name == "--seconds") {
      ok = ok && ParseDouble(value, &flags->seconds) && flags->seconds > 0;
    } else if (name == "--warmup_seconds") {
      ok = ok && ParseDouble(value, &flags->warmup_seconds) && flags->warmup_seconds >= 0;
    } else if (name == "--round") {
      ok = ok && ParseInt(value, &flags->round);
    } else if (name == "--key_sets") {
      ok = ok && ParseInt(value, &flags->key_sets) && flags->key_sets >= 1 &&
           flags->key_sets <= 1000;
    } else if (name == "--pushpull_combined") {
      ok = !has_value || value == "true" || value == "false";
      flags->pushpull_combined = !has_value || value == "true";
    } else {
      std::fprintf(stderr, "pslite_bench: unknown flag '%s' (see --help)\n", arg.c_str());
      return 2;
    }
    if (!ok) {
      std::fprintf(stderr, "pslite_bench: bad value in '%s' (see --help)\n", arg.c_str());
      return 2;
    }
  }
  return -1;
}

// --- Server ------------------------------------------------------------------------

inline void AdaGradStep(float& w, float& acc, float g) {
  acc += g * g;
  w -= kLearningRate * g / (std::sqrt(acc) + kEpsilon);
}

// The server's parameters and its request handle. Not thread-safe: ps-lite
// runs every request handle of a KVServer on that server's one customer
// thread.
class AdaGradStore {
 public:
  AdaGradStore() : w_(kDenseKeys, 0.0f), acc_(kDenseKeys, kInitialAccumulator) {}

  // Applies a push (one float per key), answers a pull with the values of its
  // keys; a push+pull (ZPushPull) does both, the push first. Aborts, saying
  // why, on a push whose value count is not its key count.
  void Handle(const ps::KVMeta& meta, const ps::KVPairs<float>& req, ps::KVServer<float>* server) {
    const size_t n = req.keys.size();
    const ps::Key* keys = req.keys.data();
    // Sorted unique keys (ps-lite's contract) spanning n values: a range.
    const bool range = n > 0 && keys[n - 1] < kDenseKeys && keys[n - 1] - keys[0] == n - 1;
    if (meta.push) {
      if (req.vals.size() != n) {
        std::fprintf(stderr,
                     "pslite_bench: a push of %zu keys carries %zu values, not one per key\n", n,
                     req.vals.size());
        std::abort();
      }
      const float* g = req.vals.data();
      if (range) {
        float* w = w_.data() + keys[0];
        float* acc = acc_.data() + keys[0];
        for (size_t i = 0; i < n; ++i) AdaGradStep(w[i], acc[i], g[i]);
      } else {
        for (size_t i = 0; i < n; ++i) Push(keys[i], g[i]);
      }
    }
    ps::KVPairs<float> res;
    if (IsPull(meta)) {
      res.keys = req.keys;
      // A new array per answer: ps-lite sends it without a copy and frees it
      // when ZeroMQ is done with it.
      res.vals = ps::SArray<float>(new float[n], n, /*deletable=*/true);
      float* out = res.vals.data();
      if (range) {
        std::memcpy(out, w_.data() + keys[0], n * sizeof(float));
      } else {
        for (size_t i = 0; i < n; ++i) out[i] = Value(keys[i]);
      }
    }
    server->Response(meta, res);
  }

 private:
  struct Row {
    float w = 0.0f;
    float acc = kInitialAccumulator;
  };

  void Push(ps::Key key, float g) {
    if (key < kDenseKeys) {
      AdaGradStep(w_[key], acc_[key], g);
    } else {
      Row& row = rows_[key];
      AdaGradStep(row.w, row.acc, g);
    }
  }

  float Value(ps::Key key) const {
    if (key < kDenseKeys) return w_[key];
    const auto it = rows_.find(key);
    return it == rows_.end() ? 0.0f : it->second.w;
  }

  std::vector<float> w_, acc_;
  std::unordered_map<ps::Key, Row> rows_;
};

// --- Worker ------------------------------------------------------------------------

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * v.size()));
  std::nth_element(v.begin(), v.begin() + i, v.end());
  return v[i];
}

// Case c's key lists: `sets` of them, sorted. Key-list keys stay below
// `limit`, where ps-lite's default slicer puts every key on a server.
std::vector<ps::SArray<ps::Key>> MakeKeyLists(const Case& c, int sets, ps::Key limit) {
  const std::string kind = c.kind;
  std::vector<ps::SArray<ps::Key>> lists;
  if (kind == "dense") {
    std::vector<ps::Key> keys(c.values);
    for (size_t i = 0; i < keys.size(); ++i) keys[i] = static_cast<ps::Key>(i);
    lists.emplace_back(keys);
    return lists;
  }
  for (int s = 0; s < sets; ++s) {
    std::mt19937_64 rng(s + 1);
    std::unordered_set<uint64_t> drawn;
    std::vector<ps::Key> keys;
    // Bounded: c.values is 1% of kKeySpace, so few draws repeat.
    for (size_t tries = 0; keys.size() < c.values && tries < 100 * c.values; ++tries) {
      const uint64_t k = rng() % kKeySpace;
      if (!drawn.insert(k).second) continue;
      const ps::Key key = static_cast<ps::Key>(kind == "hashed" ? k * kSpread : k);
      if (key < limit) keys.push_back(key);
    }
    std::sort(keys.begin(), keys.end());
    lists.emplace_back(keys);
  }
  return lists;
}

class Bench {
 public:
  Bench(ps::KVWorker<float>* kv, const Flags& flags) : kv_(kv), flags_(flags) {}

  // Runs case c and prints its RESULT line. Returns 0, or 1 after saying why.
  int Run(const Case& c) {
    const ps::Key limit = ps::kMaxKey / ps::NumServers() * ps::NumServers();
    const std::vector<ps::SArray<ps::Key>> lists = MakeKeyLists(c, flags_.key_sets, limit);
    for (const auto& keys : lists) {
      if (keys.size() != c.values) {
        std::fprintf(stderr, "pslite_bench: drew %zu keys of kind=%s, not %zu\n", keys.size(),
                     c.kind, c.values);
        return 1;
      }
    }
    grads_ = ps::SArray<float>(c.values, 1e-3f);
    values_ = ps::SArray<float>(c.values, 0.0f);
    const int64_t measure_from = NowNs() + static_cast<int64_t>(flags_.warmup_seconds * 1e9);
    const int64_t stop = measure_from + static_cast<int64_t>(flags_.seconds * 1e9);
    std::vector<double> latencies_us;
    if (std::string(c.op) == "push") {
      latencies_us = RunPushes(lists[0], c.inflight, measure_from, stop);
    } else {
      latencies_us = RunSteps(lists, measure_from, stop);
    }
    const double ops = latencies_us.size() / flags_.seconds;
    const double values = ops * c.values;
    const double bytes = values * sizeof(float) * (std::string(c.op) == "pushpull" ? 2 : 1);
    const double p50 = Percentile(latencies_us, 0.50), p99 = Percentile(latencies_us, 0.99);
    std::printf(
        "RESULT side=pslite round=%d kind=%s op=%s values=%zu width=1 servers=%d clients=%d "
        "inflight=%d ops_per_s=%.0f values_per_s=%.4g gbytes_per_s=%.3f p50_us=%.0f "
        "p99_us=%.0f\n",
        flags_.round, c.kind, c.op, c.values, ps::NumServers(), ps::NumWorkers(), c.inflight, ops,
        values, bytes / 1e9, p50, p99);
    std::fflush(stdout);
    return 0;
  }

 private:
  // Downpour steps, one at a time, on the lists in turn until `stop`: the
  // latencies of those started from `measure_from`.
  std::vector<double> RunSteps(const std::vector<ps::SArray<ps::Key>>& lists, int64_t measure_from,
                               int64_t stop) {
    std::vector<double> latencies_us;
    for (size_t i = 0;; ++i) {
      const int64_t t0 = NowNs();
      if (t0 >= stop) break;
      Step(lists[i % lists.size()]);
      if (t0 >= measure_from) latencies_us.push_back((NowNs() - t0) / 1e3);
    }
    return latencies_us;
  }

  // Push the gradient, get the parameters back. ps-lite's server answers one
  // worker's requests in order, so the pull sees the push.
  void Step(const ps::SArray<ps::Key>& keys) {
    if (flags_.pushpull_combined) {
      kv_->Wait(ZPushPull(kv_, keys, grads_, &values_));
      return;
    }
    const int push = kv_->ZPush(keys, grads_);
    const int pull = kv_->ZPull(keys, &values_);
    kv_->Wait(push);
    kv_->Wait(pull);
  }

  // Keeps `window` pushes of `keys` in flight: waits for the oldest and, while
  // before `stop`, starts the next in its place. Latency: from ZPush to its
  // callback (run on ps-lite's receiving thread before Wait returns).
  std::vector<double> RunPushes(const ps::SArray<ps::Key>& keys, int window, int64_t measure_from,
                                int64_t stop) {
    struct Lane {
      int ts = -1;  // -1: retired
      int64_t t0 = 0;
      std::atomic<int64_t> t1{0};
    };
    std::vector<Lane> lanes(window);
    auto start = [&](Lane* lane) {
      lane->t1.store(0, std::memory_order_relaxed);
      lane->t0 = NowNs();
      lane->ts = kv_->ZPush(keys, grads_, ps::SArray<int>(), 0,
                            [lane] { lane->t1.store(NowNs(), std::memory_order_release); });
    };
    for (Lane& lane : lanes) start(&lane);
    std::vector<double> latencies_us;
    int live = window;
    for (size_t i = 0; live > 0; i = (i + 1) % lanes.size()) {
      Lane& lane = lanes[i];
      if (lane.ts < 0) continue;
      kv_->Wait(lane.ts);
      int64_t t1 = lane.t1.load(std::memory_order_acquire);
      if (t1 == 0) t1 = NowNs();
      if (lane.t0 >= measure_from) latencies_us.push_back((t1 - lane.t0) / 1e3);
      if (t1 < stop) {
        start(&lane);
      } else {
        lane.ts = -1;
        --live;
      }
    }
    return latencies_us;
  }

  ps::KVWorker<float>* const kv_;
  const Flags flags_;
  ps::SArray<float> grads_, values_;
};

int RunWorker(const Flags& flags) {
  std::unique_ptr<ps::KVWorker<float>> kv = MakeWorker<ps::KVWorker<float>>();
  Bench bench(kv.get(), flags);
  for (const Case& c : kCases) {
    if (int rc = bench.Run(c); rc != 0) return rc;
  }
  return 0;
}

int Main(int argc, char** argv) {
  Flags flags;
  if (int rc = ParseFlags(argc, argv, &flags); rc >= 0) return rc;
  if (flags.pushpull_combined && !HasZPushPull<ps::KVWorker<float>>::value) {
    std::fprintf(stderr,
                 "pslite_bench: --pushpull_combined: this ps-lite has no KVWorker::ZPushPull "
                 "(older clones lack it); update the clone or leave the flag out\n");
    return 2;
  }
  // Checked here so that every role refuses alike, before ps-lite starts
  // (its own checks abort with a stack trace).
  const char* role = std::getenv("DMLC_ROLE");
  if (role == nullptr || std::getenv("DMLC_PS_ROOT_URI") == nullptr ||
      std::getenv("DMLC_PS_ROOT_PORT") == nullptr || std::getenv("DMLC_NUM_SERVER") == nullptr) {
    std::fprintf(stderr,
                 "pslite_bench: DMLC_ROLE, DMLC_PS_ROOT_URI, DMLC_PS_ROOT_PORT and "
                 "DMLC_NUM_SERVER must be set, as ps-lite reads them; "
                 "deploy/bench/pslite_compare.sh starts the three roles (see --help)\n");
    return 2;
  }
  const char* workers = std::getenv("DMLC_NUM_WORKER");
  if (workers == nullptr || std::string(workers) != "1") {
    std::fprintf(stderr, "pslite_bench: DMLC_NUM_WORKER=%s: this benchmark runs one worker\n",
                 workers == nullptr ? "(unset)" : workers);
    return 2;
  }
  CallStart(&ps::Start, argv[0]);
  // The server's store and KVServer outlive Finalize, which returns when the
  // worker is done and ps-lite has stopped receiving.
  std::unique_ptr<AdaGradStore> store;
  std::unique_ptr<ps::KVServer<float>> server;
  if (ps::IsServer()) {
    store = std::make_unique<AdaGradStore>();
    server = std::make_unique<ps::KVServer<float>>(0);
    AdaGradStore* s = store.get();
    server->set_request_handle([s](const ps::KVMeta& meta, const ps::KVPairs<float>& req,
                                   ps::KVServer<float>* srv) { s->Handle(meta, req, srv); });
  }
  const int rc = ps::IsWorker() ? RunWorker(flags) : 0;
  CallFinalize(&ps::Finalize);
  return rc;
}

}  // namespace
}  // namespace pslite_bench

int main(int argc, char** argv) { return pslite_bench::Main(argc, argv); }
