#include "common/protocol.h"

#include "gtest/gtest.h"

namespace ps {
namespace {

TEST(ProtocolTest, MethodPathsComeFromTheServiceDescriptor) {
  EXPECT_EQ(PushMethodPath(), "/ps.proto.ParameterServer/Push");
  EXPECT_EQ(PullMethodPath(), "/ps.proto.ParameterServer/Pull");
  EXPECT_EQ(PushPullMethodPath(), "/ps.proto.ParameterServer/PushPull");
}

TEST(ProtocolTest, RawFieldsAreBytesFields) {
  const auto* push = proto::PushRequest::descriptor();
  EXPECT_EQ(push->FindFieldByNumber(kPushValuesField)->name(), "values");
  EXPECT_EQ(push->FindFieldByNumber(kPushKeyListField)->name(), "key_list");
  EXPECT_EQ(proto::PullRequest::descriptor()->FindFieldByNumber(kPullKeyListField)->name(),
            "key_list");
  EXPECT_EQ(proto::PullResponse::descriptor()->FindFieldByNumber(kPullReplyValuesField)->name(),
            "values");
  EXPECT_EQ(proto::PushPullRequest::descriptor()->FindFieldByNumber(kPushPullValuesField)->name(),
            "values");
  EXPECT_EQ(
      proto::PushPullResponse::descriptor()->FindFieldByNumber(kPushPullReplyValuesField)->name(),
      "values");
}

}  // namespace
}  // namespace ps
