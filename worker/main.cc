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
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/cluster_spec.h"
#include "common/connection_flags.h"
#include "common/etcd_kv_store.h"
#include "common/grpc_channels.h"
#include "common/metrics.h"
#include "common/metrics_flags.h"
#include "common/process_tuning.h"
#include "common/value_encoding.h"
#include "worker/client/optimizer_spec.h"
#include "worker/client/ps_client.h"
#include "worker/client/shard_directory.h"
#include "worker/collective/mpi_collective.h"
#include "worker/lbfgs/lr_portions.h"
#include "worker/lbfgs/portion_worker.h"
#include "worker/run_worker.h"
#include "worker/train/embedding_mlp.h"
#include "worker/train/libsvm_reader.h"
#include "worker/train/trainer.h"
#include "worker/train/training_observer.h"
#include "worker/worker_config.h"
#include "worker/worker_group.h"

ABSL_FLAG(std::string, servers, "", "cluster spec: comma-separated host:port of every server");
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
ABSL_FLAG(uint64_t, tiered_cache_mb, 0,
          "sparse_lr, embedding_mlp: > 0 keeps the sparse table's rows on the servers' disks "
          "(ps_server --table_dir), this many MiB of the most pushed in each server's memory "
          "(0: every row in memory)");
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
          "on a 2-core machine (docs/experiments)");
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
ABSL_FLAG(double, lars_eta, 0,
          "LARS on the weight matrices (sgd, momentum, nesterov; dense models, downpour; 0: off): "
          "each layer's step scaled by lars_eta * ||w|| / (||g|| + lars_beta * ||w||)");
ABSL_FLAG(double, lars_beta, 0, "LARS: the beta of the trust ratio (usually the weight decay)");
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
ABSL_FLAG(std::string, metrics_host, "127.0.0.1",
          "address the metrics endpoint (--metrics_port) listens on");
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
ABSL_FLAG(std::string, algorithm, "downpour",
          "downpour (push gradients, the servers' optimizer applies them), average (model "
          "averaging: --average_every local steps with the --optimizer flags, then the servers "
          "average the copies), easgd (elastic averaging, --easgd_alpha) or lbfgs (Sandblaster "
          "L-BFGS on logistic regression: data portions from the ps_lbfgs coordinator at "
          "--coordinator, on --train_data)");
ABSL_FLAG(std::string, coordinator, "", "lbfgs: host:port of the ps_lbfgs coordinator");
ABSL_FLAG(int, lbfgs_straggle_ms, 0,
          "lbfgs: wait this long after each portion's push before reporting it (a straggler, "
          "for tests and the backup experiment)");
ABSL_FLAG(int, average_every, 50, "average, easgd: local steps between talks to the servers (tau)");
ABSL_FLAG(double, easgd_alpha, 0.1, "easgd: the moving rate alpha, in (0, 1]");
ABSL_FLAG(int, local_workers, 1,
          "dense models: train this many workers as threads of this process (worker "
          "worker_index * K + j of num_workers * K trains shard j)");
ABSL_FLAG(bool, bsp_reduce, false,
          "with --consistency=bsp (dense models): the servers sum each round's pushes in a fixed "
          "tree over the workers and apply the sum as one step, so the result does not depend on "
          "arrival order or on --local_aggregation (unreplicated servers)");
ABSL_FLAG(bool, local_aggregation, false,
          "with --local_workers: the threads push the sum of their gradients once a round and "
          "share one pull (MXNet's hierarchical aggregation); the servers see this process as "
          "one worker");
ABSL_FLAG(std::string, dense_sync, "servers",
          "embedding_mlp: servers (its dense layers on the parameter servers, as every table) or "
          "allreduce (the workers keep them and step them together by MPI allreduce each step; "
          "launch the workers with mpirun or srun; the embedding rows stay on the servers)");
ABSL_FLAG(int, allreduce_publish_every, 100,
          "--dense_sync=allreduce: rank 0 writes the dense tables to the servers every this many "
          "steps (and at the end), for checkpoints and evaluation; 0: only at the end");
ABSL_FLAG(int, allreduce_check_every, 0,
          "--dense_sync=allreduce: every this many steps the ranks check that they hold the same "
          "bits (0: only at the end)");
ABSL_FLAG(int, model_partitions, 1,
          "mlp, embedding_mlp: split each model replica over this many processes by hidden units "
          "(launch replicas * K processes with mpirun or srun; rank r is replica r / K, "
          "partition r % K)");
