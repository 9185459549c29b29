// LibsvmReader: streams binary-labelled sparse examples from a LibSVM /
// SVMlight text file, plain or gzip-compressed, that may be far larger than
// memory: it holds one read block (plus the line that straddles it) at a time.
// A reader owns its file; it is not thread-safe (one thread at a time; use
// one reader per thread to read several files in parallel).
//
// Grammar, one example per line:
//
//   label [qid:N] feature* [# comment]
//
//   label    a number equal to 0, 1, -1 or +1, in any decimal spelling ("0",
//            "1", "-1", "+1", "0.0", "1.0", "-1.0", "1e0"); > 0 becomes
//            label 1 and <= 0 label 0. Any other value (2, 0.5, "yes") is an
//            error: this reader is for binary classification.
//   qid:N    optional, only directly after the label; N an unsigned 64-bit
//            integer.
//   feature  index:value (LibSVM), or field:index:value (libffm: the
//            feature's field, as click data groups features by the column
//            they came from). A token with two colons after digits is the
//            second form. The line's first feature decides its form, and
//            every other feature of the line must have the same one (a line
//            that mixes them is an error: one of its features would silently
//            fall into field 0). Lines of a file may differ.
//   field    an unsigned decimal integer in [0, kMaxLibsvmField = 65535]:
//            fields index small per-field tables (a model's field sums), so
//            a larger number is far more likely a misplaced index than a
//            field.
//   index    an unsigned decimal integer in [0, 2^64 - 1] (0 allowed; indices
//            above 2^63 are fine: hashed feature ids use the whole range).
//   value    a finite decimal float ("1", "-0.5", "3e-2", "+2", ".5");
//            required.
//
// Tokens are separated by spaces or tabs; leading and trailing blanks, a
// trailing '\r' (CRLF files) and a last line without '\n' are accepted.
// Everything from '#' to the end of the line is a comment. Lines that are
// blank or only a comment are skipped (they count as lines, not examples).
// Features are returned in file order: unsorted and duplicate indices are
// kept as given (the model decides what duplicates mean).
#ifndef PS_WORKER_TRAIN_LIBSVM_READER_H_
#define PS_WORKER_TRAIN_LIBSVM_READER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ps {

namespace libsvm_internal {
class ByteSource;  // the plain file or gzip stream behind a reader (libsvm_source.h)
}  // namespace libsvm_internal

// The largest field of a field:index:value token.
inline constexpr uint32_t kMaxLibsvmField = 65535;

// One example. indices[i] and values[i] form feature i, in file order.
// For a line of field:index:value tokens fields[i] is feature i's field; for
// a line of index:value tokens `fields` is empty (no per-feature cost), and
// field(i) reads it as field 0 for every feature.
struct SparseExample {
  float label = 0;  // 0 or 1
  bool has_qid = false;
  uint64_t qid = 0;  // meaningful when has_qid
  int64_t line = 0;  // 1-based line of the file it was read from (for errors)
  std::vector<uint64_t> indices;
  std::vector<float> values;
  std::vector<uint16_t> fields;  // empty, or one per feature

  uint32_t field(size_t i) const { return fields.empty() ? 0 : fields[i]; }

  // Empties the example, keeping the vectors' capacity for reuse.
  void Clear() {
    label = 0;
    has_qid = false;
    qid = 0;
    line = 0;
    indices.clear();
    values.clear();
    fields.clear();
  }
};

struct LibsvmOptions {
  // Bytes read from the file per read() call (and, for gzip, the
  // decompressed bytes produced per step). Tests use tiny blocks so that
  // lines straddle block boundaries. Must be >= 1.
  size_t block_size = size_t{1} << 20;
  // A line longer than this (without '\n') fails with INVALID_ARGUMENT even
  // under skip_bad_lines: it is a sign of a binary or corrupt file, and
  // buffering it would take unbounded memory.
  size_t max_line_bytes = size_t{64} << 20;
  // When true, a malformed line is skipped and counted in bad_lines()
  // instead of failing Next(); the first max_bad_line_messages messages are
  // kept in bad_line_messages().
  bool skip_bad_lines = false;
  size_t max_bad_line_messages = 10;
};

