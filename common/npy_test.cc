#include "common/npy.h"

#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util/temp_dir.h"

namespace ps {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool Exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

uint32_t Get16(const std::string& b, size_t at) {
  return static_cast<uint8_t>(b[at]) | static_cast<uint32_t>(static_cast<uint8_t>(b[at + 1])) << 8;
}
uint32_t Get32(const std::string& b, size_t at) { return Get16(b, at) | Get16(b, at + 2) << 16; }

TEST(NpyTest, HeaderIsPaddedTo64BytesWithTheDictNumPyExpects) {
  const std::vector<float> f(24);
  const std::vector<uint64_t> u(5);
  struct Case {
    NpyArray array;
    std::string dict;
  };
  const Case cases[] = {
      {NpyArray::Float32(absl::MakeSpan(f).subspan(0, 1), {}),
       "{'descr': '<f4', 'fortran_order': False, 'shape': (), }"},
      {NpyArray::Uint64(u, {5}), "{'descr': '<u8', 'fortran_order': False, 'shape': (5,), }"},
      {NpyArray::Float32(absl::MakeSpan(f).subspan(0, 12), {4, 3}),
       "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 3), }"},
      {NpyArray::Float32(f, {2, 3, 4}),
       "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 4), }"},
      {NpyArray::Float32({}, {0, 7}),
       "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 7), }"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::string> h = NpyHeader(c.array);
    ASSERT_TRUE(h.ok()) << h.status();
    EXPECT_EQ(h->size() % 64, 0u) << c.dict;
    EXPECT_EQ(h->substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
    EXPECT_EQ(Get16(*h, 8), h->size() - 10);
    EXPECT_EQ(h->substr(10, c.dict.size()), c.dict);
    EXPECT_EQ(h->back(), '\n');
    EXPECT_EQ(h->find_first_not_of(' ', 10 + c.dict.size()), h->size() - 1) << "space padding";
  }
  // NumPy's usual 128 bytes, and 192 for a dict of 173 characters.
  const std::vector<float> one(1);
  EXPECT_EQ(NpyHeader(NpyArray::Float32(one, {1, 1}))->size(), 128u);
  EXPECT_EQ(NpyHeader(NpyArray::Float32(one, std::vector<uint64_t>(40, 1)))->size(), 192u);
}

TEST(NpyTest, HeaderRefusesBytesThatDoNotMatchTheShape) {
  const std::vector<float> f(6);
  absl::StatusOr<std::string> h = NpyHeader(NpyArray::Float32(f, {2, 4}));
  EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(h.status().message()),
              HasSubstr("shape (2, 4) and dtype <f4 needs 32 bytes, got 24"));
  h = NpyHeader(NpyArray::Float32(f, {uint64_t{1} << 40, uint64_t{1} << 40}));
  EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(h.status().message()), HasSubstr("more bytes than fit in 64 bits"));
}

TEST(NpyTest, WriteNpyWritesHeaderThenLittleEndianData) {
  const std::string dir = MakeTestDir("write");
  const std::vector<float> values = {1.5f, -2.0f, 3.25f, 0.0f, 1e-3f, 7.0f};
  absl::StatusOr<uint64_t> bytes = WriteNpy(dir + "/a.npy", NpyArray::Float32(values, {2, 3}));
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  const std::string file = ReadAll(dir + "/a.npy");
  ASSERT_EQ(file.size(), *bytes);
  ASSERT_EQ(file.size(), 128u + 24);
  EXPECT_EQ(Get16(file, 8), 118u);
  EXPECT_EQ(file.substr(128), std::string(reinterpret_cast<const char*>(values.data()), 24));
  EXPECT_EQ(file[128 + 4 + 3], '\xc0') << "-2.0f is c0000000, little-endian";
  EXPECT_FALSE(Exists(dir + "/a.npy.tmp"));

  absl::StatusOr<uint64_t> missing =
      WriteNpy(dir + "/no/such/dir/a.npy", NpyArray::Float32(values, {6}));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr(dir + "/no/such/dir/a.npy.tmp"));
  // A refused array leaves no file behind.
  EXPECT_FALSE(WriteNpy(dir + "/b.npy", NpyArray::Float32(values, {7})).ok());
  EXPECT_FALSE(Exists(dir + "/b.npy"));
  EXPECT_FALSE(Exists(dir + "/b.npy.tmp"));
}

