// Helpers shared by the fuzz targets: a per-process scratch path for
// parsers that read files, and a little reader over the fuzz input.
#ifndef PS_FUZZ_FUZZ_UTIL_H_
#define PS_FUZZ_FUZZ_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ps_fuzz {

// Inputs larger than this are skipped, so one run stays fast.
inline constexpr size_t kMaxInputBytes = size_t{1} << 20;

// Aborts with a message: a broken invariant of the code under test (a real
// bug, reported by libFuzzer as a crash).
[[noreturn]] void Fail(const char* what);
#define FUZZ_CHECK(cond)                                             \
  do {                                                               \
    if (!(cond)) ::ps_fuzz::Fail(__FILE__ ": check failed: " #cond); \
  } while (0)

// With PS_FUZZ_VERBOSE set in the environment, prints what a parse of
// this input returned (for checking that seeds reach deep code):
//   PS_FUZZ_VERBOSE=1 bazel-bin/fuzz/idx_fuzzer_corpus_test fuzz/corpus/idx
void Note(const char* what, const absl::Status& status);
void Note(const char* what, const std::string& detail);

// A directory private to this process ($TMPDIR or /tmp), created on first
// use and removed at exit. The same path every call.
const std::string& ScratchDir();
// Writes bytes to ScratchDir()/name (truncating) and returns the path.
// With gzip, writes them gzip-compressed. Aborts if the write fails (an
// environment problem, not a parser bug).
std::string WriteScratchFile(const std::string& name, absl::string_view bytes, bool gzip = false);

// Consumes the fuzz input from the front.
class Input {
 public:
  Input(const uint8_t* data, size_t size)
      : data_(reinterpret_cast<const char*>(data)), size_(size) {}
  size_t remaining() const { return size_ - pos_; }
  uint8_t Byte() { return pos_ < size_ ? static_cast<uint8_t>(data_[pos_++]) : 0; }
  uint16_t U16() { return static_cast<uint16_t>(Byte() | (Byte() << 8)); }
  // The next n bytes (fewer at the end).
  absl::string_view Bytes(size_t n) {
    if (n > remaining()) n = remaining();
    absl::string_view out(data_ + pos_, n);
    pos_ += n;
    return out;
  }
  absl::string_view Rest() { return Bytes(remaining()); }
  // A piece ended by a 0xff 0xfe marker (or the end of the input).
  absl::string_view Piece() {
    absl::string_view rest(data_ + pos_, remaining());
    const size_t end = rest.find("\xff\xfe");
    if (end == absl::string_view::npos) return Rest();
    pos_ += end + 2;
    return rest.substr(0, end);
  }

 private:
  const char* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace ps_fuzz

#endif  // PS_FUZZ_FUZZ_UTIL_H_
