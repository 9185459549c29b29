#include "worker/train/libsvm_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <system_error>
#include <utility>

#include "absl/base/attributes.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "worker/train/libsvm_source.h"

namespace ps {
namespace {

// --- Parsing one line ---

enum class LineKind { kExample, kBlank, kBad };

// What is wrong with a bad line: where (0-based byte offset in the line) and
// the message after "PATH:LINE:COLUMN: ".
struct LineError {
  size_t offset = 0;
  std::string message;
};

inline bool IsBlank(char c) { return c == ' ' || c == '\t'; }
inline bool IsDigit(char c) { return static_cast<unsigned char>(c - '0') < 10; }

const char* TokenEnd(const char* p, const char* end) {
  while (p < end && !IsBlank(*p)) ++p;
  return p;
}

// A token for an error message: quoted, non-printable bytes escaped, and cut
// after 40 bytes (a binary file can make a "token" of megabytes).
std::string Quote(const char* b, const char* e) {
  constexpr size_t kMax = 40;
  const size_t n = static_cast<size_t>(e - b);
  std::string out = absl::StrCat("'", absl::CHexEscape(absl::string_view(b, std::min(n, kMax))));
  if (n > kMax) absl::StrAppend(&out, "...");
  out += "'";
  return out;
}

// Reads the decimal digits at the start of [p, end) into *v; returns the
// first byte after them. *overflow says whether they exceed 2^64 - 1 (*v is
// then meaningless). Inlined into the parsing loop, where it is most of the
// time spent.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline const char* ScanUint64(const char* p, const char* end,
                                                           uint64_t* v, bool* overflow) {
  // The first 19 digits cannot overflow (10^19 - 1 < 2^64 - 1); only those
  // after them (the 20th of large ids, or after leading zeros) are checked.
  const char* const unchecked_end = end - p > 19 ? p + 19 : end;
  uint64_t x = 0;
  for (; p < unchecked_end && IsDigit(*p); ++p) x = x * 10 + static_cast<uint64_t>(*p - '0');
  *overflow = false;
  if (p == unchecked_end) {
    constexpr uint64_t kMaxDiv10 = UINT64_MAX / 10;
    constexpr uint64_t kMaxMod10 = UINT64_MAX % 10;
    for (; p < end && IsDigit(*p); ++p) {
      const uint64_t d = static_cast<uint64_t>(*p - '0');
      if (x > kMaxDiv10 || (x == kMaxDiv10 && d > kMaxMod10)) *overflow = true;
      x = x * 10 + d;
    }
  }
  *v = x;
  return p;
}

// Parses the decimal digits [b, e) into *v; false when empty, not all
// digits, or above 2^64 - 1 (*overflow then says which).
bool ParseUint64(const char* b, const char* e, uint64_t* v, bool* overflow) {
  uint64_t x;
  *overflow = false;
  if (b == e || ScanUint64(b, e, &x, overflow) != e || *overflow) return false;
  *v = x;
  return true;
}

// A finite decimal number, with an optional leading '+' (from_chars takes
// only '-'). Values beyond float's range fail; tiny ones round towards 0.
bool ParseFloat(const char* b, const char* e, float* v) {
  if (b < e && *b == '+') {
    ++b;
    if (b < e && (*b == '-' || *b == '+')) return false;
  }
  if (b == e) return false;
  const std::from_chars_result r = std::from_chars(b, e, *v);
  if (r.ptr != e) return false;
  if (r.ec == std::errc::result_out_of_range) {
    // float under- or overflow: decide through double, whose range is wider.
    double d;
    const std::from_chars_result rd = std::from_chars(b, e, d);
    if (rd.ec != std::errc() || rd.ptr != e) return false;
    *v = static_cast<float>(d);
  } else if (r.ec != std::errc()) {
    return false;
  }
  return std::isfinite(*v);
}

// A label: a number equal to -1, 0 or 1. The common spellings are matched
// without a float parse.
bool ParseLabel(const char* b, const char* e, float* label) {
  const size_t n = static_cast<size_t>(e - b);
  if (n == 1 && (*b == '0' || *b == '1')) {
    *label = *b == '1' ? 1.0f : 0.0f;
    return true;
  }
  if (n == 2 && b[1] == '1' && (*b == '-' || *b == '+')) {
    *label = *b == '+' ? 1.0f : 0.0f;
    return true;
  }
  float v;
  if (!ParseFloat(b, e, &v)) return false;
  if (v == 1.0f) {
    *label = 1.0f;
    return true;
  }
  if (v == 0.0f || v == -1.0f) {
    *label = 0.0f;
    return true;
  }
  return false;
}

constexpr char kLabelExpectation[] = "expected a label (0, 1, -1 or +1)";

// Explains why [tok, tok_end), where a feature was expected, is not one. A
// token with two or more colons is judged as field:index:value, one with a
// single colon as index:value, one without as the form the line's earlier
// features have (`line_has_fields`). The column points at the part at fault.
LineError FeatureError(const char* line, const char* tok, const char* tok_end,
                       bool line_has_fields) {
  LineError error;
  error.offset = static_cast<size_t>(tok - line);
  const std::string got = Quote(tok, tok_end);
  const char* colon = static_cast<const char*>(std::memchr(tok, ':', tok_end - tok));
  const char* form = line_has_fields ? "field:index:value" : "index:value";
  if (colon == nullptr) {
    error.message = absl::StrCat("expected ", form, ", got ", got);
    return error;
  }
  if (colon - tok == 3 && std::memcmp(tok, "qid", 3) == 0) {
    error.message =
        absl::StrCat("expected ", form, ", got ", got, " (qid:N must directly follow the label)");
    return error;
  }
  const char* second = static_cast<const char*>(std::memchr(colon + 1, ':', tok_end - colon - 1));
  uint64_t number;
  bool overflow;
  if (second != nullptr) {
    form = "field:index:value";
    const bool parsed = ParseUint64(tok, colon, &number, &overflow);
    if (!parsed && !overflow) {
      error.message =
          absl::StrCat("expected field:index:value with an unsigned integer field, got ", got);
      return error;
    }
    if (overflow || number > kMaxLibsvmField) {
      error.message =
          absl::StrCat("expected field:index:value with field <= ", kMaxLibsvmField, ", got ", got);
      return error;
    }
    error.offset = static_cast<size_t>(colon + 1 - line);
    tok = colon + 1;  // from here on as for index:value
    colon = second;
  }
  if (!ParseUint64(tok, colon, &number, &overflow)) {
    error.message =
        overflow ? absl::StrCat("expected ", form,
                                " with index <= 18446744073709551615 (2^64-1), got ", got)
                 : absl::StrCat("expected ", form, " with an unsigned integer index, got ", got);
    return error;
  }
  error.offset = static_cast<size_t>(colon + 1 - line);
  error.message = absl::StrCat("expected ", form, " with a finite number as value, got ", got);
  return error;
}

// The error of a feature [tok, tok_end) whose form is not the line's. Out of
// line: it keeps the string building out of the parsing loop.
ABSL_ATTRIBUTE_NOINLINE LineError MixedFormError(const char* line, const char* tok,
                                                 const char* tok_end, bool line_has_fields) {
  LineError error;
  error.offset = static_cast<size_t>(tok - line);
  error.message = absl::StrCat("expected ", line_has_fields ? "field:index:value" : "index:value",
                               ", got ", Quote(tok, tok_end), ": the line's first feature ",
                               line_has_fields ? "has a" : "has no",
                               " field, and a line may not mix index:value and field:index:value");
  return error;
}

// The label and optional qid of a line, from *p (at the first non-blank
// character; left after them). False with *error set when they are bad.
bool ParseHead(const char* line, const char* end, const char** p, SparseExample* out,
               LineError* error) {
  const char* tok_end = TokenEnd(*p, end);
  if (!ParseLabel(*p, tok_end, &out->label)) {
    error->offset = static_cast<size_t>(*p - line);
    const bool looks_like_feature = std::memchr(*p, ':', tok_end - *p) != nullptr;
    error->message =
        absl::StrCat(kLabelExpectation, looks_like_feature ? " first" : "", ", got ",
                     Quote(*p, tok_end), looks_like_feature ? "; is the label missing?" : "");
    return false;
  }
  *p = tok_end;
  while (*p < end && IsBlank(**p)) ++*p;
  if (end - *p >= 4 && std::memcmp(*p, "qid:", 4) == 0) {
    tok_end = TokenEnd(*p, end);
    bool overflow;
    if (!ParseUint64(*p + 4, tok_end, &out->qid, &overflow)) {
      error->offset = static_cast<size_t>(*p - line);
      error->message = absl::StrCat("expected qid:N with N an unsigned 64-bit integer, got ",
                                    Quote(*p, tok_end));
      return false;
    }
    out->has_qid = true;
    *p = tok_end;
  }
  return true;
}

// The features of a line from p to end (after its label and qid).
LineKind ParseFeatures(const char* line, const char* p, const char* end, SparseExample* out,
                       LineError* error) {
  // Whether the line's features are field:index:value, set by its first.
  bool line_has_fields = false;
  for (bool first_feature = true;; first_feature = false) {
    while (p < end && IsBlank(*p)) ++p;
    if (p == end) return LineKind::kExample;
    const char* tok = p;
    uint64_t number;
    bool overflow;
    p = ScanUint64(p, end, &number, &overflow);
    if (p == tok || p == end || *p != ':' || overflow) {
      *error = FeatureError(line, tok, TokenEnd(tok, end), line_has_fields);
      return LineKind::kBad;
    }
    ++p;  // ':'
    // Binary features ("index:1") are the common case: no field, and no
    // float to parse.
    auto is_one = [end](const char* v) {
      return v < end && *v == '1' && (v + 1 == end || IsBlank(v[1]));
    };
    uint64_t index = number;
    bool has_field = false;
    float value = 1.0f;
    bool have_value = is_one(p);
    if (have_value) {
      ++p;
    } else {
      // Digits and a second ':' make it field:index:value; anything else
      // after the first ':' is a value.
      const char* after = ScanUint64(p, end, &index, &overflow);
      if (after > p && after < end && *after == ':') {
        if (overflow || number > kMaxLibsvmField) {
          *error = FeatureError(line, tok, TokenEnd(tok, end), true);
          return LineKind::kBad;
        }
        has_field = true;
        p = after + 1;
      } else {
        index = number;
      }
    }
    if (first_feature) {
      line_has_fields = has_field;
    } else if (has_field != line_has_fields) {
      *error = MixedFormError(line, tok, TokenEnd(tok, end), line_has_fields);
      return LineKind::kBad;
    }
    if (!have_value) {
      if (is_one(p)) {
        ++p;
      } else {
        const char* value_begin = p;
        p = TokenEnd(p, end);
        if (!ParseFloat(value_begin, p, &value)) {
          *error = FeatureError(line, tok, p, line_has_fields);
          return LineKind::kBad;
        }
      }
    }
    out->indices.push_back(index);
    out->values.push_back(value);
    if (has_field) out->fields.push_back(static_cast<uint16_t>(number));
  }
}

// Parses one line (without '\n') into *out, which the caller has cleared.
LineKind ParseLine(const char* line, size_t size, SparseExample* out, LineError* error) {
  const char* end = line + size;
  if (end > line && end[-1] == '\r') --end;
  if (const void* hash = std::memchr(line, '#', end - line)) end = static_cast<const char*>(hash);
  const char* p = line;
  while (p < end && IsBlank(*p)) ++p;
  if (p == end) return LineKind::kBlank;
  if (!ParseHead(line, end, &p, out, error)) return LineKind::kBad;
  return ParseFeatures(line, p, end, out, error);
}

}  // namespace