class LibsvmReader {
 public:
  // Opens `path` and detects gzip from its first two bytes (0x1f 0x8b);
  // anything else is read as plain text. Every error message starts with
  // `path`. Errors:
  //   INVALID_ARGUMENT   options.block_size is 0, or path is a directory;
  //   NOT_FOUND          the file does not exist;
  //   PERMISSION_DENIED  it cannot be read for lack of permission;
  //   INTERNAL           it cannot be opened or read for another reason.
  static absl::StatusOr<std::unique_ptr<LibsvmReader>> Open(const std::string& path,
                                                            const LibsvmOptions& options = {});

  ~LibsvmReader();
  LibsvmReader(const LibsvmReader&) = delete;
  LibsvmReader& operator=(const LibsvmReader&) = delete;

  // Reads the next example into *out (cleared first; its vectors' capacity is
  // reused). Returns true with an example, false at the end of the file.
  // Errors:
  //   INVALID_ARGUMENT  a malformed line (unless skip_bad_lines), as
  //                     "PATH:LINE:COLUMN: expected ..., got '...'" with
  //                     1-based line and byte column; or a line longer than
  //                     max_line_bytes;
  //   DATA_LOSS         the gzip stream is corrupt or truncated;
  //   INTERNAL          read() failed.
  // After an error *out is unspecified and every later call returns the same
  // error, until Rewind().
  absl::StatusOr<bool> Next(SparseExample* out);

  // Reads up to `max` examples into *out, which is resized to the number read
  // (elements already in *out are reused to save allocations). At the end of
  // the file *out is empty. Errors: those of Next(); *out then holds the
  // examples read before the failing line.
  absl::Status NextBatch(size_t max, std::vector<SparseExample>* out);

  // Starts over from the beginning of the file (for another epoch) by
  // reopening it by path, so the path must still name the same data (a
  // regular file; a pipe cannot be rewound). Resets every counter, the bad
  // line messages and any sticky error. Errors: those of Open().
  absl::Status Rewind();

  const std::string& path() const { return path_; }
  bool is_gzip() const { return is_gzip_; }

  // Counters of the current pass (since Open or the last Rewind).
  // Lines consumed, including blank, comment and bad lines.
  int64_t lines_read() const { return lines_read_; }
  // Examples returned by Next / NextBatch.
  int64_t examples_read() const { return examples_read_; }
  // Bytes of text read from the file (after decompression), including up to
  // one block read ahead of the last example returned.
  int64_t bytes_read() const { return bytes_read_; }
  // Malformed lines skipped under skip_bad_lines.
  int64_t bad_lines() const { return bad_lines_; }
  // The error messages of the first max_bad_line_messages skipped lines.
  const std::vector<std::string>& bad_line_messages() const { return bad_line_messages_; }

 private:
  LibsvmReader(std::string path, const LibsvmOptions& options);

  // Opens path_ from its beginning and resets the parse state and counters.
  absl::Status Reset();
  // Points *line at the next line (without its '\n'); false at the end.
  absl::StatusOr<bool> NextLine(const char** line, size_t* size);
  // Reads one more block into buffer_ after compacting it.
  absl::Status Fill();

  const std::string path_;
  const LibsvmOptions options_;
  std::unique_ptr<libsvm_internal::ByteSource> source_;
  bool is_gzip_ = false;

  // Text not yet parsed is buffer_[begin_, end_); bytes before scanned_ are
  // known to hold no '\n'. The buffer grows only for lines longer than a block.
  std::vector<char> buffer_;
  size_t begin_ = 0;
  size_t end_ = 0;
  size_t scanned_ = 0;
  bool at_eof_ = false;
  absl::Status sticky_error_;

  int64_t lines_read_ = 0;
  int64_t examples_read_ = 0;
  int64_t bytes_read_ = 0;
  int64_t bad_lines_ = 0;
  std::vector<std::string> bad_line_messages_;
};

}  // namespace ps

#endif  // PS_WORKER_TRAIN_LIBSVM_READER_H_
