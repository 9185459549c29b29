#include "worker/lbfgs/vector_space.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace lbfgs {
namespace {

using ::testing::HasSubstr;

constexpr int kM = 2;  // S(0..1), Y(0..1): 9 vectors

class VectorSpaceTest : public ::testing::Test {
 protected:
  VectorSpaceTest() : space_(kM, 3) {
    space_.vec(kW) = {1, 2, 3};
    space_.vec(kX) = {4, -5, 6};
  }
  MemoryVectorSpace space_;
};

TEST_F(VectorSpaceTest, StartsWithZeroVectorsOfTheGivenSize) {
  MemoryVectorSpace space(kM, 4);
  ASSERT_EQ(space.num_vectors(), NumVectors(kM));
  EXPECT_EQ(space.num_vectors(), 9);
  for (int v = 0; v < space.num_vectors(); ++v) {
    EXPECT_EQ(space.vec(v), std::vector<double>(4, 0.0)) << "vector " << v;
  }
  EXPECT_EQ(S(0), 5);
  EXPECT_EQ(S(1), 6);
  EXPECT_EQ(Y(0, kM), 7);
  EXPECT_EQ(Y(1, kM), 8);
}

TEST_F(VectorSpaceTest, DotSumsProductsAndWritesNothing) {
  absl::StatusOr<std::vector<double>> dots = space_.Run({DotOp(kW, kX), DotOp(kW, kW)});
  ASSERT_TRUE(dots.ok()) << dots.status();
  EXPECT_EQ(*dots, (std::vector<double>{1 * 4 - 2 * 5 + 3 * 6, 1 + 4 + 9}));
  EXPECT_EQ(space_.vec(kW), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(space_.vec(kX), (std::vector<double>{4, -5, 6}));
}

TEST_F(VectorSpaceTest, AxpyAddsAScaledSource) {
  ASSERT_TRUE(space_.Run({AxpyOp(kX, kW, 2)}).ok());
  EXPECT_EQ(space_.vec(kX), (std::vector<double>{6, -1, 12}));
  EXPECT_EQ(space_.vec(kW), (std::vector<double>{1, 2, 3}));
}

TEST_F(VectorSpaceTest, ScaleMultipliesInPlace) {
  ASSERT_TRUE(space_.Run({ScaleOp(kX, -0.5)}).ok());
  EXPECT_EQ(space_.vec(kX), (std::vector<double>{-2, 2.5, -3}));
}

TEST_F(VectorSpaceTest, CopyReplacesTheDestination) {
  ASSERT_TRUE(space_.Run({CopyOp(kD, kX)}).ok());
  EXPECT_EQ(space_.vec(kD), (std::vector<double>{4, -5, 6}));
  EXPECT_EQ(space_.vec(kX), (std::vector<double>{4, -5, 6}));
}

TEST_F(VectorSpaceTest, ScaleByZeroClearsNaNAndInfinity) {
  space_.vec(S(1)) = {std::nan(""), std::numeric_limits<double>::infinity(), -7};
  ASSERT_TRUE(space_.Run({ScaleOp(S(1), 0.0)}).ok());
  for (double v : space_.vec(S(1))) {
    EXPECT_EQ(v, 0.0);
    EXPECT_FALSE(std::signbit(v));
  }
  // NaN * 0 would be NaN: a plain multiply would fail this.
  space_.vec(S(1)) = {std::nan(""), 1, 1};
  ASSERT_TRUE(space_.Run({ScaleOp(S(1), -0.0)}).ok());
  EXPECT_EQ(space_.vec(S(1)), (std::vector<double>{0, 0, 0}));
}

TEST_F(VectorSpaceTest, OpsApplyInOrderAndDotsComeBackInOrder) {
  absl::StatusOr<std::vector<double>> dots = space_.Run({
      CopyOp(kD, kW),        // d = (1, 2, 3)
      DotOp(kD, kD),         // 14
      AxpyOp(kD, kX, -1),    // d = (-3, 7, -3)
      DotOp(kD, kW),         // -3 + 14 - 9 = 2
      ScaleOp(kD, 2),        // d = (-6, 14, -6)
      DotOp(kX, kD),         // -24 - 70 - 36 = -130
      CopyOp(Y(1, kM), kD),  //
      ScaleOp(kD, 0),        //
      DotOp(kD, Y(1, kM)),   // 0
  });
  ASSERT_TRUE(dots.ok()) << dots.status();
  EXPECT_EQ(*dots, (std::vector<double>{14, 2, -130, 0}));
  EXPECT_EQ(space_.vec(Y(1, kM)), (std::vector<double>{-6, 14, -6}));
  EXPECT_EQ(space_.runs(), 1);
  EXPECT_EQ(space_.ops(), 9);
}

TEST_F(VectorSpaceTest, SameVectorAsSourceAndDestination) {
  ASSERT_TRUE(space_.Run({AxpyOp(kW, kW, 1), CopyOp(kX, kX)}).ok());
  EXPECT_EQ(space_.vec(kW), (std::vector<double>{2, 4, 6}));
  EXPECT_EQ(space_.vec(kX), (std::vector<double>{4, -5, 6}));
}

TEST_F(VectorSpaceTest, BadIndexIsRefusedAndNothingIsApplied) {
  absl::StatusOr<std::vector<double>> r =
      space_.Run({CopyOp(kD, kW), DotOp(kW, NumVectors(kM)), ScaleOp(kX, 0)});
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("vector op 1"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("names vector 9"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("kDot"));
  EXPECT_EQ(space_.vec(kD), (std::vector<double>{0, 0, 0})) << "op 0 must not have run";
  EXPECT_EQ(space_.vec(kX), (std::vector<double>{4, -5, 6}));
  EXPECT_EQ(space_.runs(), 0);
  EXPECT_EQ(space_.ops(), 0);

  r = space_.Run({AxpyOp(-1, kW, 1)});
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("vector op 0"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("names vector -1"));

  r = space_.Run({CopyOp(kW, 100)});
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("names vector 100"));
}

TEST_F(VectorSpaceTest, ScaleIgnoresItsUnusedSource) {
  VecOp op = ScaleOp(kX, 3);
  op.src = 1000;
  EXPECT_TRUE(space_.Run({op}).ok());
  EXPECT_EQ(space_.vec(kX), (std::vector<double>{12, -15, 18}));
}

TEST(ValidateOpsTest, RefusesAnUnknownKind) {
  VecOp op = CopyOp(kW, kX);
  op.kind = static_cast<VecOp::Kind>(7);
  absl::Status s = ValidateOps({DotOp(kW, kW), op}, NumVectors(1));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("vector op 1"));
  EXPECT_TRUE(ValidateOps({DotOp(Y(0, 1), S(0))}, NumVectors(1)).ok());
  EXPECT_FALSE(ValidateOps({DotOp(Y(0, 1), S(0))}, NumVectors(0)).ok());
}

TEST(ApplyOpTest, WorksOnASlice) {
  // A server applies ops to its slice: elements [0, n) of its local vectors.
  std::vector<double> a = {1, 2, 3, 4}, b = {10, 20, 30, 40};
  double* vecs[] = {a.data() + 2, b.data() + 2};
  EXPECT_EQ(ApplyOp(DotOp(0, 1), vecs, 2), 3 * 30 + 4 * 40);
  EXPECT_EQ(ApplyOp(AxpyOp(1, 0, -10), vecs, 2), 0);
  EXPECT_EQ(b, (std::vector<double>{10, 20, 0, 0}));
}

TEST(MemoryVectorSpaceTest, ResizedVectorIsReported) {
  MemoryVectorSpace space(1, 3);
  space.vec(kG).resize(2);
  EXPECT_EQ(space.Run({DotOp(kW, kW)}).status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace lbfgs
}  // namespace ps
