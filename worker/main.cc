// ps_worker: one Downpour SGD model replica.
//
//   ps_worker --servers=h0:p0,h1:p1 --worker_index=0 --num_workers=4 --model=mlp
//
// Reads its shard of an IDX data set, Fashion-MNIST by default (every
// num_workers-th example, starting at worker_index), creates the model's
// tables if they do not exist, trains, and evaluates test accuracy with the
// parameters on the servers at its end. The model's input width and class
// count come from the data (images of any size; 1 + the largest label).
// --eval_only skips training (used by the launcher once all workers are done).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/cluster_spec.h"
#include "common/etcd_kv_store.h"
#include "common/grpc_channels.h"
#include "common/grpc_lifetime.h"
#include "common/metrics.h"
#include "common/metrics_http.h"
#include "common/peer_security.h"
#include "common/port_file.h"
#include "worker/client/shard_directory.h"
#include "common/process_tuning.h"
#include "common/value_encoding.h"
#include "worker/train/dataset.h"
#include "worker/train/embedding_mlp.h"
#include "worker/train/idx_reader.h"
#include "worker/train/libsvm_reader.h"
#include "worker/train/model.h"
#include "worker/client/optimizer_spec.h"
#include "worker/train/sparse_trainer.h"
#include "worker/client/ps_client.h"
#include "worker/train/training_observer.h"
#include "worker/train/trainer.h"

ABSL_FLAG(std::string, servers, "", "cluster spec: comma-separated host:port of every server");
ABSL_FLAG(std::string, etcd, "",
          "instead of --servers: a replicated cluster's etcd endpoint (host:port); calls follow "
          "its ring across failovers");
ABSL_FLAG(std::string, cluster, "default", "with --etcd: the cluster's name");
ABSL_FLAG(int, worker_index, 0, "this worker's index in [0, num_workers)");
ABSL_FLAG(int, num_workers, 1, "number of workers sharing the data");
ABSL_FLAG(std::string, model, "mlp",
          "mlp or softmax (IDX images, --data_dir), or sparse_lr or embedding_mlp (LibSVM, "
          "--train_data and --test_data)");
ABSL_FLAG(int, embedding_dim, 8, "embedding_mlp: embedding width");
ABSL_FLAG(int, embedding_hidden, 16, "embedding_mlp: units of the hidden layer");
ABSL_FLAG(int, num_fields, 1,
          "embedding_mlp: fields F (1 to 65536); an example's rows are summed per field and the F "
          "sums go into the MLP. Fields come from field:index:value lines (index:value is field "
          "0); a field >= F fails naming the line. Every worker and the evaluation need the same "
          "F");
ABSL_FLAG(std::string, train_data, "",
          "sparse_lr, embedding_mlp: LibSVM training file (plain or gzip)");
ABSL_FLAG(std::string, test_data, "", "sparse_lr, embedding_mlp: LibSVM test file (plain or gzip)");
ABSL_FLAG(int, num_buckets, 1024, "sparse_lr, embedding_mlp: slices of the sparse weight table");
ABSL_FLAG(bool, evaluate, true,
          "sparse_lr, embedding_mlp: evaluate on --test_data after training (false: train only)");
ABSL_FLAG(uint64_t, row_cache_staleness, 0,
          "sparse_lr, embedding_mlp: reuse a pulled row for this many steps (0: pull every row "
          "every step)");
ABSL_FLAG(uint64_t, row_cache_rows, 1 << 20,
          "sparse_lr, embedding_mlp: rows the row cache holds at most");
ABSL_FLAG(double, push_threshold, 0,
          "sparse_lr, embedding_mlp: hold a key's gradient back until its sum reaches this (0: "
          "push all)");
ABSL_FLAG(bool, skip_bad_lines, false,
          "sparse_lr, embedding_mlp: skip (and count) malformed training lines instead of failing");
ABSL_FLAG(std::string, hidden, "256,128", "MLP hidden layer widths, comma-separated");
ABSL_FLAG(int, epochs, 3, "passes over this worker's shard");
ABSL_FLAG(int, batch_size, 32, "examples per mini-batch");
ABSL_FLAG(int, n_fetch, 1, "pull parameters every n_fetch steps");
ABSL_FLAG(int, n_push, 1, "push accumulated gradients every n_push steps");
ABSL_FLAG(bool, overlap, false,
          "push and pull in the background while computing the next round (needs n_fetch == "
          "n_push; one round more stale). Off by default: with PushPull, a round's push and "
          "its read take one round trip, and in line they trained faster and more accurately "
          "on a 2-core machine (README, Performance)");
