#include "worker/trainer.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/hash.h"

namespace ps {
namespace {

// The pull/push ops of a model's blocks over one flat vector.
template <typename Op, typename SpanT>
std::vector<Op> BlockOps(const Model& model, const std::string& prefix, SpanT flat) {
  std::vector<Op> ops;
  int64_t offset = 0;
  for (const ParamBlock& block : model.blocks()) {
    Op op;
    op.table = absl::StrCat(prefix, "/", block.name);
    op.begin = 0;
    op.end = static_cast<uint64_t>(block.size);
    if constexpr (std::is_same_v<Op, PullRange>) {
      op.out = flat.subspan(offset, block.size);
    } else {
      op.grads = flat.subspan(offset, block.size);
    }
    ops.push_back(std::move(op));
    offset += block.size;
  }
  return ops;
}

}  // namespace

absl::Status ValidateTrainerConfig(const TrainerConfig& c) {
  auto bad = [](const char* field, int64_t value, const char* want) {
    return absl::InvalidArgumentError(
        absl::StrCat("trainer ", field, "=", value, ": must be ", want));
  };
  if (c.num_workers < 1) return bad("num_workers", c.num_workers, ">= 1");
  if (c.worker_index < 0 || c.worker_index >= c.num_workers) {
    return bad("worker_index", c.worker_index, "in [0, num_workers)");
  }
  if (c.epochs < 1) return bad("epochs", c.epochs, ">= 1");
  if (c.batch_size < 1) return bad("batch_size", c.batch_size, ">= 1");
  if (c.n_fetch < 1) return bad("n_fetch", c.n_fetch, ">= 1");
  if (c.n_push < 1) return bad("n_push", c.n_push, ">= 1");
  if (c.max_steps < 0) return bad("max_steps", c.max_steps, ">= 0");
  return absl::OkStatus();
}

std::vector<proto::TableDef> ModelTables(const Model& model, const std::string& prefix,
                                         const proto::TableDef& optimizer, uint64_t seed) {
  std::vector<proto::TableDef> tables;
  for (const ParamBlock& block : model.blocks()) {
    proto::TableDef def = optimizer;
    def.set_name(absl::StrCat(prefix, "/", block.name));
    def.set_width(1);
    def.set_num_keys(static_cast<uint64_t>(block.size));
    if (block.init_bound > 0) {
      def.set_initializer(proto::INIT_UNIFORM);
      def.set_init_low(-block.init_bound);
      def.set_init_high(block.init_bound);
    } else {
      def.set_initializer(proto::INIT_ZEROS);
    }
    def.set_seed(HashCombine(seed, HashString(block.name)));
    tables.push_back(std::move(def));
  }
  return tables;
}

absl::Status CreateModelTables(PsClient& client, const std::vector<proto::TableDef>& tables) {
  for (const proto::TableDef& def : tables) {
    if (absl::Status s = client.CreateTable(def); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status PullParams(PsClient& client, const Model& model, const std::string& prefix,
                        absl::Span<float> params, Versions* versions) {
  return client.Pull(BlockOps<PullRange>(model, prefix, params), versions);
}

absl::StatusOr<TrainStats> TrainDownpour(PsClient& client, const Model& model, const Dataset& shard,
                                         const TrainerConfig& config,
                                         const std::function<void(const std::string&)>& progress) {
  if (absl::Status s = ValidateTrainerConfig(config); !s.ok()) return s;
  if (shard.num_examples == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker ", config.worker_index, " has no training examples in its shard"));
  }
  if (shard.dim != model.input_dim()) {
    return absl::InvalidArgumentError(
        absl::StrCat("data dim ", shard.dim, " != model input dim ", model.input_dim()));
  }
  const int64_t n_params = model.num_params();
  const int dim = shard.dim;
  std::vector<float> params(n_params), grad(n_params), accum(n_params, 0.0f);
  const auto pull_ops = BlockOps<PullRange>(model, config.table_prefix, absl::MakeSpan(params));
  const auto push_ops = BlockOps<PushRange>(model, config.table_prefix, absl::MakeConstSpan(accum));

  std::vector<int64_t> order(shard.num_examples);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(HashCombine(config.seed, config.worker_index));
  std::vector<float> xb(static_cast<size_t>(config.batch_size) * dim);
  std::vector<int32_t> yb(config.batch_size);

  TrainStats stats;
  Versions pulled, pushed;
  int64_t pushes_since_pull = 0, pending_steps = 0;
  double staleness_sum = 0;
  uint64_t clock = 0;
  const absl::Time start = absl::Now();
  absl::Time window_start = start;
  int64_t window_examples = 0;
  double window_loss = 0;
  int64_t window_steps = 0;

  auto push = [&]() -> absl::Status {
    if (absl::Status s = client.Push(push_ops, clock, &pushed); !s.ok()) return s;
    ++clock;
    ++pushes_since_pull;
    ++stats.pushes;
    uint64_t staleness = 0;
    for (size_t e = 0; e < pushed.size() && e < pulled.size(); ++e) {
      if (pushed[e] == 0) continue;
      const int64_t others =
          static_cast<int64_t>(pushed[e]) - static_cast<int64_t>(pulled[e]) - pushes_since_pull;
      staleness = std::max<uint64_t>(staleness, others > 0 ? others : 0);
    }
    staleness_sum += staleness;
    stats.max_staleness = std::max(stats.max_staleness, staleness);
    std::fill(accum.begin(), accum.end(), 0.0f);
    pending_steps = 0;
    return absl::OkStatus();
  };

  bool done = false;
  for (int epoch = 1; epoch <= config.epochs && !done; ++epoch) {
    std::shuffle(order.begin(), order.end(), rng);
    double epoch_loss = 0;
    int64_t epoch_steps = 0;
    for (int64_t first = 0; first < shard.num_examples && !done; first += config.batch_size) {
      if (stats.steps % config.n_fetch == 0) {
        if (absl::Status s = client.Pull(pull_ops, &pulled); !s.ok()) return s;
        pushes_since_pull = 0;
      }
      const int batch =
          static_cast<int>(std::min<int64_t>(config.batch_size, shard.num_examples - first));
      for (int b = 0; b < batch; ++b) {
        const int64_t row = order[first + b];
        std::copy_n(shard.row(row), dim, xb.data() + static_cast<size_t>(b) * dim);
        yb[b] = shard.labels[row];
      }
      const float loss =
          model.LossAndGradient(params, xb.data(), yb.data(), batch, absl::MakeSpan(grad));
      for (int64_t i = 0; i < n_params; ++i) accum[i] += grad[i];
      ++pending_steps;
      ++stats.steps;
      stats.examples += batch;
      epoch_loss += loss;
      ++epoch_steps;
      window_loss += loss;
      ++window_steps;
      window_examples += batch;
      if (pending_steps == config.n_push) {
        if (absl::Status s = push(); !s.ok()) return s;
      }
      if (config.max_steps > 0 && stats.steps >= config.max_steps) done = true;

      const absl::Time now = absl::Now();
      const bool epoch_end = first + config.batch_size >= shard.num_examples || done;
      if (progress && (now - window_start >= config.progress_interval || epoch_end)) {
        const double secs = absl::ToDoubleSeconds(now - window_start);
        progress(absl::StrFormat(
            "worker %d/%d epoch %d step %d loss %.4f examples/s %.0f staleness mean %.1f "
            "max %d%s",
            config.worker_index, config.num_workers, epoch, stats.steps,
            window_loss / std::max<int64_t>(1, window_steps),
            secs > 0 ? window_examples / secs : 0.0,
            stats.pushes ? staleness_sum / stats.pushes : 0.0, stats.max_staleness,
            epoch_end ? " (epoch end)" : ""));
        window_start = now;
        window_examples = 0;
        window_loss = 0;
        window_steps = 0;
      }
    }
    stats.mean_loss_last_epoch = epoch_loss / std::max<int64_t>(1, epoch_steps);
  }
  if (pending_steps > 0) {
    if (absl::Status s = push(); !s.ok()) return s;
  }
  stats.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  stats.examples_per_second = stats.seconds > 0 ? stats.examples / stats.seconds : 0;
  stats.mean_staleness = stats.pushes ? staleness_sum / stats.pushes : 0;
  return stats;
}

}  // namespace ps
