#include "server/checkpoint/checkpoint_files.h"

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util/temp_dir.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

// Deterministic content for checkpoint `sequence`: file i has its own bytes.
std::string Content(uint64_t sequence, int file, size_t bytes) {
  std::string out(bytes, '\0');
  std::mt19937_64 rng(sequence * 1000 + file);
  for (char& c : out) c = static_cast<char>(rng());
  return out;
}

// Writes checkpoint `sequence` of two files (3.5 and 0 blocks of 1 KiB).
absl::Status WriteCheckpoint(const std::string& root, uint64_t sequence,
                             uint64_t base_sequence = 0) {
  const std::string dir = absl::StrCat(root, "/", CheckpointDirName(sequence));
  proto::CheckpointManifest manifest;
  manifest.set_sequence(sequence);
  manifest.set_base_sequence(base_sequence);
  manifest.set_cut(sequence * 10);
  const size_t sizes[] = {3584, 0};
  for (int f = 0; f < 2; ++f) {
    auto writer = CheckpointFileWriter::Create(dir, absl::StrCat("data", f), 1024);
    if (!writer.ok()) return writer.status();
    const std::string bytes = Content(sequence, f, sizes[f]);
    // In uneven pieces, across block boundaries.
    for (size_t at = 0; at < bytes.size(); at += 700) {
      if (absl::Status s = (*writer)->Append(absl::string_view(bytes).substr(at, 700)); !s.ok()) {
        return s;
      }
    }
    absl::StatusOr<proto::CheckpointFile> entry = (*writer)->Finish();
    if (!entry.ok()) return entry.status();
    *manifest.add_files() = *entry;
  }
  return CommitCheckpoint(dir, manifest);
}

void FlipByte(const std::string& path, size_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(offset);
  char c;
  f.get(c);
  f.seekp(offset);
  f.put(static_cast<char>(c ^ 0x04));
}

void Truncate(const std::string& path, size_t bytes) {
  ASSERT_EQ(::truncate(path.c_str(), bytes), 0);
}

