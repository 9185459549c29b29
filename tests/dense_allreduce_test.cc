// --dense_sync=allreduce against real servers (in-process, gRPC): the
// servers' copies of tables the workers keep (worker/train/dense_allreduce.h)
// give back exactly what was written, values and optimizer state, so that a
// job resumed from them continues as if it had not stopped; a fresh copy
// reads as the table's initializer and a fresh optimizer.
#include "worker/train/dense_allreduce.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/in_process_cluster.h"
#include "tests/test_util/table_defs.h"
#include "worker/collective/local_collective.h"

namespace ps {
namespace {

using ::testing::ElementsAreArray;

std::vector<proto::TableDef> Defs() {
  return {
      WithAdam(WithUniformInit(DenseTableDef("m/w", 6, 2), -1, 1, 7), 0.01f, 0.9f, 0.999f, 1e-8f),
      WithSgd(DenseTableDef("m/b", 3, 1), 0.1f)};
}

// Steps `tables` n times on gradients that differ by step.
void Train(AllreducedTables& tables, int n) {
  for (int i = 0; i < n; ++i) {
    std::vector<float> gw(12), gb(3);
    for (size_t k = 0; k < gw.size(); ++k) gw[k] = 0.1f * static_cast<float>(k) - 0.3f * i;
    for (size_t k = 0; k < gb.size(); ++k) gb[k] = 1.0f + static_cast<float>(k * i);
    const absl::Span<const float> grads[] = {gw, gb};
    ASSERT_TRUE(tables.Step(grads).ok());
  }
}

TEST(DenseAllreduceTest, ServerCopiesGiveBackValuesAndOptimizerState) {
  auto cluster = InProcessCluster::Start(2);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto client = (*cluster)->Connect(0);
  auto copies = ServerCopyTables(Defs());
  ASSERT_TRUE(copies.ok()) << copies.status();
  // Adam keeps state (a state table); plain SGD does not.
  ASSERT_EQ(copies->size(), 3u);
  EXPECT_EQ((*copies)[1].name(), "m/w/optimizer_state");
  EXPECT_EQ((*copies)[1].num_keys(), 12u * 2);  // m and v per value
  for (const proto::TableDef& def : *copies) ASSERT_TRUE(client->CreateTable(def).ok());

  LocalGroup group(1, absl::Seconds(10));
  auto mine = AllreducedTables::Create(Defs(), group.Member(0));
  ASSERT_TRUE(mine.ok()) << mine.status();
  // A fresh copy: the initializer's values and the optimizer's initial state.
  ASSERT_TRUE(ReadServerCopies(*client, mine->get()).ok());
  std::vector<float> initial_w((*mine)->values(0).begin(), (*mine)->values(0).end());
  EXPECT_NE(initial_w, std::vector<float>(12, 0.0f));  // uniform in (-1, 1), not zeros
  EXPECT_THAT((*mine)->state(0), ElementsAreArray((*mine)->initial_state(0)));

  for (int round = 0; round < 3; ++round) {
    Train(**mine, 5);
    auto moved = WriteServerCopies(*client, **mine, (*mine)->rounds());
    ASSERT_TRUE(moved.ok()) << moved.status();
    EXPECT_EQ(*moved, 2 * 4 * (12 + 24 + 3));  // read and pushed: values and state
    auto back = AllreducedTables::Create(Defs(), group.Member(0));
    ASSERT_TRUE(back.ok());
    ASSERT_TRUE(ReadServerCopies(*client, back->get()).ok());
    for (size_t t = 0; t < 2; ++t) {
      EXPECT_THAT((*back)->values(t), ElementsAreArray((*mine)->values(t))) << round << " " << t;
      EXPECT_THAT((*back)->state(t), ElementsAreArray((*mine)->state(t))) << round << " " << t;
    }
  }
}

TEST(DenseAllreduceTest, OnlyDenseTablesHaveServerCopies) {
  auto copies = ServerCopyTables({SparseTableDef("emb", 8, 4)});
  EXPECT_EQ(copies.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(copies.status().message(), ::testing::HasSubstr("table 'emb'"));
}

}  // namespace
}  // namespace ps
