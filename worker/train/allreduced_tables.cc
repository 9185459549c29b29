#include "worker/train/allreduced_tables.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/hash.h"

namespace ps {
namespace {

uint64_t HashFloats(const AlignedVector<float>& v) {
  return HashString(
      absl::string_view(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Optimizer>> AllreducedOptimizer(const proto::TableDef& def) {
  if (def.kind() != proto::TABLE_DENSE) {
    return absl::InvalidArgumentError(
        absl::StrCat("table '", def.name(), "': only dense tables are kept by allreduce"));
  }
  return MakeOptimizer(def);
}

absl::StatusOr<std::unique_ptr<AllreducedTables>> AllreducedTables::Create(
    const std::vector<proto::TableDef>& defs, Collective* group) {
  std::unique_ptr<AllreducedTables> tables(new AllreducedTables(group));
  size_t total = 0;
  for (const proto::TableDef& def : defs) {
    absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = AllreducedOptimizer(def);
    if (!optimizer.ok()) return optimizer.status();
    Table t;
    t.def = def;
    t.optimizer = *std::move(optimizer);
    t.values.assign(def.num_keys() * def.width(), 0.0f);
    t.state.assign(t.values.size() * t.optimizer->state_per_value(), 0.0f);
    t.optimizer->InitState(t.state.data(), t.state.size());
    t.initial_state = t.state;
    total += t.values.size();
    tables->tables_.push_back(std::move(t));
  }
  tables->buffer_.resize(total + 1);
  return tables;
}

absl::Status AllreducedTables::SyncFrom(int root) {
  for (Table& t : tables_) {
    if (absl::Status s = group_->Broadcast(absl::MakeSpan(t.values), root); !s.ok()) return s;
    if (absl::Status s = group_->Broadcast(absl::MakeSpan(t.state), root); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status AllreducedTables::Step(absl::Span<const absl::Span<const float>> grads) {
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
  buffer_.back() = 1.0f;
  return Round().status();
}

absl::StatusOr<int64_t> AllreducedTables::Finish() {
  for (int64_t joined = 0;; ++joined) {
    std::fill(buffer_.begin(), buffer_.end(), 0.0f);
    absl::StatusOr<int> active = Round();
    if (!active.ok()) return active.status();
    if (*active > 0) continue;
    if (check_every_ > 0) {
      if (absl::Status s = CheckIdentical(); !s.ok()) return s;
    }
    return joined;
  }
}

absl::StatusOr<int> AllreducedTables::Round() {
  if (absl::Status s = group_->AllreduceSum(absl::MakeSpan(buffer_)); !s.ok()) return s;
  // Counts of members are exact in float up to 2^24.
  const int active = static_cast<int>(buffer_.back());
  if (active == 0) return 0;
  const float scale = 1.0f / static_cast<float>(active);
  for (float& g : buffer_) g *= scale;
  size_t at = 0;
  for (Table& t : tables_) {
    const size_t width = t.def.width();
    t.optimizer->Apply(t.values.data(), t.state.empty() ? nullptr : t.state.data(),
                       buffer_.data() + at, t.values.size() / width, width, rounds_);
    at += t.values.size();
  }
  ++rounds_;
  if (check_every_ > 0 && rounds_ % static_cast<uint64_t>(check_every_) == 0) {
    if (absl::Status s = CheckIdentical(); !s.ok()) return s;
  }
  return active;
}

absl::Status AllreducedTables::CheckIdentical() {
  uint64_t h = 0;
  for (const Table& t : tables_) {
    h = HashCombine(h, HashFloats(t.values));
    h = HashCombine(h, HashFloats(t.state));
  }
  // The hash in four 16-bit pieces, each exact as a float.
  float mine[4];
  for (int i = 0; i < 4; ++i) mine[i] = static_cast<float>((h >> (16 * i)) & 0xffff);
  std::vector<float> all(4 * static_cast<size_t>(group_->size()));
  if (absl::Status s = group_->Allgather(mine, absl::MakeSpan(all)); !s.ok()) return s;
  std::vector<int> differ;
  for (int m = 1; m < group_->size(); ++m) {
    if (!std::equal(all.begin(), all.begin() + 4, all.begin() + 4 * m)) differ.push_back(m);
  }
  if (differ.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "allreduced tables differ after round ", rounds_, ": member(s) ", absl::StrJoin(differ, ","),
      " of ", group_->size(), " hold other values than member 0"));
}

}  // namespace ps
