#include "worker/train/idx_reader.h"

#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

void PutBigEndian(uint32_t v, std::vector<uint8_t>& out) {
  out.push_back(v >> 24);
  out.push_back((v >> 16) & 0xff);
  out.push_back((v >> 8) & 0xff);
  out.push_back(v & 0xff);
}

// Header bytes: magic then each dimension.
std::vector<uint8_t> Header(uint32_t magic, const std::vector<uint32_t>& dims) {
  std::vector<uint8_t> out;
  PutBigEndian(magic, out);
  for (uint32_t d : dims) PutBigEndian(d, out);
  return out;
}

std::vector<uint8_t> Concat(std::vector<uint8_t> a, const std::vector<uint8_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Writes `bytes` to TEST_TMPDIR/name, gzip-compressed unless `plain`.
std::string WriteFile(const std::string& name, const std::vector<uint8_t>& bytes,
                      bool plain = false) {
  const std::string path = TempDir() + "/" + name;
  gzFile f = gzopen(path.c_str(), plain ? "wbT" : "wb");
  EXPECT_NE(f, nullptr) << path;
  if (!bytes.empty()) {
    EXPECT_EQ(gzwrite(f, bytes.data(), bytes.size()), static_cast<int>(bytes.size()));
  }
  EXPECT_EQ(gzclose(f), Z_OK);
  return path;
}

// Three 2x2 images with pixels 0, 17, 34, ..., 187.
std::vector<uint8_t> SmallImages() {
  std::vector<uint8_t> pixels;
  for (int i = 0; i < 12; ++i) pixels.push_back(17 * i);
  return Concat(Header(kIdxImagesMagic, {3, 2, 2}), pixels);
}

std::vector<uint8_t> SmallLabels() { return Concat(Header(kIdxLabelsMagic, {3}), {2, 0, 1}); }

TEST(IdxReaderTest, ReadsGzipValuesExactly) {
  const std::string images = WriteFile("small-images.gz", SmallImages());
  const std::string labels = WriteFile("small-labels.gz", SmallLabels());
  absl::StatusOr<Dataset> d = ReadIdxDataset(images, labels, 3);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->num_examples, 3);
  EXPECT_EQ(d->dim, 4);
  EXPECT_EQ(d->num_classes, 3);
  EXPECT_EQ(d->labels, (std::vector<int32_t>{2, 0, 1}));
  ASSERT_EQ(d->features.size(), 12u);
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(d->features[i], static_cast<float>(17 * i) * (1.0f / 255.0f));
  }
  EXPECT_EQ(d->row(2)[3], 1.0f * 187 / 255);
}

TEST(IdxReaderTest, ReadsUncompressedFile) {
  const std::string path = WriteFile("plain-labels", SmallLabels(), /*plain=*/true);
  absl::StatusOr<IdxFile> f = ReadIdxFile(path, kIdxLabelsMagic);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->dims, (std::vector<int64_t>{3}));
  EXPECT_EQ(f->data, (std::vector<uint8_t>{2, 0, 1}));
}

TEST(IdxReaderTest, MissingFileIsNotFound) {
  const std::string path = TempDir() + "/no-such-file.gz";
  absl::StatusOr<IdxFile> f = ReadIdxFile(path, kIdxLabelsMagic);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(f.status().message(), HasSubstr(path + ": cannot open ("));
  EXPECT_THAT(f.status().message(), HasSubstr("No such file"));
}

TEST(IdxReaderTest, MissingFashionMnistPointsAtSetup) {
  const std::string dir = TempDir() + "/empty-dir";
  absl::StatusOr<Dataset> d = ReadFashionMnist(dir, /*train=*/true);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(d.status().message(), HasSubstr(dir + "/train-images-idx3-ubyte.gz: cannot open"));
  EXPECT_THAT(d.status().message(), HasSubstr("is dataset-fashion-mnist installed? see "
                                              "deploy/setup.sh"));
}

TEST(IdxReaderTest, BadMagicNamesExpectedAndFound) {
  // A labels file where an images file is expected.
  const std::string path = WriteFile("swapped.gz", SmallLabels());
  absl::StatusOr<IdxFile> f = ReadIdxFile(path, kIdxImagesMagic);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(f.status().message(), HasSubstr(path));
  EXPECT_THAT(f.status().message(), HasSubstr("expected 0x00000803, found 0x00000801"));
}

TEST(IdxReaderTest, EmptyFileIsTruncatedMagic) {
  const std::string path = WriteFile("empty.gz", {});
  absl::StatusOr<IdxFile> f = ReadIdxFile(path, kIdxLabelsMagic);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(f.status().message(), HasSubstr(path));
  EXPECT_THAT(f.status().message(), HasSubstr("expected 4 bytes, got 0"));
}

