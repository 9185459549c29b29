// The behaviour every RowStore must show (server/store/row_store.h), written
// once as a value-parameterized GoogleTest suite. A test binary links
// :row_store_conformance and instantiates it with its store's opener:
//
//   INSTANTIATE_TEST_SUITE_P(RocksDb, RowStoreConformanceTest,
//                            ::testing::Values(&OpenRocksDb));
//
// Each test uses a directory of its own under TEST_TMPDIR.
#ifndef PS_SERVER_STORE_ROW_STORE_CONFORMANCE_H_
#define PS_SERVER_STORE_ROW_STORE_CONFORMANCE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "server/store/row_store.h"

namespace ps {

using RowStoreOpener = absl::StatusOr<std::unique_ptr<RowStore>> (*)(const RowStoreOptions&);

class RowStoreConformanceTest : public ::testing::TestWithParam<RowStoreOpener> {
 public:
  static constexpr size_t kRowBytes = 40;

 protected:
  void SetUp() override;
  // Opens (again) the store in dir_ with `budget` bytes of disk (0: none).
  std::unique_ptr<RowStore> Open(uint64_t budget = 0);
  // Opens a store in `dir`.
  std::unique_ptr<RowStore> OpenAt(const std::string& dir);

  std::string dir_;
};

}  // namespace ps

#endif  // PS_SERVER_STORE_ROW_STORE_CONFORMANCE_H_
