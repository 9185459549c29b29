#include "common/memory_kv_store.h"

#include <memory>
#include <string>
#include <thread>

#include "common/clock.h"
#include "common/kv_store_conformance.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

// MemoryKvStore on a FakeClock: tests move time by hand.
class MemoryHarness final : public KvStoreHarness {
 public:
  KvStore* store() override { return &store_; }
  absl::Time Now() override { return clock_.Now(); }
  void Pass(absl::Duration d) override { clock_.Advance(d); }
  absl::Duration ShortTtl() override { return absl::Seconds(1); }

 private:
  FakeClock clock_;
  MemoryKvStore store_{&clock_};
};

absl::StatusOr<std::unique_ptr<KvStoreHarness>> MakeMemoryHarness() {
  return std::make_unique<MemoryHarness>();
}

INSTANTIATE_TEST_SUITE_P(Memory, KvStoreConformanceTest, ::testing::Values(&MakeMemoryHarness));

class MemoryKvStoreTest : public ::testing::Test {
 protected:
  FakeClock clock_;
  MemoryKvStore store_{&clock_};
};

TEST_F(MemoryKvStoreTest, SetUnavailableFailsEveryCall) {
  KV_ASSERT_OK(store_.Put("k", "v"));
  KV_ASSERT_OK_AND_ASSIGN(const int64_t lease, store_.GrantLease(absl::Seconds(10)));
  store_.SetUnavailable(true);
  const auto unavailable = absl::StatusCode::kUnavailable;
  KV_EXPECT_CODE(store_.GrantLease(absl::Seconds(1)), unavailable);
  KV_EXPECT_CODE(store_.KeepAlive(lease), unavailable);
  KV_EXPECT_CODE(store_.RevokeLease(lease), unavailable);
  KV_EXPECT_CODE(store_.Get("k"), unavailable);
  KV_EXPECT_CODE(store_.GetPrefix(""), unavailable);
  KV_EXPECT_CODE(store_.Put("k", "w"), unavailable);
  KV_EXPECT_CODE(store_.Delete("k"), unavailable);
  KV_EXPECT_CODE(store_.Txn({}, {{KvOp::kPut, "k", "w"}}), unavailable);
  KV_EXPECT_CODE(store_.WaitForChange("", 0, clock_.Now()), unavailable);
  const absl::Status status = store_.Get("k").status();
  EXPECT_NE(status.message().find("is etcd running? see --etcd"), std::string::npos) << status;

  store_.SetUnavailable(false);
  KV_ASSERT_OK_AND_ASSIGN(const KvRange got, store_.Get("k"));
  ASSERT_EQ(got.entries.size(), 1u);
  EXPECT_EQ(got.entries[0].value, "v");  // nothing changed while down
  KV_EXPECT_OK(store_.KeepAlive(lease));
}

TEST_F(MemoryKvStoreTest, SetUnavailableWakesWaiter) {
  KV_ASSERT_OK_AND_ASSIGN(const KvRange start, store_.GetPrefix(""));
  std::thread outage([this] { store_.SetUnavailable(true); });
  // The deadline is never reached on the fake clock: only the outage ends the wait.
  KV_EXPECT_CODE(store_.WaitForChange("", start.revision, absl::InfiniteFuture()),
                 absl::StatusCode::kUnavailable);
  outage.join();
}

TEST_F(MemoryKvStoreTest, LeaseExpiresWhenClockPassesTtl) {
  KV_ASSERT_OK_AND_ASSIGN(const int64_t lease, store_.GrantLease(absl::Seconds(10)));
  KV_ASSERT_OK_AND_ASSIGN(const int64_t rev, store_.Put("member", "m", lease));
  clock_.Advance(absl::Seconds(10));  // at the expiry time: still alive
  KV_ASSERT_OK_AND_ASSIGN(const KvRange alive, store_.Get("member"));
  EXPECT_EQ(alive.entries.size(), 1u);
  EXPECT_EQ(alive.revision, rev);
  clock_.Advance(absl::Milliseconds(1));
  KV_ASSERT_OK_AND_ASSIGN(const KvRange gone, store_.Get("member"));
  EXPECT_TRUE(gone.entries.empty());
  EXPECT_EQ(gone.revision, rev + 1);  // the expiry's deletion
  KV_EXPECT_CODE(store_.KeepAlive(lease), absl::StatusCode::kNotFound);
}