ABSL_FLAG(std::string, optimizer, "adagrad",
          "server-side optimizer: sgd, adagrad, momentum, nesterov, rmsprop, adam or ftrl");
ABSL_FLAG(double, learning_rate, 0.05, "optimizer learning rate (FTRL's alpha)");
ABSL_FLAG(double, initial_accumulator, 0.1, "AdaGrad initial accumulator");
ABSL_FLAG(double, epsilon, 1e-8, "AdaGrad, RMSProp and Adam epsilon");
ABSL_FLAG(double, momentum, 0.9, "momentum and nesterov: the momentum");
ABSL_FLAG(double, beta1, 0.9, "adam: decay of the first moment");
ABSL_FLAG(double, beta2, 0.999, "adam: decay of the second moment");
ABSL_FLAG(double, rho, 0.9, "rmsprop: decay of the mean square");
ABSL_FLAG(double, ftrl_beta, 1.0, "ftrl: beta");
ABSL_FLAG(double, l1, 0, "ftrl: L1 strength");
ABSL_FLAG(double, l2, 0, "ftrl: L2 strength");
ABSL_FLAG(double, weight_decay, 0, "any optimizer: g += weight_decay * w");
ABSL_FLAG(double, clip_value, 0, "clip each gradient value to [-c, c] (0: off)");
ABSL_FLAG(double, clip_norm, 0, "clip each row's gradient to L2 norm <= c (0: off)");
ABSL_FLAG(std::string, lr_schedule, "constant",
          "learning rate by the push's clock t: constant, step (lr * lr_gamma^floor(t / "
          "lr_step_clocks)) or inv_sqrt (lr / sqrt(lr_decay_offset + t))");
ABSL_FLAG(uint64_t, lr_step_clocks, 1000, "step schedule: clocks per step");
ABSL_FLAG(double, lr_gamma, 0.5, "step schedule: factor per step");
ABSL_FLAG(double, lr_decay_offset, 1, "inv_sqrt schedule: b of lr / sqrt(b + t)");
ABSL_FLAG(uint64_t, warmup_clocks, 0, "any schedule: ramp the rate up over the first N clocks");
ABSL_FLAG(uint64_t, seed, 1, "seed for initialization and shuffling");
ABSL_FLAG(std::string, data_dir, "/usr/share/datasets/fashion-mnist",
          "directory with the IDX files train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, "
          "t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz (gzip or plain; images of any "
          "size; Fashion-MNIST by default)");
ABSL_FLAG(int64_t, max_train_examples, 0, "use only the first N training examples (0: all)");
ABSL_FLAG(std::string, table_prefix, "", "table name prefix (default: the model name)");
ABSL_FLAG(double, progress_seconds, 5, "seconds between progress lines");
ABSL_FLAG(std::string, curve_csv, "",
          "write the training curve here as CSV (seconds, epoch, step, examples, loss, "
          "examples/s, staleness; the last row adds the test result)");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA bundle: verify the servers' certificates with it (enables TLS)");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate chain of this process (with --tls_key: presented to servers that require client certificates)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, token_file, "",
          "file holding this process's token, sent with every call (see the README's security "
          "section)");
ABSL_FLAG(int, metrics_port, -1,
          "serve Prometheus metrics (/metrics), /healthz and /readyz over HTTP on this port "
          "(0: a free port; -1: off)");
ABSL_FLAG(std::string, metrics_host, "127.0.0.1", "address the metrics endpoint listens on");
ABSL_FLAG(std::string, metrics_port_file, "", "if set, write the metrics port to this file");
ABSL_FLAG(double, metrics_linger_seconds, 0,
          "with --metrics_port: after the run, keep serving the metrics this long, so that a "
          "scraper sees the final values (SIGTERM ends it early)");
