// Readers for the IDX format used by MNIST and Fashion-MNIST, gzip-compressed
// or plain (zlib's gzread accepts both). Images may have any size and labels
// any number of classes (up to 256); the Dataset records both. Stateless free
// functions; safe to call from any thread.
//
// IDX layout: a 4-byte big-endian magic number 0x0000TTNN (TT = element type,
// only 0x08 = unsigned byte is supported; NN = number of dimensions), NN
// big-endian uint32 dimension sizes, then the elements in row-major order.
#ifndef PS_WORKER_TRAIN_IDX_READER_H_
#define PS_WORKER_TRAIN_IDX_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/train/dataset.h"

namespace ps {

// Where deploy/setup.sh installs Fashion-MNIST (package dataset-fashion-mnist).
inline constexpr char kDefaultFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

inline constexpr uint32_t kIdxImagesMagic = 0x00000803;  // ubyte, 3 dims
inline constexpr uint32_t kIdxLabelsMagic = 0x00000801;  // ubyte, 1 dim

// Contents of one unsigned-byte IDX file.
struct IdxFile {
  std::vector<int64_t> dims;  // e.g. {60000, 28, 28}; every entry >= 1
  std::vector<uint8_t> data;  // product(dims) bytes, row-major
};

// Reads the IDX file at `path`, which must start with `expected_magic`
// (0x000008NN). Every error message starts with `path`. Errors:
//   NOT_FOUND          the file does not exist;
//   PERMISSION_DENIED  it cannot be read for lack of permission;
//   INTERNAL           it cannot be opened for another reason;
//   INVALID_ARGUMENT   the magic number differs from expected_magic, a
//                      dimension is 0, the dimensions describe more than 2^32
//                      elements, or bytes follow the payload;
//   DATA_LOSS          the header or payload is truncated, or the gzip stream
//                      is corrupt.
absl::StatusOr<IdxFile> ReadIdxFile(const std::string& path, uint32_t expected_magic);

// Reads an images file (N x rows x cols, magic 0x00000803, any rows and cols)
// and a labels file (N, magic 0x00000801) into a Dataset with
// dim = rows * cols, pixels scaled from [0, 255] to [0, 1]. num_classes is
// the given value, or max label + 1 when it is 0. Errors: those of
// ReadIdxFile, plus INVALID_ARGUMENT (naming the file) when the two files
// hold different numbers of examples or a label is outside [0, num_classes).
absl::StatusOr<Dataset> ReadIdxDataset(const std::string& images_path,
                                       const std::string& labels_path, int num_classes = 0);

// The MNIST file names inside a data directory: train-images-idx3-ubyte.gz,
// train-labels-idx1-ubyte.gz when `train`, else t10k-*.
struct IdxPaths {
  std::string images;
  std::string labels;
};
IdxPaths IdxPathsIn(const std::string& dir, bool train);

// A training and a test set that share one image size and one class count.
struct TrainTestData {
  Dataset train;
  Dataset test;
  int rows = 0;  // image size of both sets; dim = rows * cols
  int cols = 0;
};

// Reads the test set, then the training set, and gives both
// num_classes = 1 + the largest label in either. Errors: those of
// ReadIdxDataset, plus INVALID_ARGUMENT naming both images files when their
// image sizes differ.
absl::StatusOr<TrainTestData> ReadIdxTrainTest(const IdxPaths& train, const IdxPaths& test);

// ReadIdxTrainTest on IdxPathsIn(dir, true) and IdxPathsIn(dir, false);
// NOT_FOUND messages list the file names expected in `dir`.
absl::StatusOr<TrainTestData> ReadIdxDir(const std::string& dir);

// Reads Fashion-MNIST from `dir` (IdxPathsIn(dir, train)). Result: dim 784,
// num_classes 10, pixels in [0, 1]. Errors: those of ReadIdxDataset
// (NOT_FOUND messages point at deploy/setup.sh), plus INVALID_ARGUMENT when
// the images are not 28x28.
absl::StatusOr<Dataset> ReadFashionMnist(const std::string& dir, bool train);

}  // namespace ps

#endif  // PS_WORKER_TRAIN_IDX_READER_H_
