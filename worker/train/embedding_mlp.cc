#include "worker/train/embedding_mlp.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/hash.h"
#include "worker/train/allreduced_tables.h"
#include "worker/train/averaging_rows.h"
#include "worker/train/dense_allreduce.h"
#include "worker/train/embedding_mlp_math.h"
#include "worker/train/libsvm_reader.h"
#include "worker/train/sparse_batch.h"
#include "worker/train/sparse_row_io.h"

namespace ps {

namespace {

// No row of the embedding table is reserved: a key that cannot be a
// feature id is asked for nothing (BatchKeys needs one).
constexpr uint64_t kUnusedKey = ~uint64_t{0};

std::string Name(const EmbeddingMlpConfig& model, const char* table) {
  return absl::StrCat(model.prefix, "/", table);
}

// The keys of `mlp`'s units in each dense table (w1 holds `in` per unit).
template <typename Op, typename Values>
std::vector<Op> MlpOps(const EmbeddingMlpConfig& model, Values w1, Values b1, Values w2, Values b2,
                       const Mlp& mlp, bool with_b2) {
  const uint64_t first = mlp.first, end = mlp.first + mlp.hidden, in = mlp.in;
  std::vector<Op> ops = {Op{Name(model, "w1"), first * in, end * in, w1},
                         Op{Name(model, "b1"), first, end, b1},
                         Op{Name(model, "w2"), first, end, w2}};
  if (with_b2) ops.push_back(Op{Name(model, "b2"), 0, 1, b2});
  return ops;
}

// Pulls `mlp`'s units (and b2).
absl::Status PullMlp(PsClient& client, const EmbeddingMlpConfig& model, Mlp* mlp) {
  return client.Pull(MlpOps<PullRange>(model, absl::MakeSpan(mlp->w1), absl::MakeSpan(mlp->b1),
                                       absl::MakeSpan(mlp->w2), absl::MakeSpan(mlp->b2), *mlp,
                                       true));
}

// Pushes the gradient of `grad`'s units (and b2's when they own it).
absl::Status PushMlp(PsClient& client, const EmbeddingMlpConfig& model, const Mlp& grad,
                     uint64_t clock) {
  using V = absl::Span<const float>;
  return client.Push(MlpOps<PushRange>(model, V(grad.w1), V(grad.b1), V(grad.w2), V(grad.b2), grad,
                                       grad.owns_b2()),
                     clock);
}

// How training reads and writes the MLP's dense tables: whole, through the
// servers at every step (Downpour), or through AveragingRows over each
// table's keys [0, size) (averaging, EASGD), whose rounds end with the
// embedding rows' (every table gets one Push per step), or kept by every
// worker and stepped together by allreduce (--dense_sync=allreduce).
class MlpIo {
 public:
  MlpIo(PsClient& client, const EmbeddingMlpConfig& model) : client_(client), model_(model) {}

  absl::Status Init(const SparseTrainerConfig& config, const Mlp& shape) {
    if (config.dense_allreduce.group != nullptr) return InitAllreduce(config.dense_allreduce);
    if (config.averaging.algorithm == Algorithm::kDownpour) return absl::OkStatus();
    const std::pair<const char*, size_t> tables[] = {
        {"w1", shape.w1.size()}, {"b1", shape.b1.size()}, {"w2", shape.w2.size()}, {"b2", 1}};
    for (const auto& [name, size] : tables) {
      absl::StatusOr<std::unique_ptr<AveragingRows>> rows = AveragingRows::Create(
          client_, Name(model_, name), 1, config.averaging, config.num_workers);
      if (!rows.ok()) return rows.status();
      averaged_.push_back(*std::move(rows));
      std::vector<uint64_t>& keys = keys_.emplace_back(size);
      for (size_t k = 0; k < size; ++k) keys[k] = k;
    }
    return absl::OkStatus();
  }

