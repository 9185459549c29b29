// Fuzzes ReadIdxFile (worker/train/idx_reader.h) on plain and gzip files.
// Input: a control byte, then the file's bytes.
//   bits 0-1  expected magic 0x000008NN with NN = 1 + (bits 0-1): 1..4 dims
//   bit 2     gzip-compress the bytes before writing them (so mutations of
//             the plain layout also reach the reader through zlib)
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_util.h"
#include "worker/train/idx_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > ps_fuzz::kMaxInputBytes) return 0;
  ps_fuzz::Input in(data, size);
  const uint8_t control = in.Byte();
  const uint32_t magic = 0x00000800u | (1u + (control & 3u));
  const bool gzip = (control & 4) != 0;
  const std::string path = ps_fuzz::WriteScratchFile("input.idx", in.Rest(), gzip);

  absl::StatusOr<ps::IdxFile> file = ps::ReadIdxFile(path, magic);
  ps_fuzz::Note("ReadIdxFile", file.status());
  if (!file.ok()) return 0;
  // The documented result: dims as the magic says, each >= 1, and exactly
  // product(dims) bytes.
  FUZZ_CHECK(file->dims.size() == (magic & 0xff));
  int64_t elements = 1;
  for (int64_t d : file->dims) {
    FUZZ_CHECK(d >= 1);
    elements *= d;
  }
  FUZZ_CHECK(static_cast<uint64_t>(elements) == file->data.size());
  return 0;
}
