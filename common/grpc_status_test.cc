#include "common/grpc_status.h"

#include "gtest/gtest.h"

namespace ps {
namespace {

TEST(GrpcStatusTest, RoundTripsEveryCode) {
  for (int c = 0; c <= 16; ++c) {
    const absl::Status s(static_cast<absl::StatusCode>(c), c == 0 ? "" : "msg");
    const grpc::Status g = ToGrpcStatus(s);
    EXPECT_EQ(static_cast<int>(g.error_code()), c);
    EXPECT_EQ(FromGrpcStatus(g), s);
  }
  EXPECT_EQ(ToGrpcStatus(absl::NotFoundError("table 'x'")).error_message(), "table 'x'");
}

}  // namespace
}  // namespace ps
