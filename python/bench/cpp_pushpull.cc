// cpp_pushpull: the C++ side of python/bench/pushpull_bench.sh.
//
// Repeats one Downpour step, PsClient::PushPull of a dense table's whole
// range (1M floats by default), for --seconds after --warmup_seconds, from one
// thread, exactly as py_pushpull.py does through the Python module
// (Client.push_pull with `out=`): same table definition, same sizes, same
// clock, same timing. Prints one line:
//
//   RESULT client=cpp values=1048576 ops=... seconds=... ops_per_s=...
//          gbytes_per_s=... p50_us=... p99_us=...
//
// gbytes_per_s counts payload bytes: 4 per value each way.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/cluster_spec.h"
#include "common/process_tuning.h"
#include "worker/client/ps_client.h"

ABSL_FLAG(std::string, servers, "", "running servers: host:port,... in shard order");
ABSL_FLAG(std::string, table, "pushpull_bench", "the dense table (created if missing)");
ABSL_FLAG(uint64_t, values, 1 << 20, "floats per push+pull (the table's size)");
ABSL_FLAG(double, seconds, 3.0, "measured time");
ABSL_FLAG(double, warmup_seconds, 0.5, "unmeasured time before it");
ABSL_FLAG(int, worker_id, 0, "this client's worker id");

namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "cpp_pushpull: %s\n", message.c_str());
  return 1;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * v.size()));
  std::nth_element(v.begin(), v.begin() + i, v.end());
  return v[i];
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Times PsClient::PushPull of a dense table against running servers (see "
      "python/bench/pushpull_bench.sh).");
  absl::ParseCommandLine(argc, argv);
  // As ps_worker and ps_bench do: the process's data path settings.
  ps::TuneProcessForDataPath();

  auto spec = ps::ClusterSpec::Parse(absl::GetFlag(FLAGS_servers));
  if (!spec.ok()) return Fail(absl::StrCat("--servers: ", spec.status().message()));
  const uint64_t values = absl::GetFlag(FLAGS_values);
  if (values == 0) return Fail("--values must be >= 1");
  ps::PsClientOptions options;
  options.servers = spec->servers;
  options.worker_id = static_cast<uint32_t>(absl::GetFlag(FLAGS_worker_id));
  auto client = ps::PsClient::Connect(options);
  if (!client.ok()) return Fail(std::string(client.status().message()));

  // The table py_pushpull.py creates (an identical definition is a no-op):
  // AdaGrad as the training runs use, zeros, as ps_bench's tables.
  const std::string table = absl::GetFlag(FLAGS_table);
  ps::proto::TableDef def;
  def.set_name(table);
  def.set_num_keys(values);
  def.set_width(1);
  def.set_initializer(ps::proto::INIT_ZEROS);
  def.set_optimizer(ps::proto::OPT_ADAGRAD);
  def.set_learning_rate(0.01f);
  def.set_initial_accumulator(0.1f);
  def.set_epsilon(1e-8f);
  if (absl::Status s = (*client)->CreateTable(def); !s.ok()) {
    return Fail(absl::StrCat("creating table '", table, "': ", s.message()));
  }

  std::vector<float> grads(values, 1e-3f), out(values, 0.0f);
  const ps::PushRange push{table, 0, values, grads};
  const ps::PullRange pull{table, 0, values, absl::MakeSpan(out)};
  std::vector<double> latencies_us;
  const absl::Time start = absl::Now();
  const absl::Time measure_from = start + absl::Seconds(absl::GetFlag(FLAGS_warmup_seconds));
  const absl::Time stop = measure_from + absl::Seconds(absl::GetFlag(FLAGS_seconds));
  absl::Time measured_end = measure_from;
  while (true) {
    const absl::Time t0 = absl::Now();
    if (t0 >= stop) break;
    if (absl::Status s = (*client)->PushPull({&push, 1}, {&pull, 1}, 0); !s.ok()) {
      return Fail(absl::StrCat("push_pull of '", table, "': ", s.message()));
    }
    const absl::Time t1 = absl::Now();
    if (t0 >= measure_from) {
      latencies_us.push_back(absl::ToDoubleMicroseconds(t1 - t0));
      measured_end = t1;
    }
  }
  // Ops over the time they took (the last one may end after `stop`).
  const double seconds = absl::ToDoubleSeconds(measured_end - measure_from);
  const double ops_per_s = seconds > 0 ? latencies_us.size() / seconds : 0;
  std::printf(
      "RESULT client=cpp values=%llu ops=%zu seconds=%.3f ops_per_s=%.2f gbytes_per_s=%.3f "
      "p50_us=%.0f p99_us=%.0f\n",
      static_cast<unsigned long long>(values), latencies_us.size(), seconds, ops_per_s,
      ops_per_s * values * sizeof(float) * 2 / 1e9, Percentile(latencies_us, 0.5),
      Percentile(latencies_us, 0.99));
  return 0;
}
