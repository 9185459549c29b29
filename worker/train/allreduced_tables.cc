#include "worker/train/allreduced_tables.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ps {

absl::StatusOr<std::unique_ptr<AllreducedTables>> AllreducedTables::Create(
    const std::vector<proto::TableDef>& defs, Collective* group) {
  std::unique_ptr<AllreducedTables> tables(new AllreducedTables(group));
  size_t total = 0;
  for (const proto::TableDef& def : defs) {
    if (def.kind() != proto::TABLE_DENSE) {
      return absl::InvalidArgumentError(
          absl::StrCat("table '", def.name(), "': only dense tables are kept by allreduce"));
    }
    absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = MakeOptimizer(def);
    if (!optimizer.ok()) return optimizer.status();
    Table t;
    t.def = def;
    t.optimizer = *std::move(optimizer);
    t.values.assign(def.num_keys() * def.width(), 0.0f);
    t.state.assign(t.values.size() * t.optimizer->state_per_value(), 0.0f);
    t.optimizer->InitState(t.state.data(), t.state.size());
    total += t.values.size();
    tables->tables_.push_back(std::move(t));
  }
  tables->buffer_.resize(total);
  return tables;
}

absl::Status AllreducedTables::SyncFrom(int root) {
  for (Table& t : tables_) {
    if (absl::Status s = group_->Broadcast(absl::MakeSpan(t.values), root); !s.ok()) return s;
    if (absl::Status s = group_->Broadcast(absl::MakeSpan(t.state), root); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status AllreducedTables::Step(absl::Span<const absl::Span<const float>> grads,
                                    uint64_t clock) {
  if (grads.size() != tables_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a step of ", grads.size(), " gradients for ", tables_.size(), " tables"));
  }
  size_t at = 0;
  for (size_t t = 0; t < tables_.size(); ++t) {
    if (grads[t].size() != tables_[t].values.size()) {
      return absl::InvalidArgumentError(absl::StrCat("table '", tables_[t].def.name(),
                                                     "': a gradient of ", grads[t].size(),
                                                     " values for ", tables_[t].values.size()));
    }
    std::copy(grads[t].begin(), grads[t].end(), buffer_.begin() + static_cast<ptrdiff_t>(at));
    at += grads[t].size();
  }
  if (absl::Status s = group_->AllreduceSum(absl::MakeSpan(buffer_)); !s.ok()) return s;
  const float scale = 1.0f / static_cast<float>(group_->size());
  for (float& g : buffer_) g *= scale;
  at = 0;
  for (Table& t : tables_) {
    const size_t width = t.def.width();
    t.optimizer->Apply(t.values.data(), t.state.empty() ? nullptr : t.state.data(),
                       buffer_.data() + at, t.values.size() / width, width, clock);
    at += t.values.size();
  }
  return absl::OkStatus();
}

}  // namespace ps