LibsvmReader::LibsvmReader(std::string path, const LibsvmOptions& options)
    : path_(std::move(path)), options_(options) {}

LibsvmReader::~LibsvmReader() = default;

absl::StatusOr<std::unique_ptr<LibsvmReader>> LibsvmReader::Open(const std::string& path,
                                                                 const LibsvmOptions& options) {
  if (options.block_size == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": LibsvmOptions.block_size is 0; expected at least 1 byte"));
  }
  std::unique_ptr<LibsvmReader> reader(new LibsvmReader(path, options));
  absl::Status s = reader->Reset();
  if (!s.ok()) return s;
  return reader;
}

absl::Status LibsvmReader::Reset() {
  source_.reset();
  begin_ = end_ = scanned_ = 0;
  at_eof_ = false;
  sticky_error_ = absl::OkStatus();
  lines_read_ = examples_read_ = bytes_read_ = bad_lines_ = 0;
  bad_line_messages_.clear();
  absl::StatusOr<std::unique_ptr<libsvm_internal::ByteSource>> source =
      libsvm_internal::OpenSource(path_, options_.block_size, &is_gzip_);
  if (!source.ok()) {
    // Later calls report the failure instead of reading a closed source.
    sticky_error_ = source.status();
    return source.status();
  }
  source_ = std::move(*source);
  return absl::OkStatus();
}