  absl::Status Pull(uint64_t step, Mlp* mlp) {
    if (allreduced_ != nullptr) {
      std::vector<float>* parts[] = {&mlp->w1, &mlp->b1, &mlp->w2, &mlp->b2};
      for (size_t t = 0; t < 4; ++t) {
        absl::Span<const float> mine = allreduced_->values(t);
        parts[t]->assign(mine.begin(), mine.end());
      }
      return absl::OkStatus();
    }
    if (averaged_.empty()) {
      bytes_ += MlpBytes(*mlp);
      return PullMlp(client_, model_, mlp);
    }
    std::vector<float>* parts[] = {&mlp->w1, &mlp->b1, &mlp->w2, &mlp->b2};
    for (size_t t = 0; t < averaged_.size(); ++t) {
      if (absl::Status s = averaged_[t]->Pull(keys_[t], step, absl::MakeSpan(*parts[t])); !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }

  absl::Status Push(const Mlp& grad, uint64_t clock) {
    if (allreduced_ != nullptr) {
      const absl::Span<const float> grads[] = {grad.w1, grad.b1, grad.w2, grad.b2};
      if (absl::Status s = allreduced_->Step(grads); !s.ok()) return s;
      bytes_ += RoundBytes();
      if (allreduce_.publish_every <= 0 || ++steps_ % allreduce_.publish_every != 0) {
        return absl::OkStatus();
      }
      return Publish(clock);
    }
    if (averaged_.empty()) {
      bytes_ += MlpBytes(grad);
      return PushMlp(client_, model_, grad, clock);
    }
    const std::vector<float>* parts[] = {&grad.w1, &grad.b1, &grad.w2, &grad.b2};
    for (size_t t = 0; t < averaged_.size(); ++t) {
      if (absl::Status s = averaged_[t]->Push(keys_[t], *parts[t], clock); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  absl::Status Flush(uint64_t clock) {
    if (allreduced_ != nullptr) {
      // Joins the others' last rounds, then rank 0 writes the tables for
      // the checkpoints and the evaluation, which wait for it (a barrier).
      absl::StatusOr<int64_t> joined = allreduced_->Finish();
      if (!joined.ok()) return joined.status();
      bytes_ += *joined * RoundBytes();
      if (absl::Status s = allreduced_->CheckIdentical(); !s.ok()) return s;
      if (absl::Status s = Publish(clock); !s.ok()) return s;
      float barrier = 0;
      return allreduce_.group->Broadcast(absl::MakeSpan(&barrier, 1), 0);
    }
    for (auto& rows : averaged_) {
      if (absl::Status s = rows->Flush(clock); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  int64_t bytes() const { return bytes_; }
  int64_t rounds() const {
    return allreduced_ == nullptr ? 0 : static_cast<int64_t>(allreduced_->rounds());
  }

 private:
  static int64_t MlpBytes(const Mlp& mlp) {
    return static_cast<int64_t>(sizeof(float) *
                                (mlp.w1.size() + mlp.b1.size() + mlp.w2.size() + mlp.b2.size()));
  }
  int64_t RoundBytes() const {
    return static_cast<int64_t>(sizeof(float) * allreduced_->round_floats());
  }

  // Every worker keeps the MLP's tables (the optimizer flags' rules),
  // starting from the servers' copies as rank 0 reads them.
  absl::Status InitAllreduce(const DenseAllreduceConfig& config) {
    allreduce_ = config;
    std::vector<proto::TableDef> defs = EmbeddingMlpTables(model_, config.optimizer);
    defs.erase(defs.begin());  // the embedding table stays on the servers
    absl::StatusOr<std::unique_ptr<AllreducedTables>> tables =
        AllreducedTables::Create(defs, config.group);
    if (!tables.ok()) return tables.status();
    allreduced_ = *std::move(tables);
    allreduced_->set_check_every(config.check_every);
    if (config.group->rank() == 0) {
      if (absl::Status s = ReadServerCopies(client_, allreduced_.get()); !s.ok()) return s;
    }
    return allreduced_->SyncFrom(0);
  }

  // Rank 0 sets the servers' copies to its tables.
  absl::Status Publish(uint64_t clock) {
    if (allreduce_.group->rank() != 0) return absl::OkStatus();
    absl::StatusOr<int64_t> moved = WriteServerCopies(client_, *allreduced_, clock);
    if (!moved.ok()) return moved.status();
    bytes_ += *moved;
    return absl::OkStatus();
  }

  PsClient& client_;
  const EmbeddingMlpConfig& model_;
  std::vector<std::unique_ptr<AveragingRows>> averaged_;
  std::vector<std::vector<uint64_t>> keys_;
  DenseAllreduceConfig allreduce_;
  std::unique_ptr<AllreducedTables> allreduced_;
  int64_t steps_ = 0, bytes_ = 0;
};

absl::Status CheckNumFields(const EmbeddingMlpConfig& model) {
  if (model.num_fields >= 1 && model.num_fields <= kMaxLibsvmField + 1) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("embedding_mlp: num_fields is ", model.num_fields,
                                                 "; expected 1 to ", kMaxLibsvmField + 1));
}

// Every feature of the batch must have a field the model has inputs for.
// Checked before a step so that a bad line fails with its place rather than
// reading past the MLP's inputs.
absl::Status CheckFields(const std::vector<SparseExample>& batch, uint32_t num_fields,
                         const std::string& path) {
  for (const SparseExample& ex : batch) {
    for (size_t j = 0; j < ex.fields.size(); ++j) {
      if (ex.fields[j] < num_fields) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          path, ":", ex.line, ": feature ", j + 1, " (", ex.fields[j], ":", ex.indices[j],
          ") has field ", ex.fields[j], ", but the model has ", num_fields,
          " field(s) (--num_fields=", num_fields, "); fields must be in [0, ", num_fields, ")"));
    }
  }
  return absl::OkStatus();
}

// The probability of example `ex` (its rows at `rows`, by index) under the
// whole MLP; e, a and h are scratch.
double Forward(const SparseExample& ex, const std::vector<uint32_t>& index, const float* rows,
               const Mlp& mlp, std::vector<float>* e, std::vector<float>* a,
               std::vector<float>* h) {
  e->resize(mlp.in);
  EmbedSums(ex, index, rows, mlp.dim, mlp.in, e->data());
  return Sigmoid(HiddenShare(mlp, e->data(), a, h));
}

}  // namespace

std::vector<proto::TableDef> EmbeddingMlpTables(const EmbeddingMlpConfig& model,
                                                const proto::TableDef& optimizer) {
  std::vector<proto::TableDef> tables;
  proto::TableDef emb = optimizer;
  emb.set_name(Name(model, "emb"));
  emb.set_kind(proto::TABLE_SPARSE);
  emb.set_num_buckets(model.num_buckets);
  emb.set_width(model.dim);
  emb.set_initializer(proto::INIT_UNIFORM);
  emb.set_init_low(-0.05f);
  emb.set_init_high(0.05f);
  emb.set_seed(HashCombine(model.seed, 1));
  tables.push_back(emb);
  auto dense = [&](const char* name, uint64_t keys, float bound, uint64_t salt) {
    proto::TableDef def = optimizer;
    def.set_name(Name(model, name));
    def.set_width(1);
    def.set_num_keys(keys);
    if (bound > 0) {
      def.set_initializer(proto::INIT_UNIFORM);
      def.set_init_low(-bound);
      def.set_init_high(bound);
    } else {
      def.set_initializer(proto::INIT_ZEROS);
    }
    def.set_seed(HashCombine(model.seed, salt));
    tables.push_back(def);
  };
  const float in = static_cast<float>(model.num_fields) * model.dim;
  const float h = static_cast<float>(model.hidden);
  dense("w1", uint64_t{model.num_fields} * model.dim * model.hidden, std::sqrt(6.0f / (in + h)), 2);
  dense("b1", model.hidden, 0, 3);
  dense("w2", model.hidden, std::sqrt(6.0f / (h + 1)), 4);
  dense("b2", 1, 0, 5);
  return tables;
}

absl::StatusOr<SparseTrainStats> TrainEmbeddingMlp(
    PsClient& client, const std::string& train_path, const SparseTrainerConfig& config,
    const EmbeddingMlpConfig& model, const std::function<void(const std::string&)>& progress) {
  if (absl::Status s = CheckNumFields(model); !s.ok()) return s;
  Collective* const group = config.partitions;
  const int k = group == nullptr ? 1 : group->size(), p = group == nullptr ? 0 : group->rank();
  if (model.hidden < static_cast<uint32_t>(k)) {
    return absl::InvalidArgumentError(absl::StrCat("embedding_mlp: ", model.hidden,
                                                   " hidden units are too few for ", k,
                                                   " partitions (each owns at least one)"));
  }
  const uint32_t d = model.dim, in = model.num_fields * model.dim;
  absl::StatusOr<std::unique_ptr<RowIo>> made = MakeRowIo(client, Name(model, "emb"), d, config);
  if (!made.ok()) return made.status();
  RowIo& io = **made;
  BatchKeys bk;
  // This partition's units (all of them without partitions).
  const uint32_t first = static_cast<uint32_t>(uint64_t{model.hidden} * p / k);
  const uint32_t count = static_cast<uint32_t>(uint64_t{model.hidden} * (p + 1) / k) - first;
  Mlp mlp(model, first, count), grad(model, first, count);
  MlpIo mlp_io(client, model);
  if (absl::Status s = mlp_io.Init(config, mlp); !s.ok()) return s;
  std::vector<float> rows, row_grads, sums, z_sum, de;
  std::vector<double> z;
  std::vector<std::vector<float>> as, hs;
  // One minibatch. Partition 0 pulls the embedding rows, sums them per
  // field (`sums`, batch x in) and hands the sums to the others; each
  // partition computes its units' share of every logit (`z`, summed over
  // the partitions) and, from the common dL/dz, its units' gradients and
  // share of dL/d(sums) (`de`, summed); partition 0 pushes the rows'.
  auto step = [&](const std::vector<SparseExample>& batch,
                  uint64_t clock) -> absl::StatusOr<StepOutcome> {
    const size_t n = batch.size();
    StepOutcome outcome;
    sums.assign(n * in, 0.0f);
    if (p == 0) {
      if (absl::Status s = CheckFields(batch, model.num_fields, train_path); !s.ok()) return s;
      bk.Build(batch, kUnusedKey);
      rows.assign(bk.keys.size() * d, 0.0f);
      if (absl::Status s = io.Pull(bk.keys, clock, absl::MakeSpan(rows)); !s.ok()) return s;
      for (size_t i = 0; i < n; ++i)
        EmbedSums(batch[i], bk.index[i], rows.data(), d, in, &sums[i * in]);
      outcome.keys = static_cast<int64_t>(bk.keys.size());
    }
    if (k > 1) {
      if (absl::Status s = group->Broadcast(absl::MakeSpan(sums), 0); !s.ok()) return s;
    }
    if (absl::Status s = mlp_io.Pull(clock, &mlp); !s.ok()) return s;
    z.resize(n);
    as.resize(n);
    hs.resize(n);
    for (size_t i = 0; i < n; ++i) z[i] = HiddenShare(mlp, &sums[i * in], &as[i], &hs[i]);
    if (k > 1) {  // the partitions' shares, summed (in float on the wire)
      z_sum.assign(z.begin(), z.end());
      if (absl::Status s = group->AllreduceSum(absl::MakeSpan(z_sum)); !s.ok()) return s;
      z.assign(z_sum.begin(), z_sum.end());
    }
    grad.Zero();
    de.assign(n * in, 0.0f);
    for (size_t i = 0; i < n; ++i) {
      const double prob = Sigmoid(z[i]);
      outcome.loss_sum += LogLoss(prob, batch[i].label);
      // Back-propagation of the log-loss: dL/dz = p - y.
      const float g = static_cast<float>(prob - batch[i].label);
      BackShare(mlp, &sums[i * in], as[i], hs[i], g, &grad, &de[i * in]);
    }
    if (k > 1) {
      if (absl::Status s = group->AllreduceSum(absl::MakeSpan(de)); !s.ok()) return s;
    }
    if (p == 0) {
      row_grads.assign(rows.size(), 0.0f);
      for (size_t i = 0; i < n; ++i)
        AddRowGrads(batch[i], bk.index[i], &de[i * in], d, row_grads.data());
      if (absl::Status s = io.Push(bk.keys, row_grads, clock); !s.ok()) return s;
    }
    if (absl::Status s = mlp_io.Push(grad, clock); !s.ok()) return s;
    return outcome;
  };
  absl::StatusOr<SparseTrainStats> stats =
      RunSparseTraining(train_path, config, io, step, progress);
  if (!stats.ok()) return stats;
  if (absl::Status s = mlp_io.Flush(static_cast<uint64_t>(stats->steps)); !s.ok()) return s;
  stats->dense_bytes = mlp_io.bytes();
  stats->allreduce_rounds = mlp_io.rounds();
  return stats;
}

absl::StatusOr<SparseEvaluation> EvaluateEmbeddingMlp(PsClient& client,
                                                      const std::string& test_path,
                                                      const EmbeddingMlpConfig& model,
                                                      int batch_size) {
  if (absl::Status s = CheckNumFields(model); !s.ok()) return s;
  const uint32_t d = model.dim;
  Mlp mlp(model);
  if (absl::Status s = PullMlp(client, model, &mlp); !s.ok()) return s;
  BatchKeys bk;
  std::vector<float> rows, e, a, h;
  return RunSparseEvaluation(
      test_path, batch_size,
      [&](const std::vector<SparseExample>& batch, std::vector<double>* p) -> absl::Status {
        if (absl::Status s = CheckFields(batch, model.num_fields, test_path); !s.ok()) return s;
        bk.Build(batch, kUnusedKey);
        rows.assign(bk.keys.size() * d, 0.0f);
        if (absl::Status s = client.PullKeys(Name(model, "emb"), bk.keys, d, absl::MakeSpan(rows));
            !s.ok()) {
          return s;
        }
        p->resize(batch.size());
        for (size_t i = 0; i < batch.size(); ++i) {
          (*p)[i] = Forward(batch[i], bk.index[i], rows.data(), mlp, &e, &a, &h);
        }
        return absl::OkStatus();
      });
}

}  // namespace ps
