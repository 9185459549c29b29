// CopyFromMapping: a page the kernel cannot read (here: past the end of a
// file cut short under its mapping, which the kernel signals with SIGBUS
// as it does a failed disk read) is an error of the copy, not the death of
// the process; a SIGBUS elsewhere still kills. And the log store, which
// reads its rows through mappings, answers such a read with an error.
#include "server/store/mapped_copy.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/store/log_row_store.h"
#include "tests/test_util/temp_dir.h"

namespace ps {
namespace {

namespace fs = std::filesystem;
constexpr size_t kPage = 4096;

// A file of `pages` pages of 'm', mapped read-only; cut to `keep` pages.
struct CutFile {
  CutFile(const std::string& dir, size_t pages, size_t keep) {
    fs::create_directories(dir);
    path = dir + "/mapped";
    fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
    const std::string bytes(pages * kPage, 'm');
    EXPECT_EQ(pwrite(fd, bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size()));
    map = static_cast<const char*>(mmap(nullptr, pages * kPage, PROT_READ, MAP_SHARED, fd, 0));
    EXPECT_NE(map, MAP_FAILED);
    size = pages * kPage;
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(keep * kPage)), 0);
  }
  ~CutFile() {
    munmap(const_cast<char*>(map), size);
    close(fd);
  }
  std::string path;
  int fd;
  const char* map;
  size_t size;
};

TEST(MappedCopyTest, AnUnreadablePageIsAnErrorEachTime) {
  ASSERT_TRUE(CatchMappedReadFaults());
  CutFile file(TestRoot("mapped_copy"), 4, 2);
  std::vector<char> dst(2 * kPage);
  EXPECT_EQ(CopyFromMapping(dst.data(), file.map, 2 * kPage), 0);
  EXPECT_EQ(std::string(dst.data(), 8), "mmmmmmmm");
  // Past the cut: every time (the handler stays armed), and across a page
  // boundary from a readable one.
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(CopyFromMapping(dst.data(), file.map + 2 * kPage, 16), EIO) << "try " << i;
    EXPECT_EQ(CopyFromMapping(dst.data(), file.map + 2 * kPage - 8, 16), EIO) << "try " << i;
  }
  EXPECT_EQ(CopyFromMapping(dst.data(), file.map + kPage, 8), 0);  // and good again
}

TEST(MappedCopyDeathTest, ASigbusOutsideACopyStillKills) {
  ASSERT_TRUE(CatchMappedReadFaults());
  const std::string dir = TestRoot("mapped_copy_death");
  EXPECT_EXIT(
      {
        CutFile file(dir, 2, 1);
        volatile char c = file.map[kPage];  // past the cut, not through a copy
        (void)c;
      },
      ::testing::KilledBySignal(SIGBUS), "");
}

// A segment cut short under the store (a failing disk's unreadable pages
// look the same to the mapping): reads of its rows fail naming the file,
// the process goes on, and rows elsewhere are still read.
TEST(MappedCopyTest, TheLogStoreAnswersAnUnreadableRowWithAnError) {
  const std::string dir = TestRoot("mapped_copy_store");
  RowStoreOptions options;
  options.dir = dir;
  options.row_bytes = 64;
  options.name = "table m/e on server 1";
  LogRowStoreOptions log;
  log.segment_bytes = 64 << 10;  // ~780 rows of 84 bytes a segment
  absl::StatusOr<std::unique_ptr<LogRowStore>> store = LogRowStore::Open(options, log);
  ASSERT_TRUE(store.ok()) << store.status();
  const std::string row(64, 'r');
  RowStore::Batch batch;
  for (uint64_t key = 0; key < 1000; ++key) batch.puts.push_back({0, key, row.data()});
  ASSERT_TRUE((*store)->Write(batch).ok());
  std::vector<fs::path> segments;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".log") segments.push_back(entry.path());
  }
  std::sort(segments.begin(), segments.end());
  ASSERT_EQ(segments.size(), 2u);
  fs::resize_file(segments[0], 8192);  // rows from about the 97th on are gone
  std::vector<char> dst(64);
  bool found = false;
  const absl::Status late = (*store)->Read(0, std::vector<uint64_t>{700}, dst.data(), &found);
  EXPECT_FALSE(late.ok());
  EXPECT_THAT(std::string(late.message()), ::testing::HasSubstr(segments[0].string()));
  EXPECT_THAT(std::string(late.message()), ::testing::HasSubstr("table m/e on server 1"));
  const absl::Status early = (*store)->Read(0, std::vector<uint64_t>{3}, dst.data(), &found);
  EXPECT_TRUE(early.ok()) << early;
  EXPECT_TRUE(found);
  EXPECT_EQ(std::string(dst.data(), 64), row);
  const absl::Status other = (*store)->Read(0, std::vector<uint64_t>{990}, dst.data(), &found);
  EXPECT_TRUE(other.ok()) << other;  // in the second segment
}

}  // namespace
}  // namespace ps