ABSL_FLAG(int, partition, 0,
          "--model_partitions: this process's partition (optional: mpirun's rank decides it)");
ABSL_FLAG(int64_t, max_worker_memory_mb, 0,
          "refuse to train when the model's parameters this process holds (values and gradient) "
          "exceed this many MiB (0: no limit)");
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

// --consistency, --staleness, --lease_seconds and --eval_only into the
// trainer's and the client's settings.
absl::Status ConsistencyFromFlags(ps::WorkerConfig* config) {
  ps::TrainerConfig& trainer = config->trainer;
  ps::PsClientOptions& client = config->client;
  const std::string consistency = absl::GetFlag(FLAGS_consistency);
  const int staleness = absl::GetFlag(FLAGS_staleness);
  if (consistency == "async") {
    client.consistency = ps::proto::CONSISTENCY_ASYNC;
    trainer.consistency = ps::Consistency::kAsync;
  } else if (consistency == "bsp" || consistency == "bounded") {
    if (consistency == "bounded" && staleness < 0) {
      return absl::InvalidArgumentError(absl::StrCat("--staleness=", staleness, ": must be >= 0"));
    }
    client.consistency = ps::proto::CONSISTENCY_BOUNDED;
    client.staleness = consistency == "bsp" ? 0 : static_cast<uint32_t>(staleness);
    trainer.consistency = consistency == "bsp" ? ps::Consistency::kBsp : ps::Consistency::kBounded;
    trainer.staleness = consistency == "bsp" ? 0 : staleness;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--consistency=", consistency, ": expected async, bounded or bsp"));
  }
  const double lease = absl::GetFlag(FLAGS_lease_seconds);
  if (!(lease > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("--lease_seconds=", lease, ": must be > 0"));
  }
  // An evaluator reads the parameters as they are and takes no part in the clocks.
  client.lease = config->eval_only ? absl::ZeroDuration() : absl::Seconds(lease);
  if (config->eval_only) {
    client.consistency = ps::proto::CONSISTENCY_ASYNC;
    trainer.consistency = ps::Consistency::kAsync;
  }
  // Overlapping adds a round of staleness the servers do not see; only async allows it.
  trainer.overlap =
      absl::GetFlag(FLAGS_overlap) && trainer.n_fetch == trainer.n_push && consistency == "async";
  return absl::OkStatus();
}

// The trainer's and the client's settings.
absl::Status TrainingFromFlags(ps::WorkerConfig* config) {
  ps::TrainerConfig& trainer = config->trainer;
  trainer.worker_index = absl::GetFlag(FLAGS_worker_index);
  trainer.num_workers = absl::GetFlag(FLAGS_num_workers);
  trainer.epochs = absl::GetFlag(FLAGS_epochs);
  trainer.batch_size = absl::GetFlag(FLAGS_batch_size);
  trainer.n_fetch = absl::GetFlag(FLAGS_n_fetch);
  trainer.n_push = absl::GetFlag(FLAGS_n_push);
  trainer.slowdown = absl::GetFlag(FLAGS_slowdown);
  trainer.seed = absl::GetFlag(FLAGS_seed);
  trainer.progress_interval = absl::Seconds(absl::GetFlag(FLAGS_progress_seconds));
  if (absl::Status s = ConsistencyFromFlags(config); !s.ok()) return s;
  if (absl::Status s = ps::ValidateTrainerConfig(trainer); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("flags: ", s.message()));
  }
  ps::PsClientOptions& client = config->client;
  client.timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout_seconds));
  client.placement.slice_size = absl::GetFlag(FLAGS_slice_size);
  client.placement.virtual_nodes = absl::GetFlag(FLAGS_virtual_nodes);
  absl::StatusOr<ps::proto::ValueEncoding> wire_floats =
      ps::ParseValueEncoding(absl::GetFlag(FLAGS_wire_floats));
  if (!wire_floats.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--wire_floats: ", wire_floats.status().message()));
  }
  client.value_encoding = *wire_floats;
  client.key_list_caching = absl::GetFlag(FLAGS_key_caching);
  config->wait_for_workers_seconds = absl::GetFlag(FLAGS_wait_for_workers_seconds);
  return absl::OkStatus();
}

