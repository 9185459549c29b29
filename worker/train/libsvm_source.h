// The bytes of a LibSVM file in order, from a plain file (or pipe) or
// decompressed from gzip, read in blocks (LibsvmReader's input).
#ifndef PS_WORKER_TRAIN_LIBSVM_SOURCE_H_
#define PS_WORKER_TRAIN_LIBSVM_SOURCE_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace ps {
namespace libsvm_internal {

// Bytes of one file in order, decompressed if need be.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Reads up to n >= 1 bytes into buf; returns how many, 0 only at the end.
  virtual absl::StatusOr<size_t> Read(char* buf, size_t n) = 0;
};

// Opens `path` (a file or a pipe): gzip when its first two bytes are
// gzip's magic (*is_gzip set; members one after another are read as one
// stream), read block_size compressed bytes at a time; otherwise its plain
// bytes. Errors name the path: NOT_FOUND, PERMISSION_DENIED or INTERNAL
// when it cannot be opened or read, INVALID_ARGUMENT for a directory; the
// source's Read gives DATA_LOSS for a truncated or corrupt gzip stream.
absl::StatusOr<std::unique_ptr<ByteSource>> OpenSource(const std::string& path, size_t block_size,
                                                       bool* is_gzip);

}  // namespace libsvm_internal
}  // namespace ps

#endif  // PS_WORKER_TRAIN_LIBSVM_SOURCE_H_
