#include "worker/train/idx_reader.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace ps {
namespace {

// Refuse headers describing more elements than this (Fashion-MNIST train is
// 47M); protects against allocating gigabytes for a corrupt header.
constexpr int64_t kMaxElements = int64_t{1} << 32;

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};
using GzHandle = std::unique_ptr<gzFile_s, GzCloser>;

absl::StatusOr<GzHandle> Open(const std::string& path) {
  errno = 0;
  gzFile f = gzopen(path.c_str(), "rb");
  if (f != nullptr) return GzHandle(f);
  const int err = errno;
  const std::string msg =
      absl::StrCat(path, ": cannot open (", err != 0 ? std::strerror(err) : "out of memory", ")");
  if (err == ENOENT || err == ENOTDIR) return absl::NotFoundError(msg);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(msg);
  return absl::InternalError(msg);
}

// Reads up to `len` bytes; returns how many were read, or DATA_LOSS naming
// `what` if the gzip stream is corrupt.
absl::StatusOr<int64_t> ReadUpTo(gzFile f, const std::string& path, const char* what, uint8_t* buf,
                                 int64_t len) {
  int64_t got = 0;
  while (got < len) {
    const unsigned chunk = static_cast<unsigned>(std::min<int64_t>(len - got, 1 << 24));
    const int n = gzread(f, buf + got, chunk);
    if (n < 0) {
      int errnum = 0;
      const char* zmsg = gzerror(f, &errnum);
      return absl::DataLossError(absl::StrCat(path, ": corrupt data while reading the ", what,
                                              " (zlib: ", zmsg, ") after ", got, " of ", len,
                                              " bytes"));
    }
    if (n == 0) break;
    got += n;
  }
  return got;
}

// Reads exactly `len` bytes or fails with DATA_LOSS "expected N bytes, got M".
absl::Status ReadExactly(gzFile f, const std::string& path, const char* what, uint8_t* buf,
                         int64_t len) {
  absl::StatusOr<int64_t> got = ReadUpTo(f, path, what, buf, len);
  if (!got.ok()) return got.status();
  if (*got != len) {
    return absl::DataLossError(
        absl::StrCat(path, ": truncated ", what, ": expected ", len, " bytes, got ", *got));
  }
  return absl::OkStatus();
}

uint32_t BigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// "60000x28x28"
std::string ShapeString(const std::vector<int64_t>& dims) { return absl::StrJoin(dims, "x"); }

}  // namespace

absl::StatusOr<IdxFile> ReadIdxFile(const std::string& path, uint32_t expected_magic) {
  absl::StatusOr<GzHandle> file = Open(path);
  if (!file.ok()) return file.status();
  gzFile f = file->get();

  uint8_t word[4];
  absl::Status s = ReadExactly(f, path, "magic number", word, 4);
  if (!s.ok()) return s;
  const uint32_t magic = BigEndian32(word);
  if (magic != expected_magic) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: bad magic number: expected 0x%08x, found 0x%08x; is this the "
                        "right IDX file (images 0x00000803, labels 0x00000801)?",
                        path, expected_magic, magic));
  }

  IdxFile out;
  const int ndims = magic & 0xff;
  int64_t elements = 1;
  for (int i = 0; i < ndims; ++i) {
    s = ReadExactly(f, path, "header", word, 4);
    if (!s.ok()) return s;
    out.dims.push_back(BigEndian32(word));
    if (out.dims.back() == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": header dimension ", i + 1, " of ", ndims,
                       " is 0: expected every dimension >= 1 (an IDX file with no elements)"));
    }
    // Checked before multiplying: four 32-bit dimensions can overflow int64.
    if (out.dims.back() > kMaxElements / elements) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": header dimensions ",
                                                     ShapeString(out.dims), " exceed the limit of ",
                                                     kMaxElements, " elements"));
    }
    elements *= out.dims.back();
  }

  // Grown as the payload arrives, a chunk at a time: a header that promises
  // more than the file holds fails after reading what is there, instead of
  // allocating (and zeroing) all it promises first.
  constexpr int64_t kChunk = int64_t{16} << 20;
  int64_t have = 0;
  while (have < elements) {
    const int64_t want = std::min(kChunk, elements - have);
    out.data.resize(have + want);
    absl::StatusOr<int64_t> got = ReadUpTo(f, path, "payload", out.data.data() + have, want);
    if (!got.ok()) return got.status();
    have += *got;
    if (*got < want) {
      return absl::DataLossError(
          absl::StrCat(path, ": truncated payload: expected ", elements, " bytes, got ", have));
    }
  }

  uint8_t extra;
  absl::StatusOr<int64_t> trailing = ReadUpTo(f, path, "end", &extra, 1);
  if (!trailing.ok()) return trailing.status();
  if (*trailing != 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": expected ", elements,
                                                   " payload bytes for shape ",
                                                   ShapeString(out.dims), ", found more"));
  }
  return out;
}

