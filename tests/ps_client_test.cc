// PsClient against real in-process shards: routing and chunking, errors that
// name the server, and the cluster-spec check at Connect.
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/in_process_cluster.h"
#include "tests/test_util/table_defs.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

TEST(PsClientTest, SmallChunksAndManyShardsRoundTrip) {
  auto cluster = InProcessCluster::Start(3, {/*slice_size=*/5, 64});
  ASSERT_TRUE(cluster.ok());
  PsClientOptions options = (*cluster)->ClientOptions(1);
  options.max_values_per_request = 7;  // forces ranges to be cut across requests
  auto client = PsClient::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->CreateTable(SumTable("t", 103, 2)).ok());
  std::vector<float> grads(206);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = -static_cast<float>(i);
  PushRange push{"t", 0, 103, grads};
  Versions versions;
  ASSERT_TRUE((*client)->Push({&push, 1}, 0, &versions).ok());
  ASSERT_EQ(versions.size(), 3u);
  for (int s = 0; s < 3; ++s) EXPECT_GT(versions[s], 0u) << "server " << s << " got no push";
  std::vector<float> values(2 * 50);
  PullRange pull{"t", 40, 90, absl::MakeSpan(values)};
  ASSERT_TRUE((*client)->Pull({&pull, 1}).ok());
  for (size_t i = 0; i < values.size(); ++i) ASSERT_EQ(values[i], 80.0f + i) << i;
}

TEST(PsClientTest, SameInitialValuesWhateverTheClusterSize) {
  auto one = InProcessCluster::Start(1);
  auto three = InProcessCluster::Start(3, {/*slice_size=*/4, 64});
  ASSERT_TRUE(one.ok() && three.ok());
  std::vector<float> a(500 * 3), b(500 * 3);
  for (auto [cluster, out] : {std::pair{one->get(), &a}, std::pair{three->get(), &b}}) {
    auto client = cluster->Connect(0);
    const proto::TableDef def = WithUniformInit(SumTable("emb", 500, 3), -1, 1, /*seed=*/11);
    ASSERT_TRUE(client->CreateTable(def).ok());
    PullRange pull{"emb", 0, 500, absl::MakeSpan(*out)};
    ASSERT_TRUE(client->Pull({&pull, 1}).ok());
  }
  EXPECT_EQ(a, b);
}

TEST(PsClientTest, UnreachableServerIsNamed) {
  auto cluster = InProcessCluster::Start(2);
  ASSERT_TRUE(cluster.ok());
  const std::string dead = (*cluster)->addresses()[1];
  (*cluster)->server(1).Shutdown();
  PsClientOptions options = (*cluster)->ClientOptions(0);
  options.connect_timeout = absl::Milliseconds(500);
  auto client = PsClient::Connect(options);
  ASSERT_FALSE(client.ok());
  EXPECT_THAT(client.status().message(), HasSubstr("server 1 (" + dead + ")"));
  EXPECT_THAT(client.status().message(), HasSubstr("is it running?"));
}

TEST(PsClientTest, ServerDyingMidJobFailsTheCallNamingIt) {
  auto cluster = InProcessCluster::Start(2, {/*slice_size=*/4, 64});
  ASSERT_TRUE(cluster.ok());
  PsClientOptions options = (*cluster)->ClientOptions(0);
  options.timeout = absl::Milliseconds(300);
  options.max_attempts = 2;
  auto client = PsClient::Connect(options);
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->CreateTable(SumTable("t", 100, 1)).ok());
  const std::string dead = (*cluster)->addresses()[0];
  (*cluster)->server(0).Shutdown();
  std::vector<float> values(100);
  PullRange pull{"t", 0, 100, absl::MakeSpan(values)};
  absl::Status status = (*client)->Pull({&pull, 1});
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("server 0 (" + dead + ")"));
  EXPECT_THAT(status.message(), HasSubstr("2 attempt(s)"));
}

