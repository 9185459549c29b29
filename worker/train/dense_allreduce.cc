#include "worker/train/dense_allreduce.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/optimizer/optimizer.h"
#include "worker/train/averaging_trainer.h"

namespace ps {
namespace {

// The servers' current copy of every table and of its state, read into
// `values` (one buffer per table, then one per state table, in the order
// of the tables).
absl::Status ReadCopies(PsClient& client, const AllreducedTables& tables,
                        std::vector<std::vector<float>>* values,
                        std::vector<std::vector<float>>* states) {
  std::vector<PullRange> ops;
  values->resize(tables.num_tables());
  states->resize(tables.num_tables());
  for (size_t t = 0; t < tables.num_tables(); ++t) {
    const std::string& name = tables.def(t).name();
    (*values)[t].resize(tables.values(t).size());
    ops.push_back({name, 0, tables.def(t).num_keys(), absl::MakeSpan((*values)[t])});
    (*states)[t].resize(tables.initial_state(t).size());
    if ((*states)[t].empty()) continue;
    ops.push_back(
        {OptimizerStateTable(name), 0, (*states)[t].size(), absl::MakeSpan((*states)[t])});
  }
  return client.Pull(ops);
}

}  // namespace

std::string OptimizerStateTable(const std::string& table) {
  return absl::StrCat(table, "/optimizer_state");
}

absl::StatusOr<std::vector<proto::TableDef>> ServerCopyTables(
    const std::vector<proto::TableDef>& local) {
  const proto::TableDef adds = AveragingTableOptimizer();
  std::vector<proto::TableDef> out;
  for (const proto::TableDef& def : local) {
    absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = AllreducedOptimizer(def);
    if (!optimizer.ok()) return optimizer.status();
    proto::TableDef copy = adds;
    copy.set_name(def.name());
    copy.set_kind(proto::TABLE_DENSE);
    copy.set_num_keys(def.num_keys());
    copy.set_width(def.width());
    copy.set_initializer(def.initializer());
    copy.set_init_low(def.init_low());
    copy.set_init_high(def.init_high());
    copy.set_seed(def.seed());
    out.push_back(copy);
    const int spv = (*optimizer)->state_per_value();
    if (spv == 0) continue;
    proto::TableDef state = adds;
    state.set_name(OptimizerStateTable(def.name()));
    state.set_kind(proto::TABLE_DENSE);
    state.set_num_keys(def.num_keys() * def.width() * static_cast<uint64_t>(spv));
    state.set_width(1);
    state.set_initializer(proto::INIT_ZEROS);
    out.push_back(state);
  }
  return out;
}

absl::Status ReadServerCopies(PsClient& client, AllreducedTables* tables) {
  std::vector<std::vector<float>> values, states;
  if (absl::Status s = ReadCopies(client, *tables, &values, &states); !s.ok()) return s;
  for (size_t t = 0; t < tables->num_tables(); ++t) {
    std::copy(values[t].begin(), values[t].end(), tables->values(t).begin());
    absl::Span<const float> initial = tables->initial_state(t);
    absl::Span<float> state = tables->state(t);
    for (size_t i = 0; i < state.size(); ++i) state[i] = initial[i] + states[t][i];
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> WriteServerCopies(PsClient& client, const AllreducedTables& tables,
                                          uint64_t clock) {
  std::vector<std::vector<float>> values, states;
  if (absl::Status s = ReadCopies(client, tables, &values, &states); !s.ok()) return s;
  // Pushed d = copy - target: the copy becomes copy - d = target (exactly
  // when the two are within a factor of 2, as successive publishes are).
  std::vector<PushRange> ops;
  int64_t floats = 0;
  for (size_t t = 0; t < tables.num_tables(); ++t) {
    absl::Span<const float> mine = tables.values(t);
    for (size_t i = 0; i < mine.size(); ++i) values[t][i] -= mine[i];
    const std::string& name = tables.def(t).name();
    ops.push_back({name, 0, tables.def(t).num_keys(), values[t]});
    floats += static_cast<int64_t>(mine.size());
    if (states[t].empty()) continue;
    absl::Span<const float> initial = tables.initial_state(t);
    absl::Span<const float> state = tables.state(t);
    for (size_t i = 0; i < state.size(); ++i) states[t][i] -= state[i] - initial[i];
    ops.push_back({OptimizerStateTable(name), 0, states[t].size(), states[t]});
    floats += static_cast<int64_t>(state.size());
  }
  if (absl::Status s = client.Push(ops, clock); !s.ok()) return s;
  return 2 * floats * static_cast<int64_t>(sizeof(float));  // read, then pushed
}

}  // namespace ps
