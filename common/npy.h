// NumPy's .npy (format version 1.0) and .npz files, written from memory for
// NumPy to read (np.load): what `ps_ckpt export` produces. Arrays are
// little-endian float32 ('<f4') or uint64 ('<u8'), C order, any shape. An
// .npz is a ZIP archive of .npy members, stored (not compressed) and without
// ZIP64, so each member and the whole archive stay under 4 GiB.
//
// Every file is written as "<path>.tmp" and renamed to `path` once complete:
// a failed or interrupted write never leaves a truncated array under the
// final name (an existing file there is replaced only on success).
// Thread-compatible: one writer per file.
#ifndef PS_COMMON_NPY_H_
#define PS_COMMON_NPY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace ps {

namespace npy_internal {
class OutputFile;  // npy.cc: a "<path>.tmp" file renamed to its path when complete
}  // namespace npy_internal

enum class NpyType { kFloat32, kUint64 };

// An array to write: a view of the caller's memory (kept alive by the
// caller until the write returns), its element type and shape.
struct NpyArray {
  NpyType type = NpyType::kFloat32;
  std::vector<uint64_t> shape;  // C order; {} is a scalar
  absl::string_view bytes;      // product(shape) elements, host (= little-endian) order

  static NpyArray Float32(absl::Span<const float> values, std::vector<uint64_t> shape);
  static NpyArray Uint64(absl::Span<const uint64_t> values, std::vector<uint64_t> shape);
};

// The .npy header of `array`: "\x93NUMPY", version 1.0, the header length
// (uint16 little-endian), then the dict, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (10, 3), }
// padded with spaces and ended by '\n' so that the data that follows starts
// at a multiple of 64 bytes. INVALID_ARGUMENT when array.bytes does not hold
// exactly product(shape) elements (or the product overflows).
absl::StatusOr<std::string> NpyHeader(const NpyArray& array);

// Writes `array` to `path` as an .npy file; returns the bytes written.
// Errors: those of NpyHeader; the system's error naming the path.
absl::StatusOr<uint64_t> WriteNpy(const std::string& path, const NpyArray& array);

// An .npz archive being written: Add each member, then Finish. Destroyed
// before Finish, it removes its temporary file and leaves `path` as it was.
class NpzWriter {
 public:
  // Opens path + ".tmp". Errors: the system's error naming the path.
  static absl::StatusOr<std::unique_ptr<NpzWriter>> Create(const std::string& path);
  ~NpzWriter();
  NpzWriter(const NpzWriter&) = delete;
  NpzWriter& operator=(const NpzWriter&) = delete;

  // Adds member "<name>.npy" (np.load(path)[name]). Errors: INVALID_ARGUMENT
  // for an empty name, a name already added or those of NpyHeader;
  // OUT_OF_RANGE when the archive would reach 4 GiB (ZIP64 is not written);
  // the system's error naming the path. After an error the writer is not
  // usable: destroy it.
  absl::Status Add(const std::string& name, const NpyArray& array);

  // Writes the central directory and the end record and renames the file
  // to its path. Returns the archive's size in bytes. Call once; the
  // writer is done after it.
  absl::StatusOr<uint64_t> Finish();

 private:
  struct Member {
    std::string name;  // in the archive: "<name>.npy"
    uint32_t crc32;
    uint32_t bytes;
    uint32_t offset;  // of its local file header
  };
  explicit NpzWriter(std::unique_ptr<npy_internal::OutputFile> file);

  std::unique_ptr<npy_internal::OutputFile> file_;
  std::vector<Member> members_;
  uint64_t offset_ = 0;  // bytes written so far
};

}  // namespace ps

#endif  // PS_COMMON_NPY_H_