TEST(PsClientTest, MismatchedClusterSpecIsRefusedAtConnect) {
  auto cluster = InProcessCluster::Start(3);
  ASSERT_TRUE(cluster.ok());
  PsClientOptions options = (*cluster)->ClientOptions(0);
  options.servers.pop_back();  // the worker thinks there are 2 servers
  auto client = PsClient::Connect(options);
  EXPECT_EQ(client.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(client.status().message(), HasSubstr("reports shard 0 of 3"));

  options = (*cluster)->ClientOptions(0);
  std::swap(options.servers[0], options.servers[2]);  // wrong order
  EXPECT_EQ(PsClient::Connect(options).status().code(), absl::StatusCode::kFailedPrecondition);

  options = (*cluster)->ClientOptions(0);
  options.placement.slice_size = 8;
  EXPECT_THAT(PsClient::Connect(options).status().message(), HasSubstr("slice_size"));
}

TEST(PsClientTest, ServerErrorsComeBackWithCodeAndServerName) {
  auto cluster = InProcessCluster::Start(2);
  ASSERT_TRUE(cluster.ok());
  auto client = (*cluster)->Connect(0);
  ASSERT_TRUE(client->CreateTable(SumTable("t", 10, 1)).ok());
  std::vector<float> nan(10, std::nanf(""));
  PushRange bad{"t", 0, 10, nan};
  absl::Status s = client->Push({&bad, 1}, 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("not finite"));
  EXPECT_THAT(s.message(), HasSubstr("server "));

  std::vector<float> out(5);
  PullRange missing{"nope", 0, 5, absl::MakeSpan(out)};
  EXPECT_EQ(client->Pull({&missing, 1}).code(), absl::StatusCode::kNotFound);

  proto::TableDef other = SumTable("t", 11, 1);
  absl::Status conflict = client->CreateTable(other);
  EXPECT_EQ(conflict.code(), absl::StatusCode::kAlreadyExists);

  std::vector<float> wrong(7);
  PushRange uneven{"t", 0, 2, wrong};
  EXPECT_EQ(client->Push({&uneven, 1}, 0).code(), absl::StatusCode::kInvalidArgument);
}

TEST(PsClientTest, TableDefinitionOfOwnAndOtherClientsTables) {
  auto cluster = InProcessCluster::Start(2);
  ASSERT_TRUE(cluster.ok());
  auto creator = (*cluster)->Connect(0);
  auto reader = (*cluster)->Connect(1);
  const proto::TableDef def = WithUniformInit(SumTable("t", 10, 3), -1, 1, /*seed=*/11);
  ASSERT_TRUE(creator->CreateTable(def).ok());
  for (PsClient* client : {creator.get(), reader.get()}) {
    absl::StatusOr<proto::TableDef> known = client->TableDefinition("t");
    ASSERT_TRUE(known.ok()) << known.status();
    EXPECT_EQ(known->SerializeAsString(), def.SerializeAsString());
  }
  absl::StatusOr<proto::TableDef> missing = reader->TableDefinition("nope");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("'nope'"));
}

}  // namespace
}  // namespace ps

namespace ps {
namespace {

// A client whose retries could outlast the servers' memory of push ids is
// refused at Connect: a late retry of an applied push would apply it twice.
TEST(PsClientRetryWindowTest, RetriesLongerThanTheDedupRetentionAreRefused) {
  auto cluster = InProcessCluster::Start(1);
  ASSERT_TRUE(cluster.ok());
  PsClientOptions options = (*cluster)->ClientOptions(1);
  options.timeout = absl::Seconds(50);  // 3 attempts: 150 s > the default 120 s
  auto client = PsClient::Connect(options);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(client.status().message(), ::testing::HasSubstr("--dedup_retention_seconds"));
  EXPECT_THAT(client.status().message(), ::testing::HasSubstr("--timeout_seconds"));
  options.timeout = absl::Seconds(30);
  EXPECT_TRUE(PsClient::Connect(options).ok());
}

}  // namespace
}  // namespace ps
