#include "common/kv_store_conformance.h"

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace ps {

constexpr absl::Duration kPollStep = absl::Milliseconds(50);
// Far enough that reaching it means the store missed a change.
constexpr absl::Duration kLongWait = absl::Seconds(30);

void KvStoreConformanceTest::SetUp() {
  absl::StatusOr<std::unique_ptr<KvStoreHarness>> harness = GetParam()();
  ASSERT_TRUE(harness.ok()) << harness.status();
  harness_ = std::move(*harness);
  static std::atomic<int> next_test{0};
  prefix_ = absl::StrCat("/conformance/", next_test++, "/",
                         ::testing::UnitTest::GetInstance()->current_test_info()->name(), "/");
}

bool KvStoreConformanceTest::Eventually(const std::function<bool()>& cond, absl::Duration limit) {
  const absl::Time give_up = harness_->Now() + limit;
  while (!cond()) {
    if (harness_->Now() > give_up) return false;
    harness_->Pass(kPollStep);
  }
  return true;
}

absl::StatusOr<bool> KvStoreConformanceTest::WaitWhileTimePasses(std::string_view prefix,
                                                                 int64_t after_revision,
                                                                 absl::Time deadline) {
  std::atomic<bool> waiting{true};
  std::thread time_passes([&] {
    while (waiting) harness_->Pass(absl::Milliseconds(20));
  });
  absl::StatusOr<bool> changed = store().WaitForChange(prefix, after_revision, deadline);
  waiting = false;
  time_passes.join();
  return changed;
}

bool KvStoreConformanceTest::Present(std::string_view key) {
  absl::StatusOr<KvRange> range = store().Get(key);
  EXPECT_TRUE(range.ok()) << range.status();
  return range.ok() && !range->entries.empty();
}

namespace {

std::vector<std::string> KeysOf(const KvRange& range) {
  std::vector<std::string> keys;
  for (const KvEntry& e : range.entries) keys.push_back(e.key);
  return keys;
}

TEST_P(KvStoreConformanceTest, PutThenGet) {
  KV_ASSERT_OK_AND_ASSIGN(const int64_t rev, store().Put(Key("k"), "value"));
  EXPECT_GT(rev, 0);
  KV_ASSERT_OK_AND_ASSIGN(const KvRange got, store().Get(Key("k")));
  ASSERT_EQ(got.entries.size(), 1u);
  EXPECT_EQ(got.entries[0].key, Key("k"));
  EXPECT_EQ(got.entries[0].value, "value");
  EXPECT_EQ(got.entries[0].mod_revision, rev);
  EXPECT_EQ(got.entries[0].lease, 0);
  EXPECT_GE(got.revision, rev);

  KV_ASSERT_OK_AND_ASSIGN(const KvRange absent, store().Get(Key("nothing")));
  EXPECT_TRUE(absent.entries.empty());
  EXPECT_GE(absent.revision, rev);
}

TEST_P(KvStoreConformanceTest, GetPrefixIsolatesPrefixes) {
  for (const char* k : {"a/2", "ab", "a/1", "a", "a0", "b/1"}) {
    KV_ASSERT_OK(store().Put(Key(k), k));
  }
  KV_ASSERT_OK_AND_ASSIGN(const KvRange under_a, store().GetPrefix(Key("a/")));
  EXPECT_EQ(KeysOf(under_a), (std::vector<std::string>{Key("a/1"), Key("a/2")}));
  EXPECT_EQ(under_a.entries[0].value, "a/1");
  KV_ASSERT_OK_AND_ASSIGN(const KvRange all_a, store().GetPrefix(Key("a")));
  EXPECT_EQ(KeysOf(all_a),
            (std::vector<std::string>{Key("a"), Key("a/1"), Key("a/2"), Key("a0"), Key("ab")}));
  KV_ASSERT_OK_AND_ASSIGN(const KvRange none, store().GetPrefix(Key("c/")));
  EXPECT_TRUE(none.entries.empty());
}

TEST_P(KvStoreConformanceTest, RevisionsIncreaseAndTrackModRevision) {
  KV_ASSERT_OK_AND_ASSIGN(const int64_t r1, store().Put(Key("x"), "1"));
  KV_ASSERT_OK_AND_ASSIGN(const int64_t r2, store().Put(Key("y"), "2"));
  KV_ASSERT_OK_AND_ASSIGN(const int64_t r3, store().Put(Key("x"), "3"));
  EXPECT_LT(r1, r2);
  EXPECT_LT(r2, r3);
  KV_ASSERT_OK_AND_ASSIGN(const KvRange both, store().GetPrefix(Key("")));
  ASSERT_EQ(both.entries.size(), 2u);
  EXPECT_EQ(both.entries[0].mod_revision, r3);  // x, rewritten
  EXPECT_EQ(both.entries[0].value, "3");
  EXPECT_EQ(both.entries[1].mod_revision, r2);  // y
  EXPECT_GE(both.revision, r3);
}

TEST_P(KvStoreConformanceTest, DeleteRemovesKey) {
  KV_ASSERT_OK_AND_ASSIGN(const int64_t rev, store().Put(Key("k"), "v"));
  KV_ASSERT_OK(store().Put(Key("other"), "v"));
  KV_ASSERT_OK(store().Delete(Key("k")));
  EXPECT_FALSE(Present(Key("k")));
  EXPECT_TRUE(Present(Key("other")));
  KV_ASSERT_OK_AND_ASSIGN(const KvRange after, store().GetPrefix(Key("")));
  EXPECT_GT(after.revision, rev + 1);      // the other put, then the delete
  KV_EXPECT_OK(store().Delete(Key("k")));  // absent: fine
}

TEST_P(KvStoreConformanceTest, BadArgumentsAreInvalid) {
  KV_EXPECT_CODE(store().Put("", "v"), absl::StatusCode::kInvalidArgument);
  KV_EXPECT_CODE(store().Get(""), absl::StatusCode::kInvalidArgument);
  KV_EXPECT_CODE(store().Delete(""), absl::StatusCode::kInvalidArgument);
  KV_EXPECT_CODE(store().Txn({{"", 0}}, {}), absl::StatusCode::kInvalidArgument);
  KV_EXPECT_CODE(store().Txn({}, {KvOp{KvOp::kPut, "", "v"}}), absl::StatusCode::kInvalidArgument);
  KV_EXPECT_CODE(store().GrantLease(absl::ZeroDuration()), absl::StatusCode::kInvalidArgument);
  KV_EXPECT_CODE(store().GrantLease(absl::Seconds(-1)), absl::StatusCode::kInvalidArgument);
}

TEST_P(KvStoreConformanceTest, TxnOnAbsentKeySucceedsOnce) {
  const std::vector<KvCompare> absent = {{Key("leader"), 0}};
  const std::vector<KvOp> claim_a = {{KvOp::kPut, Key("leader"), "a"}};
  const std::vector<KvOp> claim_b = {{KvOp::kPut, Key("leader"), "b"}};
  KV_ASSERT_OK_AND_ASSIGN(const bool first, store().Txn(absent, claim_a));
  EXPECT_TRUE(first);
  KV_ASSERT_OK_AND_ASSIGN(const bool second, store().Txn(absent, claim_b));
  EXPECT_FALSE(second);
  KV_ASSERT_OK_AND_ASSIGN(const KvRange got, store().Get(Key("leader")));
  ASSERT_EQ(got.entries.size(), 1u);
  EXPECT_EQ(got.entries[0].value, "a");
}

TEST_P(KvStoreConformanceTest, TxnComparesModRevision) {
  KV_ASSERT_OK_AND_ASSIGN(const int64_t rev, store().Put(Key("ring"), "v1"));
  KV_ASSERT_OK(store().Put(Key("old"), "x"));
  KV_ASSERT_OK_AND_ASSIGN(const bool applied,
                          store().Txn({{Key("ring"), rev}}, {{KvOp::kPut, Key("ring"), "v2"},
                                                             {KvOp::kDelete, Key("old"), ""}}));
  EXPECT_TRUE(applied);
  KV_ASSERT_OK_AND_ASSIGN(const KvRange got, store().GetPrefix(Key("")));
  ASSERT_EQ(got.entries.size(), 1u);
  EXPECT_EQ(got.entries[0].value, "v2");
  EXPECT_GT(got.entries[0].mod_revision, rev);
  // The same compare no longer holds: ring was rewritten.
  KV_ASSERT_OK_AND_ASSIGN(const bool stale,
                          store().Txn({{Key("ring"), rev}}, {{KvOp::kPut, Key("ring"), "v3"}}));
  EXPECT_FALSE(stale);
  KV_ASSERT_OK_AND_ASSIGN(const KvRange again, store().Get(Key("ring")));
  ASSERT_EQ(again.entries.size(), 1u);
  EXPECT_EQ(again.entries[0].value, "v2");
}

TEST_P(KvStoreConformanceTest, FailedTxnChangesNothing) {
  KV_ASSERT_OK_AND_ASSIGN(const int64_t rev_a, store().Put(Key("a"), "a1"));
  KV_ASSERT_OK_AND_ASSIGN(const int64_t rev_b, store().Put(Key("b"), "b1"));
  // The first compare holds, the second does not (b exists).
  KV_ASSERT_OK_AND_ASSIGN(const bool applied, store().Txn({{Key("a"), rev_a}, {Key("b"), 0}},
                                                          {{KvOp::kPut, Key("a"), "a2"},
                                                           {KvOp::kDelete, Key("b"), ""},
                                                           {KvOp::kPut, Key("c"), "c1"}}));
  EXPECT_FALSE(applied);
  KV_ASSERT_OK_AND_ASSIGN(const KvRange got, store().GetPrefix(Key("")));
  ASSERT_EQ(KeysOf(got), (std::vector<std::string>{Key("a"), Key("b")}));
  EXPECT_EQ(got.entries[0].value, "a1");
  EXPECT_EQ(got.entries[0].mod_revision, rev_a);
  EXPECT_EQ(got.entries[1].mod_revision, rev_b);
}

TEST_P(KvStoreConformanceTest, TxnRejectsKeyWrittenTwice) {
  KV_EXPECT_CODE(store().Txn({}, {{KvOp::kPut, Key("k"), "1"}, {KvOp::kPut, Key("k"), "2"}}),
                 absl::StatusCode::kInvalidArgument);
  KV_EXPECT_CODE(store().Txn({}, {{KvOp::kPut, Key("k"), "1"}, {KvOp::kDelete, Key("k"), ""}}),
                 absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(Present(Key("k")));
}

TEST_P(KvStoreConformanceTest, ConcurrentWritersAllLand) {
  constexpr int kThreads = 4;
  constexpr int kPutsEach = 25;
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([this, t] {
      for (int i = 0; i < kPutsEach; ++i) {
        KV_EXPECT_OK(store().Put(Key(absl::StrCat("c/", t, "/", i)), "v"));
      }
    });
  }
  for (std::thread& w : writers) w.join();
  KV_ASSERT_OK_AND_ASSIGN(const KvRange all, store().GetPrefix(Key("c/")));
  ASSERT_EQ(all.entries.size(), static_cast<size_t>(kThreads * kPutsEach));
  std::set<int64_t> revisions;
  for (const KvEntry& e : all.entries) revisions.insert(e.mod_revision);
  EXPECT_EQ(revisions.size(), all.entries.size()) << "two puts shared a revision";
}

TEST_P(KvStoreConformanceTest, LeasedKeysVanishAfterExpiry) {
  const absl::Duration ttl = harness_->ShortTtl();
  KV_ASSERT_OK_AND_ASSIGN(const int64_t lease, store().GrantLease(ttl));
  EXPECT_NE(lease, 0);
  KV_ASSERT_OK(store().Put(Key("member/1"), "m1", lease));
  KV_ASSERT_OK_AND_ASSIGN(const bool in_txn,
                          store().Txn({}, {{KvOp::kPut, Key("member/2"), "m2", lease}}));
  EXPECT_TRUE(in_txn);
  KV_ASSERT_OK_AND_ASSIGN(const int64_t rev, store().Put(Key("config"), "stays"));
  KV_ASSERT_OK_AND_ASSIGN(const KvRange before, store().GetPrefix(Key("member/")));
  ASSERT_EQ(before.entries.size(), 2u);
  EXPECT_EQ(before.entries[0].lease, lease);
  EXPECT_EQ(before.entries[1].lease, lease);

  EXPECT_TRUE(Eventually(
      [&] {
        absl::StatusOr<KvRange> members = store().GetPrefix(Key("member/"));
        return members.ok() && members->entries.empty();
      },
      ttl + absl::Seconds(10)))
      << "leased keys still present well after the lease's ttl";
  EXPECT_TRUE(Present(Key("config")));
  KV_ASSERT_OK_AND_ASSIGN(const KvRange after, store().Get(Key("config")));
  EXPECT_GT(after.revision, rev);  // expiry deleted keys: a new revision
}

TEST_P(KvStoreConformanceTest, KeepAliveKeepsLease) {
  const absl::Duration ttl = harness_->ShortTtl();
  KV_ASSERT_OK_AND_ASSIGN(const int64_t lease, store().GrantLease(ttl));
  KV_ASSERT_OK(store().Put(Key("member"), "m", lease));
  // Kept alive every quarter ttl for twice the ttl: the key must stay.
  const absl::Time until = harness_->Now() + 2 * ttl;
  while (harness_->Now() < until) {
    KV_ASSERT_OK(store().KeepAlive(lease));
    harness_->Pass(ttl / 4);
    ASSERT_TRUE(Present(Key("member"))) << "lost although kept alive";
  }
  KV_EXPECT_OK(store().RevokeLease(lease));
}

TEST_P(KvStoreConformanceTest, KeepAliveOfExpiredLeaseIsNotFound) {
  const absl::Duration ttl = harness_->ShortTtl();
  KV_ASSERT_OK_AND_ASSIGN(const int64_t lease, store().GrantLease(ttl));
  KV_ASSERT_OK(store().Put(Key("member"), "m", lease));
  // The key's deletion shows that the lease expired (KeepAlive would renew).
  ASSERT_TRUE(Eventually([&] { return !Present(Key("member")); }, ttl + absl::Seconds(10)));
  KV_EXPECT_CODE(store().KeepAlive(lease), absl::StatusCode::kNotFound);
  KV_EXPECT_CODE(store().Put(Key("member"), "m", lease), absl::StatusCode::kNotFound);
  EXPECT_FALSE(Present(Key("member")));
}

TEST_P(KvStoreConformanceTest, RevokeDeletesLeasedKeys) {
  KV_ASSERT_OK_AND_ASSIGN(const int64_t lease, store().GrantLease(absl::Seconds(60)));
  KV_ASSERT_OK(store().Put(Key("m/1"), "1", lease));
  KV_ASSERT_OK(store().Put(Key("m/2"), "2", lease));
  KV_ASSERT_OK(store().Put(Key("m/3"), "3"));
  KV_ASSERT_OK(store().RevokeLease(lease));
  KV_ASSERT_OK_AND_ASSIGN(const KvRange left, store().GetPrefix(Key("m/")));
  EXPECT_EQ(KeysOf(left), std::vector<std::string>{Key("m/3")});
  KV_EXPECT_CODE(store().KeepAlive(lease), absl::StatusCode::kNotFound);
  KV_EXPECT_CODE(store().RevokeLease(lease), absl::StatusCode::kNotFound);
}

TEST_P(KvStoreConformanceTest, WaitForChangeSeesWriteFromAnotherThread) {
  KV_ASSERT_OK_AND_ASSIGN(const int64_t rev, store().Put(Key("w/a"), "1"));
  std::thread writer([this] {
    // Only makes it likely that the waiter is blocked by now; the test
    // holds either way.
    absl::SleepFor(absl::Milliseconds(100));
    KV_EXPECT_OK(store().Put(Key("w/b"), "2"));
  });
  absl::StatusOr<bool> changed = store().WaitForChange(Key("w/"), rev, harness_->Now() + kLongWait);
  writer.join();
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
}

TEST_P(KvStoreConformanceTest, WaitForChangeReturnsFalseAtDeadline) {
  KV_ASSERT_OK_AND_ASSIGN(const int64_t rev, store().Put(Key("w/a"), "1"));
  // Changes next to, but not under, the prefix do not count.
  KV_ASSERT_OK(store().Put(Key("w"), "x"));
  KV_ASSERT_OK(store().Put(Key("wx"), "x"));
  KV_ASSERT_OK(store().Put(Key("w0"), "x"));
  const absl::Time deadline = harness_->Now() + absl::Milliseconds(500);
  absl::StatusOr<bool> changed = WaitWhileTimePasses(Key("w/"), rev, deadline);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_FALSE(*changed);
  EXPECT_GE(harness_->Now(), deadline);
}

TEST_P(KvStoreConformanceTest, WaitForChangeReturnsAtOnceForPastChange) {
  KV_ASSERT_OK_AND_ASSIGN(const int64_t rev, store().Put(Key("w/a"), "1"));
  KV_ASSERT_OK(store().Delete(Key("w/a")));  // a deletion is a change too
  const absl::Time start = absl::Now();
  absl::StatusOr<bool> changed = store().WaitForChange(Key("w/"), rev, harness_->Now() + kLongWait);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5)) << "waited instead of returning at once";
  // Nothing under the prefix after the deletion's revision.
  KV_ASSERT_OK_AND_ASSIGN(const KvRange now, store().Get(Key("w/a")));
  absl::StatusOr<bool> later =
      WaitWhileTimePasses(Key("w/"), now.revision, harness_->Now() + absl::Milliseconds(300));
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_FALSE(*later);
}

}  // namespace
}  // namespace ps