ABSL_FLAG(double, timeout_seconds, 10, "deadline of each RPC attempt");
ABSL_FLAG(uint64_t, slice_size, 4096, "keys per slice (must match the servers)");
ABSL_FLAG(int, virtual_nodes, 512, "virtual nodes per server (must match the servers)");
ABSL_FLAG(bool, resume, false,
          "continue where the checkpoint the servers restored (ps_server --restore) left this "
          "worker: at its clock, epoch and step; from the start when they restored none");
ABSL_FLAG(bool, eval_only, false, "skip training; only evaluate the servers' parameters");
ABSL_FLAG(std::string, consistency, "async",
          "async (pulls never wait), bounded (a pull at clock t waits for every live worker's "
          "rounds < t - staleness) or bsp (bounded with staleness 0, rounds in lock step)");
ABSL_FLAG(int, staleness, 2, "tau for --consistency=bounded");
ABSL_FLAG(std::string, wire_floats, "f32",
          "values on the wire: f32, f16 (IEEE half) or bf16 (bfloat16); 16 bits halve the bytes "
          "of pushes and pulls, the servers keep float32");
ABSL_FLAG(bool, key_caching, false,
          "key-list caching: a key list sent to a server once is sent again as a signature "
          "(sparse_lr, embedding_mlp: the push after the pull of the same keys, and repeats "
          "across epochs while the servers keep them, ps_server --key_list_cache_mb)");
ABSL_FLAG(double, lease_seconds, 3,
          "worker lease: dropped from the clock minimum after this "
          "long without a heartbeat");
ABSL_FLAG(double, slowdown, 1.0, "straggler injection: compute this many times slower");
ABSL_FLAG(double, wait_for_workers_seconds, 60,
          "with bsp/bounded, wait this long for all --num_workers to register before training");

namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "ps_worker: %s\n", message.c_str());
  return 1;
}

absl::StatusOr<std::vector<int>> ParseHidden(const std::string& text) {
  std::vector<int> widths;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int w = 0;
    if (!absl::SimpleAtoi(part, &w) || w < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--hidden=", text, ": '", part, "' is not a positive width"));
    }
    widths.push_back(w);
  }
  return widths;
}

// The servers' view of the pulls of this job's tables: staleness histogram
// (summed over tables and servers) and waiting.
void PrintServerStats(ps::PsClient& client, const std::string& prefix) {
  auto stats = client.Stats();
  if (!stats.ok()) {
    std::printf("server stats unavailable: %s\n", std::string(stats.status().message()).c_str());
    return;
  }
  std::vector<uint64_t> histogram;
  uint64_t pulls = 0, wait_us = 0, wait_max = 0;
  for (const ps::ServerStats& server : *stats) {
    for (const ps::proto::TableStats& t : server.stats.tables()) {
      if (!absl::StartsWith(t.table(), prefix + "/")) continue;
      histogram.resize(std::max<size_t>(histogram.size(), t.staleness_histogram_size()), 0);
      for (int i = 0; i < t.staleness_histogram_size(); ++i)
        histogram[i] += t.staleness_histogram(i);
      pulls += t.pulls();
      wait_us += t.wait_us_total();
      wait_max = std::max<uint64_t>(wait_max, t.wait_us_max());
    }
  }
  std::printf(
      "servers: %llu pulls of '%s/*'; staleness histogram (rounds 0..16+): %s; "
      "waited %.2fs in all, longest %.3fs\n",
      static_cast<unsigned long long>(pulls), prefix.c_str(), absl::StrJoin(histogram, " ").c_str(),
      wait_us / 1e6, wait_max / 1e6);
}

// The client options every model shares: the servers, this worker's id,
// deadlines, placement and traffic reduction.
// With --etcd: the ring's directory (set once in main, before any client).
// The worker's curve and metrics (set up in main, before any channel).
ps::TrainingObserver*& Observer() {
  static ps::TrainingObserver* observer = nullptr;
  return observer;
}

std::shared_ptr<const ps::ShardDirectory>& Directory() {
  static auto* directory = new std::shared_ptr<const ps::ShardDirectory>();
  return *directory;
}

