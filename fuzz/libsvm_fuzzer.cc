// Fuzzes LibsvmReader (worker/train/libsvm_reader.h): LibSVM and
// field:index:value (libffm) lines, plain or gzip.
// Input: a control byte, then the file's bytes.
//   bit 0     options.skip_bad_lines
//   bit 1     gzip-compress the bytes before writing them
//   bits 2-3  options.block_size: 3, 16, 4096 or the default 1 MiB (small
//             blocks make lines straddle reads)
//   bit 4     options.max_line_bytes = 64 (else the default)
//   bit 5     read with NextBatch(7) instead of Next
//   bit 6     Rewind and read again: the second pass must match the first
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fuzz/fuzz_util.h"
#include "worker/train/libsvm_reader.h"

namespace {

struct Pass {
  bool ok = true;
  int64_t examples = 0, lines = 0, bad_lines = 0;
  uint64_t digest = 0;  // of labels, indices and fields
};

void CheckExample(const ps::SparseExample& e, int64_t* last_line, Pass* pass) {
  // Documented: label 0 or 1, one value per index, fields empty or one per
  // feature (each <= kMaxLibsvmField), finite values, lines increasing.
  FUZZ_CHECK(e.label == 0.0f || e.label == 1.0f);
  FUZZ_CHECK(e.indices.size() == e.values.size());
  FUZZ_CHECK(e.fields.empty() || e.fields.size() == e.indices.size());
  for (float v : e.values) FUZZ_CHECK(std::isfinite(v));
  for (uint16_t f : e.fields) FUZZ_CHECK(f <= ps::kMaxLibsvmField);
  FUZZ_CHECK(e.line > *last_line);
  *last_line = e.line;
  uint64_t h = pass->digest * 1000003u + (e.label == 1.0f ? 1 : 2) + (e.has_qid ? e.qid : 7);
  for (size_t i = 0; i < e.indices.size(); ++i) h = h * 31 + e.indices[i] + e.field(i);
  pass->digest = h;
  ++pass->examples;
}

Pass ReadAll(ps::LibsvmReader* reader, bool batched) {
  Pass pass;
  int64_t last_line = 0;
  if (batched) {
    std::vector<ps::SparseExample> batch;
    for (;;) {
      absl::Status s = reader->NextBatch(7, &batch);
      for (const ps::SparseExample& e : batch) CheckExample(e, &last_line, &pass);
      if (!s.ok()) {
        pass.ok = false;
        // The error is sticky.
        FUZZ_CHECK(reader->NextBatch(7, &batch).code() == s.code());
        break;
      }
      if (batch.empty()) break;
      FUZZ_CHECK(batch.size() <= 7);
    }
  } else {
    ps::SparseExample e;
    for (;;) {
      absl::StatusOr<bool> more = reader->Next(&e);
      if (!more.ok()) {
        pass.ok = false;
        FUZZ_CHECK(reader->Next(&e).status().code() == more.status().code());
        break;
      }
      if (!*more) break;
      CheckExample(e, &last_line, &pass);
    }
  }
  pass.lines = reader->lines_read();
  pass.bad_lines = reader->bad_lines();
  FUZZ_CHECK(reader->examples_read() == pass.examples);
  FUZZ_CHECK(reader->bad_line_messages().size() <= 10);
  FUZZ_CHECK(static_cast<int64_t>(reader->bad_line_messages().size()) <= pass.bad_lines);
  return pass;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > ps_fuzz::kMaxInputBytes) return 0;
  ps_fuzz::Input in(data, size);
  const uint8_t control = in.Byte();
  ps::LibsvmOptions options;
  options.skip_bad_lines = (control & 1) != 0;
  const bool gzip = (control & 2) != 0;
  static constexpr size_t kBlocks[] = {3, 16, 4096, size_t{1} << 20};
  options.block_size = kBlocks[(control >> 2) & 3];
  if (control & 16) options.max_line_bytes = 64;
  const bool batched = (control & 32) != 0;
  const bool rewind = (control & 64) != 0;

  const std::string path = ps_fuzz::WriteScratchFile("input.svm", in.Rest(), gzip);
  absl::StatusOr<std::unique_ptr<ps::LibsvmReader>> reader = ps::LibsvmReader::Open(path, options);
  if (!reader.ok()) return 0;
  const Pass first = ReadAll(reader->get(), batched);
  ps_fuzz::Note(first.ok ? "LibsvmReader: all read" : "LibsvmReader: failed",
                absl::StrCat(first.examples, " examples, ", first.lines, " lines, ",
                             first.bad_lines, " bad"));
  if (rewind) {
    if (!(*reader)->Rewind().ok()) return 0;
    const Pass second = ReadAll(reader->get(), batched);
    FUZZ_CHECK(second.ok == first.ok);
    FUZZ_CHECK(second.examples == first.examples);
    FUZZ_CHECK(second.lines == first.lines);
    FUZZ_CHECK(second.bad_lines == first.bad_lines);
    FUZZ_CHECK(second.digest == first.digest);
  }
  return 0;
}
