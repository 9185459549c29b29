#include "common/etcd_kv_store.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/etcd_test_server.h"
#include "common/kv_store_conformance.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

// One etcd for every conformance test of this binary (each test writes under
// its own prefix); started by the first test, stopped at exit.
absl::StatusOr<EtcdTestServer*> SharedEtcd() {
  static absl::Status* const start_error = new absl::Status();
  static const std::unique_ptr<EtcdTestServer> server = [] {
    absl::StatusOr<std::unique_ptr<EtcdTestServer>> started = EtcdTestServer::Start();
    if (!started.ok()) {
      *start_error = started.status();
      return std::unique_ptr<EtcdTestServer>();
    }
    return std::move(*started);
  }();
  if (server == nullptr) return *start_error;
  return server.get();
}

class EtcdHarness final : public KvStoreHarness {
 public:
  explicit EtcdHarness(const std::string& endpoint) : store_(EtcdOptions{endpoint}) {}
  KvStore* store() override { return &store_; }
  absl::Time Now() override { return absl::Now(); }
  void Pass(absl::Duration d) override { absl::SleepFor(d); }
  // etcd's minimum lease TTL with its default election timeout (1 s).
  absl::Duration ShortTtl() override { return absl::Seconds(2); }

 private:
  EtcdKvStore store_;
};

absl::StatusOr<std::unique_ptr<KvStoreHarness>> MakeEtcdHarness() {
  absl::StatusOr<EtcdTestServer*> server = SharedEtcd();
  if (!server.ok()) return server.status();
  return std::make_unique<EtcdHarness>((*server)->endpoint());
}

INSTANTIATE_TEST_SUITE_P(Etcd, KvStoreConformanceTest, ::testing::Values(&MakeEtcdHarness));

TEST(EtcdKvStoreTest, UnreachableEndpointIsUnavailable) {
  // Held for the whole test: connections are refused, and no other process
  // can start listening on the port meanwhile.
  KV_ASSERT_OK_AND_ASSIGN(const std::unique_ptr<BoundLoopbackPort> refused,
                          BoundLoopbackPort::Bind());
  const std::string endpoint = absl::StrCat("127.0.0.1:", refused->port());
  EtcdKvStore store(EtcdOptions{endpoint});

  const absl::Time start = absl::Now();
  for (const absl::Status& status :
       {store.Get("k").status(), store.GetPrefix("p/").status(), store.Put("k", "v").status(),
        store.Delete("k"), store.Txn({}, {{KvOp::kPut, "k", "v"}}).status(),
        store.GrantLease(absl::Seconds(5)).status(), store.KeepAlive(1), store.RevokeLease(1),
        store.WaitForChange("p/", 0, absl::Now() + absl::Seconds(10)).status()}) {
    EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
    EXPECT_TRUE(absl::StrContains(status.message(), endpoint)) << status;
    EXPECT_TRUE(absl::StrContains(status.message(), "is etcd running? see --etcd")) << status;
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(5)) << "a refused connection should fail fast";
}

TEST(EtcdKvStoreTest, BadEndpointIsInvalidArgument) {
  for (const char* endpoint : {"", "localhost", "https://127.0.0.1:2379", "127.0.0.1:http"}) {
    EtcdKvStore store(EtcdOptions{endpoint});
    KV_EXPECT_CODE(store.Get("k"), absl::StatusCode::kInvalidArgument);
    KV_EXPECT_CODE(store.WaitForChange("p/", 0, absl::Now()), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(EtcdKvStore(EtcdOptions{"http://127.0.0.1:2379"}).endpoint(), "127.0.0.1:2379");
}

TEST(EtcdKvStoreTest, PrefixEnd) {
  EXPECT_EQ(EtcdPrefixEnd("a/"), "a0");
  EXPECT_EQ(EtcdPrefixEnd("a\xff"), "b");
  EXPECT_EQ(EtcdPrefixEnd("\xff\xff"), std::string(1, '\0'));
  EXPECT_EQ(EtcdPrefixEnd(""), std::string(1, '\0'));
}

TEST(EtcdKvStoreTest, RestartKeepsData) {
  KV_ASSERT_OK_AND_ASSIGN(std::unique_ptr<EtcdTestServer> server, EtcdTestServer::Start());
  EtcdKvStore store(EtcdOptions{server->endpoint()});
  KV_ASSERT_OK_AND_ASSIGN(const int64_t rev, store.Put("cluster/ring", "v7"));

  server->Stop();
  KV_EXPECT_CODE(store.Get("cluster/ring"), absl::StatusCode::kUnavailable);
  KV_ASSERT_OK(server->Restart());
  EXPECT_EQ(server->endpoint(), store.endpoint());
  KV_ASSERT_OK_AND_ASSIGN(const KvRange got, store.Get("cluster/ring"));
  ASSERT_EQ(got.entries.size(), 1u);
  EXPECT_EQ(got.entries[0].value, "v7");
  EXPECT_EQ(got.entries[0].mod_revision, rev);
  KV_ASSERT_OK_AND_ASSIGN(const int64_t next, store.Put("cluster/ring", "v8"));
  EXPECT_GT(next, rev);
}

TEST(EtcdKvStoreTest, WaitForChangeReturnsTrueWhenHistoryIsCompacted) {
  KV_ASSERT_OK_AND_ASSIGN(EtcdTestServer * server, SharedEtcd());
  EtcdKvStore store(EtcdOptions{server->endpoint()});
  KV_ASSERT_OK_AND_ASSIGN(const int64_t rev, store.Put("compaction/noise", "1"));
  KV_ASSERT_OK(store.Put("compaction/noise", "2"));
  KV_ASSERT_OK_AND_ASSIGN(const int64_t last, store.Put("compaction/noise", "3"));
  KV_ASSERT_OK(server->Compact(last));
  // Nothing ever changed under quiet/, but etcd no longer knows that for the
  // revisions after `rev`: the store must say "re-read" rather than wait.
  const absl::Time start = absl::Now();
  KV_ASSERT_OK_AND_ASSIGN(const bool changed, store.WaitForChange("compaction/quiet/", rev,
                                                                  absl::Now() + absl::Seconds(30)));
  EXPECT_TRUE(changed);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

}  // namespace
}  // namespace ps