TEST(IdxReaderTest, TruncatedHeader) {
  std::vector<uint8_t> bytes = Header(kIdxImagesMagic, {3, 2});  // no cols
  const std::string path = WriteFile("short-header.gz", bytes);
  absl::StatusOr<IdxFile> f = ReadIdxFile(path, kIdxImagesMagic);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(f.status().message(), HasSubstr(path + ": truncated header"));
}

TEST(IdxReaderTest, TruncatedPayloadSaysExpectedAndGot) {
  std::vector<uint8_t> bytes = SmallImages();
  bytes.resize(bytes.size() - 5);  // 7 of 12 pixels left
  const std::string path = WriteFile("short-images.gz", bytes);
  absl::StatusOr<IdxFile> f = ReadIdxFile(path, kIdxImagesMagic);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(f.status().message(), HasSubstr(path));
  EXPECT_THAT(f.status().message(), HasSubstr("expected 12 bytes, got 7"));
}

TEST(IdxReaderTest, CorruptGzipStreamIsDataLoss) {
  // Compress a valid file, then cut the compressed bytes in half.
  const std::string whole = WriteFile("whole.gz", SmallImages());
  std::vector<uint8_t> compressed;
  {
    FILE* in = std::fopen(whole.c_str(), "rb");
    ASSERT_NE(in, nullptr);
    int c;
    while ((c = std::fgetc(in)) != EOF) compressed.push_back(c);
    std::fclose(in);
  }
  compressed.resize(compressed.size() / 2);
  const std::string path = TempDir() + "/cut.gz";
  FILE* out = std::fopen(path.c_str(), "wb");
  ASSERT_NE(out, nullptr);
  std::fwrite(compressed.data(), 1, compressed.size(), out);
  std::fclose(out);

  absl::StatusOr<IdxFile> f = ReadIdxFile(path, kIdxImagesMagic);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(f.status().message(), HasSubstr(path));
}

TEST(IdxReaderTest, TrailingBytesAreRejected) {
  std::vector<uint8_t> bytes = Concat(SmallLabels(), {7});
  const std::string path = WriteFile("long-labels.gz", bytes);
  absl::StatusOr<IdxFile> f = ReadIdxFile(path, kIdxLabelsMagic);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(f.status().message(), HasSubstr(path));
  EXPECT_THAT(f.status().message(), HasSubstr("expected 3 payload bytes"));
}

TEST(IdxReaderTest, CountMismatchNamesBothFiles) {
  const std::string images = WriteFile("mm-images.gz", SmallImages());
  const std::string labels =
      WriteFile("mm-labels.gz", Concat(Header(kIdxLabelsMagic, {2}), {0, 1}));
  absl::StatusOr<Dataset> d = ReadIdxDataset(images, labels, 3);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(d.status().message(), HasSubstr(images + " holds 3 images"));
  EXPECT_THAT(d.status().message(), HasSubstr(labels + " holds 2 labels"));
}

TEST(IdxReaderTest, LabelOutOfRange) {
  const std::string images = WriteFile("oor-images.gz", SmallImages());
  const std::string labels =
      WriteFile("oor-labels.gz", Concat(Header(kIdxLabelsMagic, {3}), {0, 3, 1}));
  absl::StatusOr<Dataset> d = ReadIdxDataset(images, labels, 3);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(d.status().message(), HasSubstr(labels));
  EXPECT_THAT(d.status().message(),
              HasSubstr("label 3 of example 1 is out of range: expected [0, 3)"));
}

TEST(IdxReaderTest, FashionMnistRejectsWrongImageSize) {
  const std::string dir = TempDir() + "/tiny-fashion";
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  WriteFile("tiny-fashion/t10k-images-idx3-ubyte.gz", SmallImages());
  WriteFile("tiny-fashion/t10k-labels-idx1-ubyte.gz", SmallLabels());
  absl::StatusOr<Dataset> d = ReadFashionMnist(dir, /*train=*/false);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(d.status().message(), HasSubstr("expected 28x28 images"));
}

TEST(IdxReaderTest, RealFashionMnistTestSet) {
  absl::StatusOr<Dataset> d = ReadFashionMnist(kDefaultFashionMnistDir, /*train=*/false);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->num_examples, 10000);
  EXPECT_EQ(d->dim, 784);
  EXPECT_EQ(d->num_classes, 10);
  ASSERT_EQ(d->features.size(), 10000u * 784u);
  ASSERT_EQ(d->labels.size(), 10000u);
  std::vector<int> per_class(10, 0);
  for (int32_t label : d->labels) {
    ASSERT_GE(label, 0);
    ASSERT_LT(label, 10);
    ++per_class[label];
  }
  for (int c = 0; c < 10; ++c) EXPECT_EQ(per_class[c], 1000) << "class " << c;
  float lo = 1, hi = 0;
  for (float v : d->features) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_EQ(lo, 0.0f);
  EXPECT_EQ(hi, 1.0f);
}

}  // namespace
}  // namespace ps
