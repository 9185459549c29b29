// A row store on a disk that fills up (server/store/row_store_disk_full_test.sh
// runs it on a small tmpfs): batches are written until the disk refuses
// one; then the refusal must name the store and its directory, every row of
// every acknowledged batch must read back exact and none of the refused
// batch's, and once the test frees space (deleting --filler) writes must
// work again. Prints PASS or the first failure, and exits 0 or 1.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/store/log_row_store.h"
#include "server/store/rocksdb_row_store.h"

ABSL_FLAG(std::string, store, "rocksdb", "rocksdb or log");
ABSL_FLAG(std::string, dir, "", "the store's directory, on the small disk");
ABSL_FLAG(std::string, filler, "", "a file on the same disk, deleted to free space");

namespace ps {
namespace {

constexpr size_t kRowBytes = 132;
constexpr uint64_t kBatchRows = 500;

std::string RowOf(uint64_t key) {
  std::string row(kRowBytes, '\0');
  for (size_t i = 0; i < kRowBytes; ++i) row[i] = static_cast<char>((key * 37 + i * 11) & 0xff);
  return row;
}

int Fail(const std::string& what) {
  std::printf("FAIL: %s\n", what.c_str());
  return 1;
}

absl::StatusOr<std::unique_ptr<RowStore>> Open(const RowStoreOptions& options) {
  if (absl::GetFlag(FLAGS_store) == "log") {
    auto s = LogRowStore::Open(options);
    if (!s.ok()) return s.status();
    return std::unique_ptr<RowStore>(*std::move(s));
  }
  auto s = RocksDbRowStore::Open(options);
  if (!s.ok()) return s.status();
  return std::unique_ptr<RowStore>(*std::move(s));
}

// Writes batch b (keys [b * kBatchRows, (b + 1) * kBatchRows) of slice b % 4).
absl::Status WriteBatch(RowStore& store, uint64_t b) {
  std::vector<std::string> rows;
  rows.reserve(kBatchRows);
  RowStore::Batch batch;
  for (uint64_t key = b * kBatchRows; key < (b + 1) * kBatchRows; ++key) {
    rows.push_back(RowOf(key));
    batch.puts.push_back({static_cast<uint32_t>(b % 4), key, rows.back().data()});
  }
  batch.meta = absl::StrCat("batch ", b);
  return store.Write(batch);
}

// Whether batches [0, acked) read back exact and batch `refused` has no row.
std::string CheckRows(const RowStore& store, uint64_t acked, uint64_t refused) {
  std::vector<char> dst(kBatchRows * kRowBytes);
  std::unique_ptr<bool[]> found(new bool[kBatchRows]);
  for (uint64_t b = 0; b <= acked; ++b) {
    const uint64_t batch = b < acked ? b : refused;
    std::vector<uint64_t> keys;
    for (uint64_t key = batch * kBatchRows; key < (batch + 1) * kBatchRows; ++key) {
      keys.push_back(key);
    }
    absl::Status s = store.Read(static_cast<uint32_t>(batch % 4), keys, dst.data(), found.get());
    if (!s.ok()) return absl::StrCat("reading batch ", batch, ": ", s.ToString());
    for (size_t i = 0; i < keys.size(); ++i) {
      if (b == acked) {
        if (found[i]) return absl::StrCat("key ", keys[i], " of the refused batch has a row");
        continue;
      }
      if (!found[i]) return absl::StrCat("acknowledged key ", keys[i], " lost");
      if (std::string(dst.data() + i * kRowBytes, kRowBytes) != RowOf(keys[i])) {
        return absl::StrCat("acknowledged key ", keys[i], " reads back wrong");
      }
    }
  }
  return "";
}

int Run() {
  RowStoreOptions options;
  options.dir = absl::GetFlag(FLAGS_dir);
  options.row_bytes = kRowBytes;
  options.name = "table full/emb";
  auto opened = Open(options);
  if (!opened.ok()) return Fail(opened.status().ToString());
  RowStore& store = **opened;
  uint64_t acked = 0;
  absl::Status refused;
  for (; acked < 100000; ++acked) {
    refused = WriteBatch(store, acked);
    if (!refused.ok()) break;
  }
  if (refused.ok()) return Fail("the disk never filled up");
  std::printf("%s: batch %llu refused after %llu acknowledged: %s\n",
              absl::GetFlag(FLAGS_store).c_str(), static_cast<unsigned long long>(acked),
              static_cast<unsigned long long>(acked), refused.ToString().c_str());
  if (!absl::StrContains(refused.message(), "table full/emb") ||
      !absl::StrContains(refused.message(), options.dir)) {
    return Fail("the error does not name the store and its directory");
  }
  if (std::string bad = CheckRows(store, acked, acked); !bad.empty()) return Fail(bad);
  if (store.meta() != absl::StrCat("batch ", acked - 1)) {
    return Fail(absl::StrCat("meta is '", store.meta(), "', not that of the last acknowledged"));
  }
  // Room again: the next batch goes through (the refused one, written anew).
  std::filesystem::remove(absl::GetFlag(FLAGS_filler));
  absl::Status again;
  for (int attempt = 0; attempt < 3; ++attempt) {
    again = WriteBatch(store, acked);
    if (again.ok()) break;
  }
  if (!again.ok()) return Fail(absl::StrCat("writes did not resume with room: ", again.ToString()));
  if (std::string bad = CheckRows(store, acked + 1, acked + 1); !bad.empty()) return Fail(bad);
  // And everything survives a reopen.
  opened->reset();
  auto reopened = Open(options);
  if (!reopened.ok()) return Fail(reopened.status().ToString());
  if (std::string bad = CheckRows(**reopened, acked + 1, acked + 1); !bad.empty()) {
    return Fail(absl::StrCat("after reopening: ", bad));
  }
  std::printf(
      "PASS: %s: %llu batches acknowledged before the disk was full, all exact; "
      "writing resumed once there was room\n",
      absl::GetFlag(FLAGS_store).c_str(), static_cast<unsigned long long>(acked));
  return 0;
}

}  // namespace
}  // namespace ps

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return ps::Run();
}