namespace {

// A data set read from an images and a labels file, with its image size.
struct ImageSet {
  Dataset data;
  int64_t rows = 0;
  int64_t cols = 0;
};

// ReadIdxDataset, also returning the image size.
absl::StatusOr<ImageSet> ReadImageSet(const std::string& images_path,
                                      const std::string& labels_path, int num_classes) {
  absl::StatusOr<IdxFile> images = ReadIdxFile(images_path, kIdxImagesMagic);
  if (!images.ok()) return images.status();
  absl::StatusOr<IdxFile> labels = ReadIdxFile(labels_path, kIdxLabelsMagic);
  if (!labels.ok()) return labels.status();

  const int64_t n = images->dims[0];
  if (labels->dims[0] != n) {
    return absl::InvalidArgumentError(absl::StrCat(images_path, " holds ", n, " images but ",
                                                   labels_path, " holds ", labels->dims[0],
                                                   " labels; expected the same count"));
  }

  ImageSet out;
  out.rows = images->dims[1];
  out.cols = images->dims[2];
  const int64_t dim = out.rows * out.cols;
  if (dim > INT_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat(images_path, ": images of shape ", out.rows, "x", out.cols, " are too large"));
  }
  if (num_classes <= 0) {
    num_classes = 1 + *std::max_element(labels->data.begin(), labels->data.end());
  }
  Dataset& d = out.data;
  d.num_examples = n;
  d.num_classes = num_classes;
  d.dim = static_cast<int>(dim);
  d.labels.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    const int label = labels->data[i];
    if (label >= num_classes) {
      return absl::InvalidArgumentError(absl::StrCat(labels_path, ": label ", label, " of example ",
                                                     i, " is out of range: expected [0, ",
                                                     num_classes, ")"));
    }
    d.labels[i] = label;
  }
  d.features.resize(images->data.size());
  constexpr float kScale = 1.0f / 255.0f;
  for (size_t i = 0; i < images->data.size(); ++i) {
    d.features[i] = images->data[i] * kScale;
  }
  return out;
}

}  // namespace

absl::StatusOr<Dataset> ReadIdxDataset(const std::string& images_path,
                                       const std::string& labels_path, int num_classes) {
  absl::StatusOr<ImageSet> set = ReadImageSet(images_path, labels_path, num_classes);
  if (!set.ok()) return set.status();
  return std::move(set->data);
}

IdxPaths IdxPathsIn(const std::string& dir, bool train) {
  const std::string prefix = absl::StrCat(dir, "/", train ? "train" : "t10k");
  return {prefix + "-images-idx3-ubyte.gz", prefix + "-labels-idx1-ubyte.gz"};
}

absl::StatusOr<TrainTestData> ReadIdxTrainTest(const IdxPaths& train, const IdxPaths& test) {
  absl::StatusOr<ImageSet> test_set = ReadImageSet(test.images, test.labels, 0);
  if (!test_set.ok()) return test_set.status();
  absl::StatusOr<ImageSet> train_set = ReadImageSet(train.images, train.labels, 0);
  if (!train_set.ok()) return train_set.status();
  if (test_set->rows != train_set->rows || test_set->cols != train_set->cols) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the test images in ", test.images, " are ", test_set->rows, "x", test_set->cols,
        " but the training images in ", train.images, " are ", train_set->rows, "x",
        train_set->cols, "; expected the same size (is one of them from another data set?)"));
  }
  TrainTestData out;
  out.rows = static_cast<int>(train_set->rows);
  out.cols = static_cast<int>(train_set->cols);
  out.train = std::move(train_set->data);
  out.test = std::move(test_set->data);
  const int num_classes = std::max(out.train.num_classes, out.test.num_classes);
  out.train.num_classes = out.test.num_classes = num_classes;
  return out;
}

absl::StatusOr<TrainTestData> ReadIdxDir(const std::string& dir) {
  const IdxPaths train = IdxPathsIn(dir, true), test = IdxPathsIn(dir, false);
  absl::StatusOr<TrainTestData> data = ReadIdxTrainTest(train, test);
  if (absl::IsNotFound(data.status())) {
    return absl::NotFoundError(
        absl::StrCat(data.status().message(), "; the data directory must hold ", test.images, ", ",
                     test.labels, ", ", train.images, " and ", train.labels,
                     " (for Fashion-MNIST, install dataset-fashion-mnist: see deploy/setup.sh)"));
  }
  return data;
}

absl::StatusOr<Dataset> ReadFashionMnist(const std::string& dir, bool train) {
  const IdxPaths paths = IdxPathsIn(dir, train);
  absl::StatusOr<Dataset> data = ReadIdxDataset(paths.images, paths.labels, /*num_classes=*/10);
  if (absl::IsNotFound(data.status())) {
    return absl::NotFoundError(absl::StrCat(
        data.status().message(), "; is dataset-fashion-mnist installed? see deploy/setup.sh"));
  }
  if (!data.ok()) return data.status();
  if (data->dim != 28 * 28) {
    return absl::InvalidArgumentError(absl::StrCat(paths.images, ": expected 28x28 images, found ",
                                                   data->dim, " pixels per image"));
  }
  return data;
}

}  // namespace ps