absl::Status LibsvmReader::Rewind() { return Reset(); }

absl::Status LibsvmReader::Fill() {
  const size_t pending = end_ - begin_;
  if (pending >= options_.max_line_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ":", lines_read_ + 1, ": line is longer than ", options_.max_line_bytes,
                     " bytes (LibsvmOptions.max_line_bytes); is this a LibSVM text file?"));
  }
  if (begin_ > 0) {
    std::memmove(buffer_.data(), buffer_.data() + begin_, pending);
    scanned_ -= begin_;
    begin_ = 0;
    end_ = pending;
  }
  const size_t block = options_.block_size;
  if (buffer_.size() < end_ + block) buffer_.resize(end_ + block);
  absl::StatusOr<size_t> got = source_->Read(buffer_.data() + end_, block);
  if (!got.ok()) return got.status();
  if (*got == 0) at_eof_ = true;
  end_ += *got;
  bytes_read_ += static_cast<int64_t>(*got);
  return absl::OkStatus();
}

absl::StatusOr<bool> LibsvmReader::NextLine(const char** line, size_t* size) {
  for (;;) {
    const char* base = buffer_.data();
    if (const void* found = std::memchr(base + scanned_, '\n', end_ - scanned_)) {
      const char* newline = static_cast<const char*>(found);
      *line = base + begin_;
      *size = static_cast<size_t>(newline - *line);
      begin_ = scanned_ = static_cast<size_t>(newline - base) + 1;
      return true;
    }
    scanned_ = end_;
    if (at_eof_) {
      if (begin_ == end_) return false;
      // The last line has no '\n'.
      *line = base + begin_;
      *size = end_ - begin_;
      begin_ = end_;
      return true;
    }
    absl::Status s = Fill();
    if (!s.ok()) return s;
  }
}