// The server-side optimizer, as the optimizer fields of every table.
absl::StatusOr<ps::proto::TableDef> OptimizerFromFlags() {
  ps::OptimizerSpec spec;
  spec.optimizer = absl::GetFlag(FLAGS_optimizer);
  spec.learning_rate = absl::GetFlag(FLAGS_learning_rate);
  spec.initial_accumulator = absl::GetFlag(FLAGS_initial_accumulator);
  spec.epsilon = absl::GetFlag(FLAGS_epsilon);
  spec.momentum = absl::GetFlag(FLAGS_momentum);
  spec.beta1 = absl::GetFlag(FLAGS_beta1);
  spec.beta2 = absl::GetFlag(FLAGS_beta2);
  spec.rho = absl::GetFlag(FLAGS_rho);
  spec.ftrl_beta = absl::GetFlag(FLAGS_ftrl_beta);
  spec.l1 = absl::GetFlag(FLAGS_l1);
  spec.l2 = absl::GetFlag(FLAGS_l2);
  spec.weight_decay = absl::GetFlag(FLAGS_weight_decay);
  spec.clip_value = absl::GetFlag(FLAGS_clip_value);
  spec.clip_norm = absl::GetFlag(FLAGS_clip_norm);
  spec.lr_schedule = absl::GetFlag(FLAGS_lr_schedule);
  spec.lr_step_clocks = absl::GetFlag(FLAGS_lr_step_clocks);
  spec.lr_gamma = absl::GetFlag(FLAGS_lr_gamma);
  spec.lr_decay_offset = absl::GetFlag(FLAGS_lr_decay_offset);
  spec.warmup_clocks = absl::GetFlag(FLAGS_warmup_clocks);
  spec.lars_eta = absl::GetFlag(FLAGS_lars_eta);
  spec.lars_beta = absl::GetFlag(FLAGS_lars_beta);
  return ps::OptimizerFields(spec);
}

// The model and its data.
absl::Status ModelFromFlags(ps::WorkerConfig* config) {
  config->model = absl::GetFlag(FLAGS_model);
  auto hidden = ParseHidden(absl::GetFlag(FLAGS_hidden));
  if (!hidden.ok()) return hidden.status();
  config->hidden = *std::move(hidden);
  config->table_prefix = absl::GetFlag(FLAGS_table_prefix);
  config->data_dir = absl::GetFlag(FLAGS_data_dir);
  config->train_data = absl::GetFlag(FLAGS_train_data);
  config->test_data = absl::GetFlag(FLAGS_test_data);
  config->evaluate = absl::GetFlag(FLAGS_evaluate);
  config->max_train_examples = absl::GetFlag(FLAGS_max_train_examples);
  config->resume = absl::GetFlag(FLAGS_resume);
  if (!config->sparse_model()) return absl::OkStatus();
  const int num_fields = absl::GetFlag(FLAGS_num_fields);
  if (num_fields < 1 || num_fields > static_cast<int>(ps::kMaxLibsvmField) + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--num_fields=", num_fields, ": expected 1 to ", ps::kMaxLibsvmField + 1));
  }
  ps::EmbeddingMlpConfig& emb = config->embedding;
  emb.dim = static_cast<uint32_t>(std::max(1, absl::GetFlag(FLAGS_embedding_dim)));
  emb.hidden = static_cast<uint32_t>(std::max(1, absl::GetFlag(FLAGS_embedding_hidden)));
  emb.num_fields = static_cast<uint32_t>(num_fields);
  emb.num_buckets = static_cast<uint32_t>(std::max(0, absl::GetFlag(FLAGS_num_buckets)));
  emb.tiered_cache_mb = absl::GetFlag(FLAGS_tiered_cache_mb);
  ps::SparseTrainerConfig& sparse = config->sparse;
  sparse.skip_bad_lines = absl::GetFlag(FLAGS_skip_bad_lines);
  sparse.row_cache_staleness = absl::GetFlag(FLAGS_row_cache_staleness);
  sparse.row_cache_rows = absl::GetFlag(FLAGS_row_cache_rows);
  sparse.push_threshold = static_cast<float>(absl::GetFlag(FLAGS_push_threshold));
  return absl::OkStatus();
}

