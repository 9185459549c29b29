// Fuzzes ForEachSliceRecord (server/checkpoint_records.h) on a checkpoint
// data file's bytes. Input: the file's bytes. Every record passed on is read
// the way a restore reads it (keys, rows, erased keys, dense floats), so
// AddressSanitizer checks that the payload really holds what the header
// announces.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "server/checkpoint/checkpoint_records.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > ps_fuzz::kMaxInputBytes) return 0;
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  uint64_t records = 0, sink = 0;
  std::vector<float> row;
  absl::Status s = ps::ForEachSliceRecord(bytes, "fuzz", [&](const ps::SliceRecord& r) {
    ++records;
    const ps::proto::SliceHeader& h = r.header;
    absl::StatusOr<uint64_t> expected = ps::SlicePayloadBytes(h);
    FUZZ_CHECK(expected.ok());
    FUZZ_CHECK(r.payload.size() == *expected);
    FUZZ_CHECK(h.width() >= 1 && h.width() <= h.floats_per_row());
    const uint64_t fpr = h.floats_per_row();
    // floats_per_row is bounded by the payload only when there are rows.
    if (h.num_rows() > 0) row.resize(fpr);
    if (h.sparse()) {
      for (uint64_t i = 0; i < h.num_rows(); ++i) {
        sink += r.Key(i);
        r.CopyRow(i, row.data());
        sink += static_cast<uint64_t>(row[0] != 0);
      }
      for (uint64_t i = 0; i < h.num_erased(); ++i) sink += r.ErasedKey(i);
    } else {
      FUZZ_CHECK(h.num_erased() == 0 && !h.delta());
      // Values, then state, in row-sized chunks as a restore copies them.
      const uint64_t total = h.num_rows() * fpr;
      for (uint64_t first = 0; first < total; first += fpr) {
        r.CopyFloats(first, fpr, row.data());
        sink += static_cast<uint64_t>(row[0] != 0);
      }
    }
    return absl::OkStatus();
  });
  ps_fuzz::Note(records > 0 ? "ForEachSliceRecord (some records)" : "ForEachSliceRecord", s);
  if (!s.ok()) FUZZ_CHECK(s.code() == absl::StatusCode::kDataLoss);
  (void)sink;
  (void)records;
  return 0;
}