void SetClientOptions(const ps::ClusterSpec& spec, int worker_index,
                      ps::PsClientOptions* options) {
  options->servers = spec.servers;
  options->worker_id = static_cast<uint32_t>(worker_index);
  options->timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout_seconds));
  if (Directory() != nullptr) {
    options->directory = Directory();
    ps::SpanFailoverWithRetries(options);
  }
  options->placement.slice_size = absl::GetFlag(FLAGS_slice_size);
  options->placement.virtual_nodes = absl::GetFlag(FLAGS_virtual_nodes);
  // --wire_floats was checked in main().
  options->value_encoding =
      ps::ParseValueEncoding(absl::GetFlag(FLAGS_wire_floats)).value_or(ps::proto::VALUES_F32);
  options->key_list_caching = absl::GetFlag(FLAGS_key_caching);
}

// Progress lines, flushed (the scripts stream them).
void PrintLine(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

// --model=sparse_lr or embedding_mlp, on LibSVM data
// (worker/train/sparse_trainer.h, embedding_mlp.h), asynchronous.
int RunSparse(const std::string& model, const ps::ClusterSpec& spec,
              const ps::TrainerConfig& config, const ps::proto::TableDef& optimizer,
              bool eval_only) {
  const std::string who = absl::StrCat("worker ", config.worker_index, "/", config.num_workers);
  const std::string train = absl::GetFlag(FLAGS_train_data);
  const std::string test = absl::GetFlag(FLAGS_test_data);
  const bool evaluate = absl::GetFlag(FLAGS_evaluate) || eval_only;
  if (test.empty() && evaluate) {
    return Fail(absl::StrCat("--model=", model,
                             " needs --test_data (a LibSVM file), or --evaluate=false"));
  }
  if (train.empty() && !eval_only) {
    return Fail(
        absl::StrCat("--model=", model, " needs --train_data (a LibSVM file), or --eval_only"));
  }
  if (config.consistency != ps::Consistency::kAsync) {
    return Fail(absl::StrCat("--model=", model, " trains asynchronously: use --consistency=async"));
  }
  const int buckets = absl::GetFlag(FLAGS_num_buckets);
  ps::PsClientOptions options;
  SetClientOptions(spec, config.worker_index, &options);
  auto client = ps::PsClient::Connect(options);
  if (!client.ok()) return Fail(std::string(client.status().message()));
  const std::string prefix =
      absl::GetFlag(FLAGS_table_prefix).empty() ? model : absl::GetFlag(FLAGS_table_prefix);
  const bool mlp = model == "embedding_mlp";
  ps::EmbeddingMlpConfig emb;
  emb.prefix = prefix;
  emb.dim = static_cast<uint32_t>(std::max(1, absl::GetFlag(FLAGS_embedding_dim)));
  emb.hidden = static_cast<uint32_t>(std::max(1, absl::GetFlag(FLAGS_embedding_hidden)));
  const int num_fields = absl::GetFlag(FLAGS_num_fields);
  if (num_fields < 1 || num_fields > static_cast<int>(ps::kMaxLibsvmField) + 1) {
    return Fail(absl::StrCat("--num_fields=", num_fields, ": expected 1 to ",
                             ps::kMaxLibsvmField + 1));
  }
  emb.num_fields = static_cast<uint32_t>(num_fields);
  emb.num_buckets = static_cast<uint32_t>(std::max(0, buckets));
  emb.seed = config.seed;
  const std::vector<ps::proto::TableDef> tables =
      mlp ? ps::EmbeddingMlpTables(emb, optimizer)
          : std::vector<ps::proto::TableDef>{
                ps::SparseLrTable(prefix + "/w", optimizer, emb.num_buckets)};
  for (const ps::proto::TableDef& table : tables) {
    if (absl::Status s = (*client)->CreateTable(table); !s.ok()) {
      return Fail(absl::StrCat("creating table '", table.name(), "': ", s.message()));
    }
  }
  if (!eval_only) {
    ps::SparseTrainerConfig sc;
    sc.table = tables[0].name();
    sc.worker_index = config.worker_index;
    sc.num_workers = config.num_workers;
    sc.epochs = config.epochs;
    sc.batch_size = config.batch_size;
    sc.max_train_examples = absl::GetFlag(FLAGS_max_train_examples);
    sc.skip_bad_lines = absl::GetFlag(FLAGS_skip_bad_lines);
    sc.row_cache_staleness = absl::GetFlag(FLAGS_row_cache_staleness);
    sc.row_cache_rows = absl::GetFlag(FLAGS_row_cache_rows);
    sc.push_threshold = static_cast<float>(absl::GetFlag(FLAGS_push_threshold));
    sc.progress_interval = config.progress_interval;
    sc.on_progress = Observer()->Sink();
    auto stats = mlp ? ps::TrainEmbeddingMlp(**client, train, sc, emb, PrintLine)
                     : ps::TrainSparseLr(**client, train, sc, PrintLine);
    if (!stats.ok()) {
      return Fail(absl::StrCat(who, ": training failed: ", stats.status().message()));
    }
    (*client)->Leave();
    std::printf(
        "%s: done: %lld steps, %lld examples in %.1fs (%.0f examples/s, %.0f keys/s, %lld keys "
        "pulled), last-epoch log-loss %.4f, %lld bad lines skipped\n",
        who.c_str(), static_cast<long long>(stats->steps), static_cast<long long>(stats->examples),
        stats->seconds, stats->examples_per_second, stats->keys_per_second,
        static_cast<long long>(stats->keys_pulled), stats->mean_loss_last_epoch,
        static_cast<long long>(stats->bad_lines));
    std::printf(
        "RESULT worker=%d seconds=%.3f examples=%lld keys=%lld keys_pulled=%lld keys_pushed=%lld\n",
        config.worker_index, stats->seconds, static_cast<long long>(stats->examples),
        static_cast<long long>(stats->keys), static_cast<long long>(stats->keys_pulled),
        static_cast<long long>(stats->keys_pushed));
  }
  if (!evaluate) return 0;
  auto eval = mlp ? ps::EvaluateEmbeddingMlp(**client, test, emb, 4096)
                  : ps::EvaluateSparseLr(**client, test, tables[0].name(), 4096);
  if (!eval.ok()) return Fail(absl::StrCat(who, ": evaluating: ", eval.status().message()));
  std::printf("%s: test auc %.4f accuracy %.4f logloss %.4f (%lld test examples)\n", who.c_str(),
              eval->auc, eval->accuracy, eval->logloss, static_cast<long long>(eval->examples));
  std::printf("test auc %.4f accuracy %.4f\n", eval->auc, eval->accuracy);
  std::printf("RESULT test_auc=%.4f test_accuracy=%.4f\n", eval->auc, eval->accuracy);
  Observer()->Finish("auc", eval->auc);
  return 0;
}

// The clock to resume at: the smallest of this worker's restored clocks on
// the model's tables (0 when the servers restored nothing).
absl::StatusOr<uint64_t> ResumeClock(ps::PsClient& client,
                                     const std::vector<ps::proto::TableDef>& tables,
                                     const std::string& who) {
  absl::StatusOr<ps::PsClient::WorkerPosition> position = client.Position();
  if (!position.ok()) return position.status();
  if (position->restored_from.empty()) {
    std::printf("%s: --resume: the servers restored no checkpoint; starting from the beginning\n",
                who.c_str());
    return 0;
  }
  uint64_t clock = UINT64_MAX;
  for (const auto& def : tables) {
    auto it = position->clocks.find(def.name());
    clock = std::min(clock, it == position->clocks.end() ? 0 : it->second);
  }
  if (tables.empty()) clock = 0;
  std::printf("%s: --resume: servers restored %s (cut %llu); this worker continues at clock %llu\n",
              who.c_str(), position->restored_from.c_str(),
              static_cast<unsigned long long>(position->restored_cut),
              static_cast<unsigned long long>(clock));
  std::fflush(stdout);
  return clock;
}

}  // namespace