// --local_workers and --local_aggregation.
absl::Status LocalWorkersFromFlags(ps::WorkerConfig* config) {
  config->local_workers = absl::GetFlag(FLAGS_local_workers);
  config->local_aggregation = absl::GetFlag(FLAGS_local_aggregation);
  // An evaluator pushes nothing (and reads asynchronously).
  config->bsp_reduce = absl::GetFlag(FLAGS_bsp_reduce) && !config->eval_only;
  if (config->bsp_reduce) {
    if (config->trainer.consistency != ps::Consistency::kBsp || config->sparse_model() ||
        config->averaging.algorithm != ps::Algorithm::kDownpour) {
      return absl::InvalidArgumentError(
          "--bsp_reduce needs --consistency=bsp, a dense model (mlp, softmax) and "
          "--algorithm=downpour");
    }
    const int k = config->local_workers;
    if (config->local_aggregation && (k & (k - 1)) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--bsp_reduce with --local_aggregation needs a power-of-two --local_workers (the "
          "servers' tree takes a host's workers as one of its nodes), got ",
          k));
    }
  }
  if (config->local_workers < 1 || config->local_workers > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("--local_workers=", config->local_workers, ": expected 1 to 64"));
  }
  if (config->local_workers == 1 && !config->local_aggregation) return absl::OkStatus();
  if (config->sparse_model()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--local_workers and --local_aggregation are for the dense models (mlp, "
                     "softmax), not --model=",
                     config->model));
  }
  if (config->local_aggregation &&
      (config->averaging.algorithm != ps::Algorithm::kDownpour || config->trainer.overlap)) {
    return absl::InvalidArgumentError(
        "--local_aggregation sums Downpour's gradients each round: it needs "
        "--algorithm=downpour and --overlap=false");
  }
  return absl::OkStatus();
}

// --algorithm and its settings; the optimizer flags then describe the local
// steps, and the tables get AveragingTableOptimizer().
absl::Status AlgorithmFromFlags(ps::WorkerConfig* config) {
  absl::StatusOr<ps::Algorithm> algorithm = ps::ParseAlgorithm(absl::GetFlag(FLAGS_algorithm));
  if (!algorithm.ok()) return algorithm.status();
  ps::AveragingConfig& averaging = config->averaging;
  averaging.algorithm = *algorithm;
  if (averaging.algorithm == ps::Algorithm::kDownpour) return absl::OkStatus();
  if (config->sparse_model() &&
      (config->sparse.row_cache_staleness > 0 || config->sparse.push_threshold > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--algorithm=", absl::GetFlag(FLAGS_algorithm),
        " keeps its own copy of the rows: --row_cache_staleness and --push_threshold are "
        "Downpour's and must stay 0"));
  }
  averaging.every = absl::GetFlag(FLAGS_average_every);
  averaging.easgd_alpha = absl::GetFlag(FLAGS_easgd_alpha);
  averaging.local_optimizer = config->optimizer;
  if (absl::Status s = ps::ValidateAveragingConfig(averaging, config->trainer); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("flags: ", s.message()));
  }
  return absl::OkStatus();
}

// --dense_sync, --model_partitions and their settings (issue 30).
absl::Status GroupsFromFlags(ps::WorkerConfig* config) {
  const std::string sync = absl::GetFlag(FLAGS_dense_sync);
  if (sync != "servers" && sync != "allreduce") {
    return absl::InvalidArgumentError(
        absl::StrCat("--dense_sync=", sync, ": expected servers or allreduce"));
  }
  config->dense_allreduce = sync == "allreduce";
  config->allreduce_publish_every = absl::GetFlag(FLAGS_allreduce_publish_every);
  config->allreduce_check_every = absl::GetFlag(FLAGS_allreduce_check_every);
  config->model_partitions = absl::GetFlag(FLAGS_model_partitions);
  config->partition = absl::GetFlag(FLAGS_partition);
  config->max_worker_memory_mb = absl::GetFlag(FLAGS_max_worker_memory_mb);
  const int k = config->model_partitions;
  if (k < 1 || k > 64 || config->partition < 0 || config->partition >= k) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--model_partitions=", k, " --partition=", config->partition,
        ": expected 1 <= model_partitions <= 64 and 0 <= partition < model_partitions"));
  }
  if (config->dense_allreduce && k > 1) {
    return absl::InvalidArgumentError(
        "--dense_sync=allreduce and --model_partitions > 1 do not combine yet: choose one");
  }
  if (config->max_worker_memory_mb < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_worker_memory_mb=", config->max_worker_memory_mb, ": expected >= 0"));
  }
  return absl::OkStatus();
}

