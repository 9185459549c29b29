#include "common/cluster_spec.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

TEST(ClusterSpecTest, ParsesList) {
  auto spec = ClusterSpec::Parse("127.0.0.1:7000, localhost:7001");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->servers, (std::vector<std::string>{"127.0.0.1:7000", "localhost:7001"}));
  EXPECT_EQ(spec->ToString(), "127.0.0.1:7000,localhost:7001");
}

TEST(ClusterSpecTest, RejectsBadEntriesNamingThem) {
  EXPECT_THAT(ClusterSpec::Parse("").status().message(), HasSubstr("empty"));
  EXPECT_THAT(ClusterSpec::Parse("a:1,b").status().message(), HasSubstr("entry 1 'b'"));
  EXPECT_THAT(ClusterSpec::Parse("a:99999").status().message(), HasSubstr("1..65535"));
  EXPECT_THAT(ClusterSpec::Parse("a:x").status().message(), HasSubstr("'a:x'"));
  EXPECT_THAT(ClusterSpec::Parse("a:1,a:1").status().message(), HasSubstr("twice"));
  EXPECT_EQ(ClusterSpec::Parse(":1").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ps
