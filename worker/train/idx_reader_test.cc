#include "worker/train/idx_reader.h"

#include <sys/resource.h>
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
#include "tests/test_util/temp_dir.h"
#include "worker/train/idx_writer.h"
#include "worker/train/synthetic_data.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

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
  const std::string path = TestTmpDir() + "/" + name;
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
  const std::string path = TestTmpDir() + "/no-such-file.gz";
  absl::StatusOr<IdxFile> f = ReadIdxFile(path, kIdxLabelsMagic);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(f.status().message(), HasSubstr(path + ": cannot open ("));
  EXPECT_THAT(f.status().message(), HasSubstr("No such file"));
}

TEST(IdxReaderTest, MissingFashionMnistPointsAtSetup) {
  const std::string dir = TestTmpDir() + "/empty-dir";
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
  const std::string path = TestTmpDir() + "/cut.gz";
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
  const std::string dir = TestTmpDir() + "/tiny-fashion";
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  WriteFile("tiny-fashion/t10k-images-idx3-ubyte.gz", SmallImages());
  WriteFile("tiny-fashion/t10k-labels-idx1-ubyte.gz", SmallLabels());
  absl::StatusOr<Dataset> d = ReadFashionMnist(dir, /*train=*/false);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(d.status().message(), HasSubstr("expected 28x28 images"));
}

// n rows x cols images, pixel p of image i = (7 i + p) mod 256, and labels
// cycling through `labels`.
struct Generated {
  std::vector<uint8_t> images, labels;
};
Generated Generate(uint32_t n, uint32_t rows, uint32_t cols, const std::vector<uint8_t>& labels) {
  Generated g;
  g.images = Header(kIdxImagesMagic, {n, rows, cols});
  g.labels = Header(kIdxLabelsMagic, {n});
  for (uint32_t i = 0; i < n; ++i) {
    for (uint32_t p = 0; p < rows * cols; ++p) g.images.push_back((7 * i + p) % 256);
    g.labels.push_back(labels[i % labels.size()]);
  }
  return g;
}

TEST(IdxReaderTest, Reads8x8ThreeClassGzipPair) {
  const Generated g = Generate(5, 8, 8, {0, 2, 1});
  const std::string images = WriteFile("g8-images.gz", g.images);
  const std::string labels = WriteFile("g8-labels.gz", g.labels);
  absl::StatusOr<Dataset> d = ReadIdxDataset(images, labels);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->num_examples, 5);
  EXPECT_EQ(d->dim, 64);
  EXPECT_EQ(d->num_classes, 3);  // max label + 1
  EXPECT_EQ(d->labels, (std::vector<int32_t>{0, 2, 1, 0, 2}));
  ASSERT_EQ(d->features.size(), 5u * 64u);
  for (int i = 0; i < 5; ++i) {
    for (int p = 0; p < 64; ++p) {
      ASSERT_EQ(d->row(i)[p], static_cast<float>((7 * i + p) % 256) * (1.0f / 255.0f))
          << "image " << i << " pixel " << p;
    }
  }
}

TEST(IdxReaderTest, ExplicitClassCountIsKept) {
  const Generated g = Generate(3, 8, 8, {0, 1});
  absl::StatusOr<Dataset> d =
      ReadIdxDataset(WriteFile("k-images.gz", g.images), WriteFile("k-labels.gz", g.labels), 10);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->num_classes, 10);
}

TEST(IdxReaderTest, NonSquareImages) {
  const Generated g = Generate(2, 3, 5, {1});
  absl::StatusOr<Dataset> d =
      ReadIdxDataset(WriteFile("ns-images.gz", g.images), WriteFile("ns-labels.gz", g.labels));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->dim, 15);
  EXPECT_EQ(d->num_classes, 2);
}

TEST(IdxReaderTest, ZeroDimensionIsRefusedNamingTheFile) {
  for (const std::vector<uint32_t>& dims : {std::vector<uint32_t>{0, 8, 8}, {4, 0, 8}, {4, 8, 0}}) {
    const std::string path = WriteFile("zero-dim.gz", Header(kIdxImagesMagic, dims));
    absl::StatusOr<IdxFile> f = ReadIdxFile(path, kIdxImagesMagic);
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(f.status().message(), HasSubstr(path + ": header dimension "));
    EXPECT_THAT(f.status().message(), HasSubstr(" of 3 is 0: expected every dimension >= 1"));
  }
  const std::string labels = WriteFile("zero-labels.gz", Header(kIdxLabelsMagic, {0}));
  absl::StatusOr<IdxFile> f = ReadIdxFile(labels, kIdxLabelsMagic);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(f.status().message(), HasSubstr(labels + ": header dimension 1 of 1 is 0"));
}

TEST(IdxReaderTest, HeaderThatPromisesMoreImagesThanTheFileHolds) {
  Generated g = Generate(3, 8, 8, {0});
  g.images[7] = 4;  // header says 4 images of 8x8; the payload holds 3
  const std::string path = WriteFile("more-images.gz", g.images);
  absl::StatusOr<IdxFile> f = ReadIdxFile(path, kIdxImagesMagic);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(f.status().message(), HasSubstr(path + ": truncated payload"));
  EXPECT_THAT(f.status().message(), HasSubstr("expected 256 bytes, got 192"));
}