// Every flag of the run; errors name the flag and its value.
// The ring's directory in etcd (--etcd; null without it), reading through
// *etcd, which must outlive it (its watch thread reads the ring from it).
absl::StatusOr<std::shared_ptr<const ps::ShardDirectory>> StartDirectory(
    const ps::ConnectionFlags& connection, std::unique_ptr<ps::EtcdKvStore>* etcd) {
  if (connection.etcd.empty()) return nullptr;
  *etcd = std::make_unique<ps::EtcdKvStore>(ps::EtcdOptions{connection.etcd});
  auto directory =
      ps::EtcdShardDirectory::Start(etcd->get(), connection.cluster, absl::Seconds(60));
  if (!directory.ok()) {
    return absl::Status(directory.status().code(), absl::StrCat("--etcd=", connection.etcd, ": ",
                                                                directory.status().message()));
  }
  return std::shared_ptr<const ps::ShardDirectory>(std::move(*directory));
}

// --algorithm=lbfgs: a Sandblaster L-BFGS worker (worker/lbfgs/portion_worker.h)
// on the servers of --servers or of the etcd directory.
absl::Status RunLbfgsWorker(std::shared_ptr<const ps::ShardDirectory> directory) {
  if (absl::GetFlag(FLAGS_coordinator).empty()) {
    return absl::InvalidArgumentError("--algorithm=lbfgs needs --coordinator (ps_lbfgs's address)");
  }
  const std::string path = absl::GetFlag(FLAGS_train_data);
  if (path.empty()) return absl::InvalidArgumentError("--algorithm=lbfgs needs --train_data");
  ps::PsClientOptions options;
  if (directory != nullptr) {
    options.directory = std::move(directory);
    ps::SpanFailoverWithRetries(&options);
  } else {
    auto spec = ps::ClusterSpec::Parse(absl::GetFlag(FLAGS_servers));
    if (!spec.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--servers: ", spec.status().message()));
    }
    options.servers = spec->servers;
  }
  options.worker_id = static_cast<uint32_t>(absl::GetFlag(FLAGS_worker_index));
  const absl::Time start = absl::Now();
  absl::StatusOr<ps::lbfgs::LrData> data = ps::lbfgs::LoadLrData(path);
  if (!data.ok()) return data.status();
  std::printf("lbfgs worker=%u data=%s examples=%zu load_seconds=%.2f\n", options.worker_id,
              path.c_str(), data->size(), absl::ToDoubleSeconds(absl::Now() - start));
  absl::StatusOr<std::unique_ptr<ps::PsClient>> client = ps::PsClient::Connect(options);
  if (!client.ok()) return client.status();
  ps::lbfgs::PortionWorkerOptions worker;
  worker.coordinator = absl::GetFlag(FLAGS_coordinator);
  worker.worker_id = options.worker_id;
  worker.straggle = absl::Milliseconds(absl::GetFlag(FLAGS_lbfgs_straggle_ms));
  absl::StatusOr<ps::lbfgs::PortionWorkerStats> stats =
      ps::lbfgs::RunPortionWorker(worker, client->get(), *data);
  if (!stats.ok()) return stats.status();
  std::printf(
      "RESULT worker=%u algorithm=lbfgs seconds=%.3f portions=%lld kept=%lld backups=%lld "
      "examples=%lld bytes_pulled=%llu bytes_pushed=%llu\n",
      options.worker_id, absl::ToDoubleSeconds(absl::Now() - start),
      static_cast<long long>(stats->portions), static_cast<long long>(stats->kept),
      static_cast<long long>(stats->backups), static_cast<long long>(stats->examples),
      static_cast<unsigned long long>(stats->bytes_pulled),
      static_cast<unsigned long long>(stats->bytes_pushed));
  return absl::OkStatus();
}