TEST_F(MemoryKvStoreTest, KeepAliveRestartsTtlFromNow) {
  KV_ASSERT_OK_AND_ASSIGN(const int64_t lease, store_.GrantLease(absl::Seconds(10)));
  KV_ASSERT_OK(store_.Put("member", "m", lease));
  clock_.Advance(absl::Seconds(8));
  KV_ASSERT_OK(store_.KeepAlive(lease));
  clock_.Advance(absl::Seconds(9));  // 17 s after the grant, 9 s after the keepalive
  KV_ASSERT_OK_AND_ASSIGN(const KvRange alive, store_.Get("member"));
  EXPECT_EQ(alive.entries.size(), 1u);
  clock_.Advance(absl::Seconds(2));
  KV_ASSERT_OK_AND_ASSIGN(const KvRange gone, store_.Get("member"));
  EXPECT_TRUE(gone.entries.empty());
}

TEST_F(MemoryKvStoreTest, ExpiryWakesWaiter) {
  KV_ASSERT_OK_AND_ASSIGN(const int64_t lease, store_.GrantLease(absl::Seconds(5)));
  KV_ASSERT_OK_AND_ASSIGN(const int64_t rev, store_.Put("members/1", "m", lease));
  std::thread time_passes([this] { clock_.Advance(absl::Seconds(6)); });
  KV_ASSERT_OK_AND_ASSIGN(const bool changed,
                          store_.WaitForChange("members/", rev, absl::InfiniteFuture()));
  time_passes.join();
  EXPECT_TRUE(changed);
}

TEST_F(MemoryKvStoreTest, WritesThatChangeNothingKeepTheRevision) {
  KV_ASSERT_OK_AND_ASSIGN(const int64_t rev, store_.Put("k", "v"));
  KV_ASSERT_OK(store_.Delete("absent"));
  KV_ASSERT_OK_AND_ASSIGN(const bool applied,
                          store_.Txn({{"k", rev}}, {{KvOp::kDelete, "absent", ""}}));
  EXPECT_TRUE(applied);
  KV_ASSERT_OK_AND_ASSIGN(const int64_t empty_lease, store_.GrantLease(absl::Seconds(1)));
  KV_ASSERT_OK(store_.RevokeLease(empty_lease));
  KV_ASSERT_OK_AND_ASSIGN(const KvRange got, store_.GetPrefix(""));
  EXPECT_EQ(got.revision, rev);
}

TEST_F(MemoryKvStoreTest, PastDeadlineStillReportsKnownChange) {
  KV_ASSERT_OK_AND_ASSIGN(const int64_t rev, store_.Put("a/1", "v"));
  KV_ASSERT_OK(store_.Put("a/2", "v"));
  KV_ASSERT_OK_AND_ASSIGN(const bool changed, store_.WaitForChange("a/", rev, clock_.Now()));
  EXPECT_TRUE(changed);
  KV_ASSERT_OK_AND_ASSIGN(const bool none, store_.WaitForChange("b/", rev, clock_.Now()));
  EXPECT_FALSE(none);
}

TEST_F(MemoryKvStoreTest, ForgottenHistoryCountsAsChange) {
  KV_ASSERT_OK_AND_ASSIGN(const int64_t rev, store_.Put("other", "v"));
  for (size_t i = 0; i <= MemoryKvStore::kHistoryLimit; ++i) {
    KV_ASSERT_OK(store_.Put("noise", "v"));
  }
  // Whether "a/" changed after `rev` is no longer known: the caller must re-read.
  KV_ASSERT_OK_AND_ASSIGN(const bool changed, store_.WaitForChange("a/", rev, clock_.Now()));
  EXPECT_TRUE(changed);
}

}  // namespace
}  // namespace ps