// Found by fuzz/idx_fuzzer: a header promising 2^32 - 1 labels in an empty
// file made the reader allocate and zero 4 GiB before reading anything.
TEST(IdxReaderTest, HugeHeaderOverATinyFileFailsWithoutAllocatingItAll) {
  const std::string path =
      WriteFile("huge-header", {0x00, 0x00, 0x08, 0x01, 0xff, 0xff, 0xff, 0xff});
  absl::StatusOr<IdxFile> f = ReadIdxFile(path, kIdxLabelsMagic);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(f.status().message(), HasSubstr("expected 4294967295 bytes, got 0"));
  struct rusage usage;
  ASSERT_EQ(getrusage(RUSAGE_SELF, &usage), 0);
  EXPECT_LT(usage.ru_maxrss, 1024 * 1024) << "peak resident kB: the header's size was allocated";
}

// Found by fuzz/idx_fuzzer: four dimensions whose product overflows int64
// were accepted (the product wrapped around) with an empty payload.
TEST(IdxReaderTest, DimensionsWhoseProductOverflowsAreRefused) {
  const std::string path =
      WriteFile("overflow", {0x00, 0x00, 0x08, 0x04, 0x00, 0x00, 0x01, 0xfe, 0x00, 0x00,
                             0x00, 0x03, 0x00, 0x25, 0x4a, 0x6f, 0x94, 0xb9, 0xde, 0x03});
  absl::StatusOr<IdxFile> f = ReadIdxFile(path, 0x00000804);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(f.status().message(), HasSubstr("exceed the limit of 4294967296 elements"));
}

TEST(IdxReaderTest, HeaderThatPromisesFewerImagesThanTheFileHolds) {
  Generated g = Generate(3, 8, 8, {0});
  g.images[15] = 7;  // header says 3 images of 8x7; the payload holds 3 of 8x8
  const std::string path = WriteFile("fewer-images.gz", g.images);
  absl::StatusOr<IdxFile> f = ReadIdxFile(path, kIdxImagesMagic);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(f.status().message(),
              HasSubstr(path + ": expected 168 payload bytes for shape 3x8x7, found more"));
}

TEST(IdxReaderTest, TrainAndTestShareTheClassCount) {
  const std::string dir = TestTmpDir() + "/tt8";
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  const Generated train = Generate(6, 8, 8, {0, 1});
  const Generated test = Generate(4, 8, 8, {2, 0});
  WriteFile("tt8/train-images-idx3-ubyte.gz", train.images);
  WriteFile("tt8/train-labels-idx1-ubyte.gz", train.labels);
  WriteFile("tt8/t10k-images-idx3-ubyte.gz", test.images);
  WriteFile("tt8/t10k-labels-idx1-ubyte.gz", test.labels);
  absl::StatusOr<TrainTestData> d = ReadIdxDir(dir);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->rows, 8);
  EXPECT_EQ(d->cols, 8);
  EXPECT_EQ(d->train.num_examples, 6);
  EXPECT_EQ(d->test.num_examples, 4);
  EXPECT_EQ(d->train.dim, 64);
  EXPECT_EQ(d->test.dim, 64);
  EXPECT_EQ(d->train.num_classes, 3);
  EXPECT_EQ(d->test.num_classes, 3);
}

TEST(IdxReaderTest, TestImagesOfAnotherSizeNameBothFiles) {
  const Generated train = Generate(2, 8, 8, {0, 1});
  const Generated test = Generate(2, 4, 4, {0, 1});
  const IdxPaths train_paths = {WriteFile("sz-train-images.gz", train.images),
                                WriteFile("sz-train-labels.gz", train.labels)};
  const IdxPaths test_paths = {WriteFile("sz-test-images.gz", test.images),
                               WriteFile("sz-test-labels.gz", test.labels)};
  absl::StatusOr<TrainTestData> d = ReadIdxTrainTest(train_paths, test_paths);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(d.status().message(), HasSubstr("the test images in " + test_paths.images +
                                              " are 4x4 but the training images in " +
                                              train_paths.images + " are 8x8; expected the same"));
}

TEST(IdxReaderTest, MissingDataDirListsTheExpectedFiles) {
  const std::string dir = TestTmpDir() + "/no-data-here";
  absl::StatusOr<TrainTestData> d = ReadIdxDir(dir);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kNotFound);
  // The test set is read first.
  EXPECT_THAT(d.status().message(), HasSubstr(dir + "/t10k-images-idx3-ubyte.gz: cannot open"));
  EXPECT_THAT(d.status().message(), HasSubstr(dir + "/train-labels-idx1-ubyte.gz"));
  EXPECT_THAT(d.status().message(), HasSubstr("deploy/setup.sh"));
}

TEST(IdxReaderTest, WriterRoundTripsQuadrantImages) {
  const Dataset generated = MakeQuadrantImages(50, 8, 8, /*seed=*/2);
  const IdxPaths paths = {TestTmpDir() + "/rt-images.gz", TestTmpDir() + "/rt-labels.gz"};
  ASSERT_TRUE(WriteIdxDataset(generated, 8, 8, paths).ok());
  absl::StatusOr<Dataset> d = ReadIdxDataset(paths.images, paths.labels);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->num_examples, 50);
  EXPECT_EQ(d->dim, 64);
  EXPECT_EQ(d->num_classes, 4);
  EXPECT_EQ(d->labels, generated.labels);
  EXPECT_EQ(d->features, generated.features);
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