absl::StatusOr<bool> LibsvmReader::Next(SparseExample* out) {
  if (!sticky_error_.ok()) return sticky_error_;
  for (;;) {
    const char* line;
    size_t size;
    absl::StatusOr<bool> got = NextLine(&line, &size);
    if (!got.ok()) {
      sticky_error_ = got.status();
      return sticky_error_;
    }
    if (!*got) return false;
    ++lines_read_;
    out->Clear();
    LineError error;
    switch (ParseLine(line, size, out, &error)) {
      case LineKind::kExample:
        ++examples_read_;
        out->line = lines_read_;
        return true;
      case LineKind::kBlank:
        continue;
      case LineKind::kBad:
        break;
    }
    absl::Status bad = absl::InvalidArgumentError(
        absl::StrCat(path_, ":", lines_read_, ":", error.offset + 1, ": ", error.message));
    if (!options_.skip_bad_lines) {
      sticky_error_ = bad;
      return bad;
    }
    ++bad_lines_;
    if (bad_line_messages_.size() < options_.max_bad_line_messages) {
      bad_line_messages_.emplace_back(bad.message());
    }
  }
}

absl::Status LibsvmReader::NextBatch(size_t max, std::vector<SparseExample>* out) {
  size_t n = 0;
  absl::Status status;
  while (n < max) {
    if (n == out->size()) out->emplace_back();
    absl::StatusOr<bool> got = Next(&(*out)[n]);
    if (!got.ok()) {
      status = got.status();
      break;
    }
    if (!*got) break;
    ++n;
  }
  out->resize(n);
  return status;
}

}  // namespace ps