absl::StatusOr<ps::WorkerConfig> ConfigFromFlags(const ps::ConnectionFlags& connection) {
  ps::WorkerConfig config;
  config.etcd = connection.etcd;
  config.cluster = connection.cluster;
  if (config.etcd.empty()) {
    auto spec = ps::ClusterSpec::Parse(absl::GetFlag(FLAGS_servers));
    if (!spec.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--servers: ", spec.status().message()));
    }
    config.servers = spec->servers;
  }
  config.eval_only = absl::GetFlag(FLAGS_eval_only);
  if (absl::Status s = ModelFromFlags(&config); !s.ok()) return s;
  if (absl::Status s = TrainingFromFlags(&config); !s.ok()) return s;
  absl::StatusOr<ps::proto::TableDef> optimizer = OptimizerFromFlags();
  if (!optimizer.ok()) return optimizer.status();
  config.optimizer = *std::move(optimizer);
  if (absl::Status s = AlgorithmFromFlags(&config); !s.ok()) return s;
  if (absl::Status s = LocalWorkersFromFlags(&config); !s.ok()) return s;
  if (absl::Status s = GroupsFromFlags(&config); !s.ok()) return s;
  return config;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Training worker (Downpour SGD, model averaging, EASGD). See docs/guide/training.md.");
  absl::ParseCommandLine(argc, argv);
  ps::TuneProcessForDataPath();
  const ps::ConnectionFlags connection = ps::GetConnectionFlags();
  if (absl::Status s = ps::SetPeerSecurityFromFlags(connection); !s.ok()) {
    return Fail(std::string(s.message()));
  }
  const absl::StatusOr<int> metrics_port = ps::MetricsPortFromFlags();
  if (!metrics_port.ok()) return Fail(std::string(metrics_port.status().message()));
  // Lives until the process exits: once set (before any channel opens),
  // every channel records its calls into it, gRPC's threads included.
  auto* const metrics = new ps::MetricsRegistry();
  if (*metrics_port >= 0) ps::RecordPeerCallsIn(metrics);
  auto observer = ps::TrainingObserver::Create(absl::GetFlag(FLAGS_curve_csv),
                                               *metrics_port >= 0 ? metrics : nullptr);
  if (!observer.ok()) return Fail(std::string(observer.status().message()));
  auto metrics_http =
      ps::StartMetricsFromFlags(*metrics_port, absl::GetFlag(FLAGS_metrics_host), metrics, nullptr);
  if (!metrics_http.ok()) return Fail(std::string(metrics_http.status().message()));

  if (absl::GetFlag(FLAGS_algorithm) == "lbfgs") {
    std::unique_ptr<ps::EtcdKvStore> etcd;
    auto directory = StartDirectory(connection, &etcd);
    if (!directory.ok()) return Fail(std::string(directory.status().message()));
    const absl::Status run = RunLbfgsWorker(*std::move(directory));
    std::fflush(stdout);
    return run.ok() ? 0 : Fail(std::string(run.message()));
  }
  absl::StatusOr<ps::WorkerConfig> config = ConfigFromFlags(connection);
  if (!config.ok()) return Fail(std::string(config.status().message()));
  // Declared before the environment that holds the directory: the
  // directory's watch thread reads the ring from it until it is destroyed.
  std::unique_ptr<ps::EtcdKvStore> etcd;
  ps::WorkerEnv env;
  env.observer = observer->get();
  auto directory = StartDirectory(connection, &etcd);
  if (!directory.ok()) return Fail(std::string(directory.status().message()));
  env.directory = *std::move(directory);
  // The processes of an MPI job (mpirun, srun): every worker, and this
  // replica's partitions. A failure then ends the whole job (AbortJob):
  // the others would wait for this process in their next collective.
  ps::WorkerGroups groups;
  if (ps::NeedsWorkerGroups(*config)) {
    auto mpi = ps::MpiCollective::Start(nullptr, nullptr);
    if (!mpi.ok()) {
      return Fail(
          absl::StrCat("--dense_sync=allreduce / --model_partitions: ", mpi.status().message()));
    }
    groups.world = *std::move(mpi);
    if (absl::Status s = ps::JoinWorkerGroups(&*config, &groups); !s.ok()) {
      Fail(std::string(s.message()));
      ps::MpiCollective::AbortJob(1);
    }
    env.workers = groups.world.get();
    env.partitions = groups.replica.get();
  }
  const absl::Status run =
      config->sparse_model() ? ps::RunSparseWorker(*config, env) : ps::RunDenseWorker(*config, env);
  std::fflush(stdout);
  if (!run.ok()) {
    Fail(std::string(run.message()));
    if (groups.world != nullptr) ps::MpiCollective::AbortJob(1);
    return 1;
  }
  if (*metrics_http != nullptr) {
    // A batch job's last values are scraped only while the endpoint lives.
    absl::SleepFor(absl::Seconds(absl::GetFlag(FLAGS_metrics_linger_seconds)));
  }
  return 0;
}
