// Reading a whole table (or any keys) of a shard's store in a test, without
// the RPC layer. Header-only so that it needs no dependency on the store:
// `Store` is anything with ShardStore's
//   absl::StatusOr<uint64_t> Pull(absl::string_view table, const KeySpec&, std::string* out)
// such as ShardStore itself or PsCore::store(). Test-only; no state.
#ifndef PS_TESTS_TEST_UTIL_STORE_PULL_H_
#define PS_TESTS_TEST_UTIL_STORE_PULL_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/key_spec.h"
#include "common/wire.h"
#include "gtest/gtest.h"

namespace ps {

// The values of `keys` of `table` in `store`, decoded. A refused pull or
// bytes that are not floats fail the test (EXPECT) and give what decoded.
template <typename Store>
std::vector<float> PullAll(Store& store, absl::string_view table, const KeySpec& keys) {
  std::string bytes;
  auto version = store.Pull(table, keys, &bytes);
  EXPECT_TRUE(version.ok()) << version.status();
  std::vector<float> out(bytes.size() / sizeof(float));
  EXPECT_TRUE(DecodeArrayInto<float>(bytes, absl::MakeSpan(out), "pull").ok());
  return out;
}

}  // namespace ps

#endif  // PS_TESTS_TEST_UTIL_STORE_PULL_H_