// Everything after the flags and the metrics endpoint; returns the exit code.
static int RunWorker() {
  absl::StatusOr<ps::ClusterSpec> spec = ps::ClusterSpec();
  if (const std::string endpoint = absl::GetFlag(FLAGS_etcd); !endpoint.empty()) {
    // Never destroyed, like Directory(): the directory's watch thread reads
    // the ring from it until the process exits.
    auto* etcd = new ps::EtcdKvStore(ps::EtcdOptions{endpoint});
    auto directory =
        ps::EtcdShardDirectory::Start(etcd, absl::GetFlag(FLAGS_cluster), absl::Seconds(60));
    if (!directory.ok()) return Fail(absl::StrCat("--etcd=", endpoint, ": ",
                                                  directory.status().message()));
    Directory() = std::shared_ptr<const ps::ShardDirectory>(std::move(*directory));
  } else {
    spec = ps::ClusterSpec::Parse(absl::GetFlag(FLAGS_servers));
    if (!spec.ok()) return Fail(absl::StrCat("--servers: ", spec.status().message()));
  }
  auto hidden = ParseHidden(absl::GetFlag(FLAGS_hidden));
  if (!hidden.ok()) return Fail(std::string(hidden.status().message()));

  ps::TrainerConfig config;
  config.worker_index = absl::GetFlag(FLAGS_worker_index);
  config.num_workers = absl::GetFlag(FLAGS_num_workers);
  config.epochs = absl::GetFlag(FLAGS_epochs);
  config.batch_size = absl::GetFlag(FLAGS_batch_size);
  config.n_fetch = absl::GetFlag(FLAGS_n_fetch);
  config.n_push = absl::GetFlag(FLAGS_n_push);
  config.slowdown = absl::GetFlag(FLAGS_slowdown);
  const bool eval_only = absl::GetFlag(FLAGS_eval_only);

  ps::PsClientOptions client_options;
  const std::string consistency = absl::GetFlag(FLAGS_consistency);
  const int staleness = absl::GetFlag(FLAGS_staleness);
  if (consistency == "async") {
    client_options.consistency = ps::proto::CONSISTENCY_ASYNC;
    config.consistency = ps::Consistency::kAsync;
  } else if (consistency == "bsp" || consistency == "bounded") {
    if (consistency == "bounded" && staleness < 0) {
      return Fail(absl::StrCat("--staleness=", staleness, ": must be >= 0"));
    }
    client_options.consistency = ps::proto::CONSISTENCY_BOUNDED;
    client_options.staleness = consistency == "bsp" ? 0 : static_cast<uint32_t>(staleness);
    config.consistency = consistency == "bsp" ? ps::Consistency::kBsp : ps::Consistency::kBounded;
    config.staleness = consistency == "bsp" ? 0 : staleness;
  } else {
    return Fail(absl::StrCat("--consistency=", consistency, ": expected async, bounded or bsp"));
  }
  absl::StatusOr<ps::proto::ValueEncoding> wire_floats =
      ps::ParseValueEncoding(absl::GetFlag(FLAGS_wire_floats));
  if (!wire_floats.ok()) return Fail(absl::StrCat("--wire_floats: ", wire_floats.status().message()));
  const double lease = absl::GetFlag(FLAGS_lease_seconds);
  if (!(lease > 0)) return Fail(absl::StrCat("--lease_seconds=", lease, ": must be > 0"));
  // An evaluator reads the parameters as they are and takes no part in the clocks.
  client_options.lease = eval_only ? absl::ZeroDuration() : absl::Seconds(lease);
  if (eval_only) {
    client_options.consistency = ps::proto::CONSISTENCY_ASYNC;
    config.consistency = ps::Consistency::kAsync;
  }
  // Overlapping adds a round of staleness the servers do not see; only async allows it.
  config.overlap =
      absl::GetFlag(FLAGS_overlap) && config.n_fetch == config.n_push && consistency == "async";
  config.seed = absl::GetFlag(FLAGS_seed);
  config.progress_interval = absl::Seconds(absl::GetFlag(FLAGS_progress_seconds));
  if (absl::Status s = ps::ValidateTrainerConfig(config); !s.ok()) {
    return Fail(absl::StrCat("flags: ", s.message()));
  }

  ps::OptimizerSpec opt_spec;
  opt_spec.optimizer = absl::GetFlag(FLAGS_optimizer);
  opt_spec.learning_rate = absl::GetFlag(FLAGS_learning_rate);
  opt_spec.initial_accumulator = absl::GetFlag(FLAGS_initial_accumulator);
  opt_spec.epsilon = absl::GetFlag(FLAGS_epsilon);
  opt_spec.momentum = absl::GetFlag(FLAGS_momentum);
  opt_spec.beta1 = absl::GetFlag(FLAGS_beta1);
  opt_spec.beta2 = absl::GetFlag(FLAGS_beta2);
  opt_spec.rho = absl::GetFlag(FLAGS_rho);
  opt_spec.ftrl_beta = absl::GetFlag(FLAGS_ftrl_beta);
  opt_spec.l1 = absl::GetFlag(FLAGS_l1);
  opt_spec.l2 = absl::GetFlag(FLAGS_l2);
  opt_spec.weight_decay = absl::GetFlag(FLAGS_weight_decay);
  opt_spec.clip_value = absl::GetFlag(FLAGS_clip_value);
  opt_spec.clip_norm = absl::GetFlag(FLAGS_clip_norm);
  opt_spec.lr_schedule = absl::GetFlag(FLAGS_lr_schedule);
  opt_spec.lr_step_clocks = absl::GetFlag(FLAGS_lr_step_clocks);
  opt_spec.lr_gamma = absl::GetFlag(FLAGS_lr_gamma);
  opt_spec.lr_decay_offset = absl::GetFlag(FLAGS_lr_decay_offset);
  opt_spec.warmup_clocks = absl::GetFlag(FLAGS_warmup_clocks);
  absl::StatusOr<ps::proto::TableDef> optimizer = ps::OptimizerFields(opt_spec);
  if (!optimizer.ok()) return Fail(std::string(optimizer.status().message()));

  if (absl::GetFlag(FLAGS_model) == "sparse_lr" || absl::GetFlag(FLAGS_model) == "embedding_mlp") {
    return RunSparse(absl::GetFlag(FLAGS_model), *spec, config, *optimizer, eval_only);
  }

  // Both sets, even to only evaluate: the class count (1 + the largest label
  // in either) fixes the model's shape, which every worker must agree on.
  auto data = ps::ReadIdxDir(absl::GetFlag(FLAGS_data_dir));
  if (!data.ok()) return Fail(absl::StrCat("--data_dir: ", data.status().message()));
  const ps::Dataset& test = data->test;
  auto model =
      ps::MakeModel(absl::GetFlag(FLAGS_model), data->train.dim, *hidden, data->train.num_classes);
  if (!model.ok()) {
    return Fail(absl::StrCat("--model: ", model.status().message(), " (the data set has ",
                             data->rows, "x", data->cols, " images in ", data->train.num_classes,
                             " classes)"));
  }
  config.table_prefix = absl::GetFlag(FLAGS_table_prefix).empty()
                            ? (*model)->name()
                            : absl::GetFlag(FLAGS_table_prefix);

  SetClientOptions(*spec, config.worker_index, &client_options);
  auto client = ps::PsClient::Connect(client_options);
  if (!client.ok()) return Fail(std::string(client.status().message()));

  const auto tables = ps::ModelTables(**model, config.table_prefix, *optimizer, config.seed);
  for (const auto& def : tables) {
    if (absl::Status s = (*client)->CreateTable(def); !s.ok()) {
      return Fail(absl::StrCat("creating table '", def.name(), "': ", s.message()));
    }
  }

  const std::string who = absl::StrCat("worker ", config.worker_index, "/", config.num_workers);
  if (!eval_only && absl::GetFlag(FLAGS_resume)) {
    absl::StatusOr<uint64_t> clock = ResumeClock(**client, tables, who);
    if (!clock.ok()) return Fail(absl::StrCat(who, ": --resume: ", clock.status().message()));
    config.start_clock = *clock;
  }
  if (!eval_only) {
    if (consistency != "async") {
      const absl::Status s = (*client)->WaitForWorkers(
          config.num_workers, absl::Seconds(absl::GetFlag(FLAGS_wait_for_workers_seconds)));
      if (!s.ok()) return Fail(absl::StrCat(who, ": ", s.message()));
    }
    const int64_t limit = absl::GetFlag(FLAGS_max_train_examples);
    ps::Dataset shard = ps::ShardOf(limit > 0 ? ps::Head(data->train, limit) : data->train,
                                    config.worker_index, config.num_workers);
    data->train = ps::Dataset();  // only the shard is needed from here on
    std::printf(
        "%s: %lld training examples of %dx%d images in %d classes, model %s (%lld parameters), "
        "%d server(s)\n",
        who.c_str(), static_cast<long long>(shard.num_examples), data->rows, data->cols,
        shard.num_classes, (*model)->name().c_str(), static_cast<long long>((*model)->num_params()),
        (*client)->num_servers());
    std::fflush(stdout);
    config.on_progress = Observer()->Sink();
    auto stats = ps::TrainDownpour(**client, **model, shard, config, PrintLine);
    if (!stats.ok())
      return Fail(absl::StrCat(who, ": training failed: ", stats.status().message()));
    // Done: stop holding back the others.
    (*client)->Leave();
    std::printf(
        "%s: done: %lld steps, %lld examples in %.1fs (%.0f examples/s), last-epoch loss %.4f, "
        "staleness mean %.1f max %llu, clock lag max %llu, waited %.2fs (%.1f%% idle)\n",
        who.c_str(), static_cast<long long>(stats->steps), static_cast<long long>(stats->examples),
        stats->seconds, stats->examples_per_second, stats->mean_loss_last_epoch,
        stats->mean_staleness, static_cast<unsigned long long>(stats->max_staleness),
        static_cast<unsigned long long>(stats->max_clock_lag), stats->wait_seconds,
        stats->seconds > 0 ? 100.0 * stats->wait_seconds / stats->seconds : 0.0);
    std::printf("%s: clock lag histogram of its pulls (0..16+): %s\n", who.c_str(),
                absl::StrJoin(stats->clock_lag_histogram, " ").c_str());
    std::printf("RESULT worker=%d seconds=%.3f wait_seconds=%.3f examples=%lld\n",
                config.worker_index, stats->seconds, stats->wait_seconds,
                static_cast<long long>(stats->examples));
    if (config.worker_index == 0) PrintServerStats(**client, config.table_prefix);
  }

  std::vector<float> params((*model)->num_params());
  if (absl::Status s =
          ps::PullParams(**client, **model, config.table_prefix, absl::MakeSpan(params));
      !s.ok()) {
    return Fail(absl::StrCat(who, ": pulling final parameters: ", s.message()));
  }
  const double accuracy = ps::Accuracy(**model, params, test);
  std::printf("%s: test accuracy %.4f (%lld test examples)\n", who.c_str(), accuracy,
              static_cast<long long>(test.num_examples));
  std::printf("RESULT test_accuracy=%.4f\n", accuracy);
  Observer()->Finish("accuracy", accuracy);
  return 0;
}

