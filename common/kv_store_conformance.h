// The behaviour every KvStore must show (common/kv_store.h), written once as
// a value-parameterized GoogleTest suite. A test binary links
// :kv_store_conformance (which holds the TEST_Ps) and instantiates the suite
// with a factory of harnesses for its implementation:
//
//   INSTANTIATE_TEST_SUITE_P(Memory, KvStoreConformanceTest,
//                            ::testing::Values(&MakeMemoryHarness));
//
// Each test writes only under its own key prefix and revokes the leases it
// leaves alive, so a harness may share one store (one etcd) across tests.
// Time: tests never sleep to synchronise; they let time pass on the store's
// clock through the harness (a FakeClock advance, or a real sleep for etcd)
// while polling for a condition with a bound.
#ifndef PS_COMMON_KV_STORE_CONFORMANCE_H_
#define PS_COMMON_KV_STORE_CONFORMANCE_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/kv_store.h"
#include "gtest/gtest.h"

namespace ps {

// A store under test and control over its time. Used from the test thread
// and, for Now() and Pass(), from one helper thread at a time.
class KvStoreHarness {
 public:
  virtual ~KvStoreHarness() = default;
  virtual KvStore* store() = 0;
  // The store's clock: lease time and WaitForChange deadlines.
  virtual absl::Time Now() = 0;
  // Lets `d` pass on the store's clock (advances a fake clock, or sleeps).
  virtual void Pass(absl::Duration d) = 0;
  // A short lease ttl the store honours as given (etcd's minimum is ~2 s).
  virtual absl::Duration ShortTtl() = 0;
};

using KvStoreHarnessFactory = absl::StatusOr<std::unique_ptr<KvStoreHarness>> (*)();

class KvStoreConformanceTest : public ::testing::TestWithParam<KvStoreHarnessFactory> {
 protected:
  void SetUp() override;

  KvStore& store() { return *harness_->store(); }
  // `suffix` under this test's own prefix.
  std::string Key(std::string_view suffix) const { return prefix_ + std::string(suffix); }
  // Polls `cond`, letting the store's time pass between polls, until it
  // holds (true) or `limit` of the store's time has passed (false).
  bool Eventually(const std::function<bool()>& cond, absl::Duration limit);
  // WaitForChange on this thread while another lets the store's time pass
  // (a fake clock only moves when told), so that `deadline` can be reached.
  absl::StatusOr<bool> WaitWhileTimePasses(std::string_view prefix, int64_t after_revision,
                                           absl::Time deadline);
  // Whether `key` is present (false on errors, which are reported).
  bool Present(std::string_view key);

  std::unique_ptr<KvStoreHarness> harness_;
  std::string prefix_;
};

inline const absl::Status& StatusOf(const absl::Status& status) { return status; }
template <typename T>
const absl::Status& StatusOf(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}

}  // namespace ps

// Test helpers for absl::Status / absl::StatusOr expressions (each
// evaluates `expr` once).
#define KV_EXPECT_OK(expr)                                \
  do {                                                    \
    const absl::Status kv_status_ = ::ps::StatusOf(expr); \
    EXPECT_TRUE(kv_status_.ok()) << kv_status_;           \
  } while (0)
#define KV_ASSERT_OK(expr)                                \
  do {                                                    \
    const absl::Status kv_status_ = ::ps::StatusOf(expr); \
    ASSERT_TRUE(kv_status_.ok()) << kv_status_;           \
  } while (0)
#define KV_EXPECT_CODE(expr, expected_code)                      \
  do {                                                           \
    const absl::Status kv_status_ = ::ps::StatusOf(expr);        \
    EXPECT_EQ(kv_status_.code(), (expected_code)) << kv_status_; \
  } while (0)
#define KV_CONCAT_INNER_(a, b) a##b
#define KV_CONCAT_(a, b) KV_CONCAT_INNER_(a, b)
#define KV_ASSERT_OK_AND_ASSIGN(lhs, expr) \
  KV_ASSERT_OK_AND_ASSIGN_IMPL_(KV_CONCAT_(kv_status_or_, __LINE__), lhs, expr)
#define KV_ASSERT_OK_AND_ASSIGN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  ASSERT_TRUE(tmp.ok()) << tmp.status();              \
  lhs = std::move(*tmp)

#endif  // PS_COMMON_KV_STORE_CONFORMANCE_H_
