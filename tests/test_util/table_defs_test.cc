#include "tests/test_util/table_defs.h"

#include "common/table_def.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

TEST(TableDefsTest, SumTablesAreValidZerosWithSgdAtRateOne) {
  for (const proto::TableDef& def : {SumTable("d", 10, 2), SparseSumTable("s", 3)}) {
    EXPECT_TRUE(ValidateTableDef(def).ok()) << ValidateTableDef(def);
    EXPECT_EQ(def.initializer(), proto::INIT_ZEROS);
    EXPECT_EQ(def.optimizer(), proto::OPT_SGD);
    EXPECT_EQ(def.learning_rate(), 1.0f);
  }
  const proto::TableDef sparse = SparseSumTable("s", 3);
  EXPECT_EQ(sparse.kind(), proto::TABLE_SPARSE);
  EXPECT_EQ(sparse.num_keys(), 0u);
  EXPECT_EQ(sparse.num_buckets(), 16u);
  EXPECT_EQ(sparse.width(), 3u);
}

TEST(TableDefsTest, InitializersAndOptimizersKeepTheShape) {
  const proto::TableDef def =
      WithAdam(WithNormalInit(DenseTableDef("w", 7, 2), 0.5f, 0.01f), 0.01f, 0.9f, 0.999f, 1e-8f);
  EXPECT_TRUE(ValidateTableDef(def).ok()) << ValidateTableDef(def);
  EXPECT_EQ(def.name(), "w");
  EXPECT_EQ(def.num_keys(), 7u);
  EXPECT_EQ(def.width(), 2u);
  EXPECT_EQ(def.initializer(), proto::INIT_NORMAL);
  EXPECT_EQ(def.init_mean(), 0.5f);
  EXPECT_EQ(def.init_stddev(), 0.01f);
  EXPECT_EQ(def.optimizer(), proto::OPT_ADAM);
  EXPECT_EQ(def.beta2(), 0.999f);

  const proto::TableDef adagrad =
      WithAdagrad(WithUniformInit(SparseTableDef("e", 4, 8), -1, 1, /*seed=*/3), 0.05f, 0.1f);
  EXPECT_TRUE(ValidateTableDef(adagrad).ok()) << ValidateTableDef(adagrad);
  EXPECT_EQ(adagrad.num_buckets(), 8u);
  EXPECT_EQ(adagrad.seed(), 3u);
  EXPECT_EQ(adagrad.initial_accumulator(), 0.1f);
  EXPECT_EQ(CreateTableRequestFor(adagrad).table().SerializeAsString(),
            adagrad.SerializeAsString());
}

}  // namespace
}  // namespace ps