TEST(NpzTest, ArchiveHasLocalHeadersCentralDirectoryAndEndRecord) {
  const std::string dir = MakeTestDir("zip");
  const std::vector<uint64_t> keys = {3, 7, uint64_t{1} << 63};
  const std::vector<float> values = {1, 2, 3, 4, 5, 6};
  auto writer = NpzWriter::Create(dir + "/t.npz");
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE((*writer)->Add("keys", NpyArray::Uint64(keys, {3})).ok());
  ASSERT_TRUE((*writer)->Add("values", NpyArray::Float32(values, {3, 2})).ok());
  absl::Status twice = (*writer)->Add("keys", NpyArray::Uint64(keys, {3}));
  EXPECT_EQ(twice.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(twice.message()), HasSubstr("member 'keys' added twice"));
  EXPECT_FALSE(Exists(dir + "/t.npz")) << "visible before Finish";
  absl::StatusOr<uint64_t> size = (*writer)->Finish();
  ASSERT_TRUE(size.ok()) << size.status();

  const std::string zip = ReadAll(dir + "/t.npz");
  ASSERT_EQ(zip.size(), *size);
  ASSERT_GE(zip.size(), 22u);
  const size_t end = zip.size() - 22;
  ASSERT_EQ(Get32(zip, end), 0x06054b50u);
  EXPECT_EQ(Get16(zip, end + 8), 2u);   // entries on this disk
  EXPECT_EQ(Get16(zip, end + 10), 2u);  // entries
  const size_t directory = Get32(zip, end + 16);
  EXPECT_EQ(directory + Get32(zip, end + 12), end) << "directory size";

  const std::string names[] = {"keys.npy", "values.npy"};
  const std::string data[] = {
      std::string(reinterpret_cast<const char*>(keys.data()), 24),
      std::string(reinterpret_cast<const char*>(values.data()), 24),
  };
  size_t at = directory;
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(Get32(zip, at), 0x02014b50u) << i;
    EXPECT_EQ(Get16(zip, at + 10), 0u) << "stored";
    const uint32_t crc = Get32(zip, at + 16);
    const uint32_t bytes = Get32(zip, at + 20);
    EXPECT_EQ(Get32(zip, at + 24), bytes);
    const size_t name_len = Get16(zip, at + 28);
    EXPECT_EQ(zip.substr(at + 46, name_len), names[i]);
    const size_t local = Get32(zip, at + 42);
    at += 46 + name_len;

    ASSERT_EQ(Get32(zip, local), 0x04034b50u) << i;
    EXPECT_EQ(Get32(zip, local + 14), crc);
    EXPECT_EQ(Get32(zip, local + 18), bytes);
    EXPECT_EQ(zip.substr(local + 30, Get16(zip, local + 26)), names[i]);
    const std::string member = zip.substr(local + 30 + name_len, bytes);
    EXPECT_EQ(crc, ::crc32(0, reinterpret_cast<const Bytef*>(member.data()), member.size()));
    EXPECT_THAT(member, StartsWith("\x93NUMPY"));
    EXPECT_EQ(member.size(), 128u + 24);
    EXPECT_EQ(member.substr(128), data[i]);
  }
  EXPECT_EQ(at, end);
}

TEST(NpzTest, UnfinishedArchiveLeavesNothingBehind) {
  const std::string dir = MakeTestDir("unfinished");
  {
    auto writer = NpzWriter::Create(dir + "/t.npz");
    ASSERT_TRUE(writer.ok());
    const std::vector<float> v = {1};
    ASSERT_TRUE((*writer)->Add("v", NpyArray::Float32(v, {1})).ok());
    EXPECT_TRUE(Exists(dir + "/t.npz.tmp"));
  }
  EXPECT_FALSE(Exists(dir + "/t.npz"));
  EXPECT_FALSE(Exists(dir + "/t.npz.tmp"));
}

TEST(NpzTest, MembersThatWouldNeedZip64AreRefused) {
  // 4 GiB of address space that is never read: the size is refused first
  // (were it read, the test would crash, which is a failure too).
  const size_t bytes = (size_t{1} << 32) + 64;
  void* p = ::mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  const std::string dir = MakeTestDir("zip64");
  auto writer = NpzWriter::Create(dir + "/big.npz");
  ASSERT_TRUE(writer.ok());
  const absl::Span<const float> huge(static_cast<const float*>(p), bytes / 4);
  absl::Status s = (*writer)->Add("values", NpyArray::Float32(huge, {bytes / 4}));
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(s.message()), HasSubstr(dir + "/big.npz: member 'values'"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("under 4 GiB"));
  // The smallest member over the limit, counting the local header (30 bytes),
  // the name "edge.npy" and the .npy header (128 bytes): 4 bytes less would
  // have fit.
  const size_t n = (size_t{0xffffffff} - 30 - 8 - 128) / 4 + 1;
  s = (*writer)->Add("edge", NpyArray::Float32(absl::Span<const float>(huge.data(), n), {n}));
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(s.message()), HasSubstr("to 4294967298 bytes"));
  ::munmap(p, bytes);
}

}  // namespace
}  // namespace ps
