// VectorOpsRunner: a retried request (same id) is answered again without
// being applied twice; replicated shards and oversized requests are refused.
#include "server/core/vector_ops_runner.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util/table_defs.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

proto::VectorOpsRequest Request(uint64_t id) {
  // X = G (1 everywhere), W += X, then W.W.
  proto::VectorOpsRequest request;
  request.set_table("w");
  request.set_request_id(id);
  request.set_clock(1);
  proto::VectorOp* fill = request.add_ops();
  fill->set_kind(proto::VectorOp::COPY);
  fill->set_dst(1);
  fill->set_src(2);  // X = G
  proto::VectorOp* axpy = request.add_ops();
  axpy->set_kind(proto::VectorOp::AXPY);
  axpy->set_dst(0);
  axpy->set_src(1);
  axpy->set_alpha(1.0);
  proto::VectorOp* dot = request.add_ops();
  dot->set_kind(proto::VectorOp::DOT);
  dot->set_dst(0);
  dot->set_src(0);
  return request;
}

class VectorOpsRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    proto::TableDef def = DenseTableDef("w", 4, 1);
    def.set_optimizer(proto::OPT_LBFGS);
    def.set_lbfgs_memory(1);
    ASSERT_TRUE(store_.CreateTable(def).ok());
    const std::vector<uint64_t> keys = {0, 1, 2, 3};
    const std::vector<float> g = {1, 1, 1, 1};  // G = 1 everywhere
    ASSERT_TRUE(
        store_.Push("w", KeySpec::List(keys), g, 1, [] { return absl::StatusOr<bool>(true); })
            .ok());
  }
  ShardStore store_{0, Placement(1, {/*slice_size=*/2, 16})};
  VectorOpsRunner runner_{&store_};
};

TEST_F(VectorOpsRunnerTest, ARetryIsAnsweredAgainNotApplied) {
  absl::StatusOr<proto::VectorOpsResponse> first = runner_.Run(Request(7), false);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->partials(0), 4.0);  // W = 1 in each of 4 values
  EXPECT_EQ(first->values(), 4u);
  absl::StatusOr<proto::VectorOpsResponse> retry = runner_.Run(Request(7), false);
  ASSERT_TRUE(retry.ok());
  EXPECT_EQ(retry->partials(0), 4.0);  // applied again, it would be 16
  absl::StatusOr<proto::VectorOpsResponse> next = runner_.Run(Request(8), false);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->partials(0), 16.0);  // W = 2: a new id is applied
  // Id 0 means "no id": always applied.
  EXPECT_EQ(runner_.Run(Request(0), false)->partials(0), 36.0);
  EXPECT_EQ(runner_.Run(Request(0), false)->partials(0), 64.0);
}

TEST_F(VectorOpsRunnerTest, RefusesReplicatedShardsAndOversizedRequests) {
  absl::StatusOr<proto::VectorOpsResponse> replicated = runner_.Run(Request(1), true);
  EXPECT_EQ(replicated.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(replicated.status().message(), HasSubstr("table 'w': this server is replicated"));
  absl::StatusOr<proto::VectorOpsResponse> big = runner_.Run(Request(2), false, /*max_ops=*/2);
  EXPECT_EQ(big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(big.status().message(), HasSubstr("3 ops in one request, over the limit of 2"));
  // Neither was applied.
  EXPECT_EQ(runner_.Run(Request(3), false)->partials(0), 4.0);
}

}  // namespace
}  // namespace ps