TEST(CheckpointFilesTest, WritesVerifiesAndReadsBack) {
  const std::string root = TestRoot("roundtrip");
  ASSERT_TRUE(WriteCheckpoint(root, 1).ok());
  const std::string dir = absl::StrCat(root, "/", CheckpointDirName(1));
  ASSERT_TRUE(VerifyCheckpoint(dir).ok());
  absl::StatusOr<proto::CheckpointManifest> manifest = ReadManifest(dir);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  ASSERT_EQ(manifest->files_size(), 2);
  EXPECT_EQ(manifest->files(0).bytes(), 3584u);
  EXPECT_EQ(manifest->files(0).block_crc32_size(), 4);  // 3.5 blocks
  EXPECT_EQ(manifest->files(1).block_crc32_size(), 0);
  absl::StatusOr<std::string> data = ReadCheckpointFile(dir, manifest->files(0));
  ASSERT_TRUE(data.ok());
  EXPECT_EQ(*data, Content(1, 0, 3584));
  // No temporary file is left behind.
  EXPECT_NE(::access(absl::StrCat(dir, "/data0.tmp").c_str(), F_OK), 0);
  EXPECT_NE(::access(absl::StrCat(dir, "/MANIFEST.tmp").c_str(), F_OK), 0);
  // Bad names are refused.
  EXPECT_EQ(CheckpointFileWriter::Create(dir, "a/b").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckpointFileWriter::Create(dir, "x.tmp").status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Every kind of damage is found and named, and the previous checkpoint is
// the newest valid one.
TEST(CheckpointFilesTest, CorruptionIsNamedAndThePreviousCheckpointIsUsed) {
  struct Damage {
    const char* what;
    std::function<void(const std::string& dir)> apply;
    const char* message;
  };
  const std::vector<Damage> damages = {
      {"flipped bit in a data block", [](const std::string& d) { FlipByte(d + "/data0", 2100); },
       "data0: block 2 (bytes 2048..3072) has CRC32"},
      {"truncated data file", [](const std::string& d) { Truncate(d + "/data0", 3000); },
       "data0: 3000 bytes, expected 3584"},
      {"missing data file", [](const std::string& d) { std::remove((d + "/data1").c_str()); },
       "data1: missing"},
      {"flipped bit in the manifest", [](const std::string& d) { FlipByte(d + "/MANIFEST", 20); },
       "MANIFEST: CRC32"},
      {"truncated manifest", [](const std::string& d) { Truncate(d + "/MANIFEST", 30); },
       "MANIFEST: 14 bytes after the header, expected"},
      {"manifest header cut", [](const std::string& d) { Truncate(d + "/MANIFEST", 6); },
       "not a checkpoint manifest"},
  };
  for (const Damage& damage : damages) {
    SCOPED_TRACE(damage.what);
    const std::string root = TestRoot("corrupt");
    ASSERT_TRUE(WriteCheckpoint(root, 1).ok());
    ASSERT_TRUE(WriteCheckpoint(root, 2).ok());
    const std::string dir = absl::StrCat(root, "/", CheckpointDirName(2));
    damage.apply(dir);
    absl::Status verified = VerifyCheckpoint(dir);
    EXPECT_EQ(verified.code(), absl::StatusCode::kDataLoss) << verified;
    EXPECT_THAT(std::string(verified.message()), HasSubstr(damage.message));
    std::vector<std::string> skipped;
    absl::StatusOr<FoundCheckpoint> found = FindNewestValidCheckpoint(root, &skipped);
    ASSERT_TRUE(found.ok()) << found.status();
    EXPECT_EQ(found->manifest.sequence(), 1u);
    ASSERT_EQ(skipped.size(), 1u);
    EXPECT_THAT(skipped[0], HasSubstr("ckpt-0000000002: "));
    EXPECT_THAT(skipped[0], HasSubstr(damage.message));
  }
}

TEST(CheckpointFilesTest, IncompleteCheckpointsAreSkippedAndNoneIsNotFound) {
  const std::string root = TestRoot("incomplete");
  EXPECT_EQ(FindNewestValidCheckpoint(root, nullptr).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(WriteCheckpoint(root, 3).ok());
  // A later checkpoint whose writer died before its manifest.
  auto writer = CheckpointFileWriter::Create(absl::StrCat(root, "/", CheckpointDirName(4)), "d");
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE((*writer)->Append("partial").ok());
  ASSERT_TRUE((*writer)->Finish().ok());
  std::vector<std::string> skipped;
  absl::StatusOr<FoundCheckpoint> found = FindNewestValidCheckpoint(root, &skipped);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->manifest.sequence(), 3u);
  EXPECT_THAT(skipped, ::testing::ElementsAre("ckpt-0000000004: incomplete (no MANIFEST)"));
}

TEST(CheckpointFilesTest, PruningKeepsTheNewestAndTheirBases) {
  const std::string root = TestRoot("prune");
  ASSERT_TRUE(WriteCheckpoint(root, 1).ok());
  ASSERT_TRUE(WriteCheckpoint(root, 2).ok());
  ASSERT_TRUE(WriteCheckpoint(root, 3).ok());
  ASSERT_TRUE(WriteCheckpoint(root, 5, /*base_sequence=*/3).ok());  // incremental
  ASSERT_TRUE(WriteCheckpoint(root, 6, /*base_sequence=*/5).ok());
  // An interrupted write older than the newest complete one, and one in
  // progress after it.
  ASSERT_EQ(::mkdir(absl::StrCat(root, "/", CheckpointDirName(4)).c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(absl::StrCat(root, "/", CheckpointDirName(7)).c_str(), 0755), 0);
  absl::StatusOr<std::vector<std::string>> removed = PruneCheckpoints(root, 2);
  ASSERT_TRUE(removed.ok()) << removed.status();
  absl::StatusOr<std::vector<CheckpointDir>> left = ListCheckpoints(root);
  ASSERT_TRUE(left.ok());
  std::vector<uint64_t> sequences;
  for (const CheckpointDir& c : *left) sequences.push_back(c.sequence);
  // 6 and 5 are the newest two; 5 restores through 3; 7 is being written.
  EXPECT_THAT(sequences, ::testing::ElementsAre(3, 5, 6, 7));
  EXPECT_EQ(removed->size(), 3u);
  EXPECT_EQ(PruneCheckpoints(root, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

// A writer killed with SIGKILL at random moments never leaves a torn
// checkpoint that loads: the newest valid one always verifies and holds
// exactly its own content.
TEST(CheckpointFilesTest, KilledWritersNeverLeaveATornCheckpoint) {
  for (int seed = 1; seed <= 10; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    const std::string root = TestRoot(absl::StrCat("crash", seed));
    ASSERT_TRUE(WriteCheckpoint(root, 1).ok());  // something valid to fall back on
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      for (uint64_t sequence = 2; sequence < 100000; ++sequence) {
        if (!WriteCheckpoint(root, sequence).ok()) ::_exit(3);
        if (!PruneCheckpoints(root, 2).ok()) ::_exit(4);
      }
      ::_exit(0);
    }
    // The kill lands somewhere in the child's writing: where is up to the
    // seed and the scheduler; any moment must be safe.
    std::mt19937 rng(seed);
    std::this_thread::sleep_for(
        std::chrono::microseconds(std::uniform_int_distribution<int>(200, 30000)(rng)));
    ::kill(child, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the writer finished or failed before the kill";
    absl::StatusOr<FoundCheckpoint> found = FindNewestValidCheckpoint(root, nullptr);
    ASSERT_TRUE(found.ok()) << found.status();
    const uint64_t sequence = found->manifest.sequence();
    absl::StatusOr<std::string> data = ReadCheckpointFile(found->path, found->manifest.files(0));
    ASSERT_TRUE(data.ok());
    EXPECT_EQ(*data, Content(sequence, 0, 3584)) << "checkpoint " << sequence;
    // The next writer carries on past whatever the dead one left.
    ASSERT_TRUE(PruneCheckpoints(root, 1).ok());
  }
}

}  // namespace
}  // namespace ps