int main(int argc, char** argv) {
  ps::KeepGrpcUntilExit();
  absl::SetProgramUsageMessage("Downpour SGD worker. See the README.");
  absl::ParseCommandLine(argc, argv);
  ps::TuneProcessForDataPath();

  {
    auto peer = ps::PeerSecurityFromFiles(
        {absl::GetFlag(FLAGS_tls_ca), absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key)},
        absl::GetFlag(FLAGS_token_file));
    if (!peer.ok()) return Fail(std::string(peer.status().message()));
    ps::SetDefaultPeerSecurity(*std::move(peer));
  }
  // Before any channel opens: channels record their calls when it is set.
  static ps::MetricsRegistry* const metrics = new ps::MetricsRegistry();
  const int metrics_port = absl::GetFlag(FLAGS_metrics_port);
  if (metrics_port < -1 || metrics_port > 65535) {
    return Fail(absl::StrCat("--metrics_port=", metrics_port, " must be in 0..65535, or -1 (off)"));
  }
  if (metrics_port >= 0) ps::RecordPeerCallsIn(metrics);
  auto observer =
      ps::TrainingObserver::Create(absl::GetFlag(FLAGS_curve_csv), metrics_port >= 0 ? metrics : nullptr);
  if (!observer.ok()) return Fail(std::string(observer.status().message()));
  Observer() = observer->get();
  std::unique_ptr<ps::MetricsHttpServer> metrics_http;
  if (metrics_port >= 0) {
    auto started =
        ps::MetricsHttpServer::Start(absl::GetFlag(FLAGS_metrics_host), metrics_port, metrics, nullptr);
    if (!started.ok()) return Fail(std::string(started.status().message()));
    metrics_http = *std::move(started);
    if (const std::string f = absl::GetFlag(FLAGS_metrics_port_file); !f.empty()) {
      if (absl::Status s = ps::WritePortFile(f, metrics_http->port(), "--metrics_port_file");
          !s.ok()) {
        return Fail(std::string(s.message()));
      }
    }
  }

  const int code = RunWorker();
  std::fflush(stdout);
  if (metrics_http != nullptr && code == 0) {
    // A batch job's last values are scraped only while the endpoint lives.
    absl::SleepFor(absl::Seconds(absl::GetFlag(FLAGS_metrics_linger_seconds)));
  }
  return code;
}
