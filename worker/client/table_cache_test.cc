#include "worker/client/table_cache.h"

#include "common/table_layout.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

TEST(TableCacheTest, KeepsEachDefinitionWithItsLayout) {
  TableCache cache;
  EXPECT_FALSE(cache.Definition("emb").has_value());
  EXPECT_FALSE(cache.Layout("emb").has_value());

  proto::TableDef sparse;
  sparse.set_name("emb");
  sparse.set_kind(proto::TABLE_SPARSE);
  cache.Add("emb", sparse);
  ASSERT_TRUE(cache.Definition("emb").has_value());
  EXPECT_EQ(cache.Definition("emb")->kind(), proto::TABLE_SPARSE);
  ASSERT_TRUE(cache.Layout("emb").has_value());
  EXPECT_TRUE(cache.Layout("emb")->sparse);
  EXPECT_EQ(cache.Layout("emb")->num_buckets, kDefaultSparseBuckets);

  sparse.set_num_buckets(64);  // a new definition replaces the old
  cache.Add("emb", sparse);
  EXPECT_EQ(cache.Layout("emb")->num_buckets, 64u);
  EXPECT_FALSE(cache.Layout("other").has_value());
}

}  // namespace
}  // namespace ps
