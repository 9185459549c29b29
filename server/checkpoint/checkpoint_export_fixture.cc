// Test fixture for `ps_ckpt export` (ckpt_export_test.sh): writes under
// argv[1] a chain of checkpoints in the real data-file format, as servers
// with AdaGrad-like optimizer state would:
//   ckpt-0000000001  full, in two data files:
//     "model/w" dense, 10 keys, width 3, 3 state floats per key, slices of 4
//               keys: key k holds (k, k + 0.25, k + 0.5), state 0.1 + k;
//     "bias"    dense, 3 keys, width 1: 9, 8, 7 (no state);
//     "emb"     sparse, width 2, 4 buckets, rows of 2 values + 2 state + 1
//               metadata float: the keys and values of kSparse below;
//   ckpt-0000000002  incremental on 1: "model/w" slice 1 (keys 4..7)
//               replaced, each value + 100; "emb" deltas: key 42 rewritten
//               to (42.25, -42.25), key 77 added as (7.5, -7.5), key 17 erased;
//   ckpt-0000000003  an interrupted write: a data file, no MANIFEST.
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/placement.h"
#include "server/checkpoint/checkpoint_files.h"
#include "server/checkpoint/checkpoint_test_records.h"
#include "tests/test_util/table_defs.h"

namespace ps {
namespace {

constexpr uint64_t kBuckets = 4;

struct SparseRow {
  uint64_t key;
  float a, b;
};
// 2^53 + 1 is not a float64: it survives only as uint64.
const SparseRow kSparse[] = {
    {3, 0.5f, -0.5f},
    {17, 1.5f, -1.5f},
    {42, 2.5f, -2.5f},
    {1000003, 3.5f, -3.5f},
    {(uint64_t{1} << 53) + 1, 4.5f, -4.5f},
    {~uint64_t{0}, 5.5f, -5.5f},
};

std::vector<proto::TableDef> Tables() {
  proto::TableDef w = DenseTableDef("model/w", 10, 3);
  w.set_optimizer(proto::OPT_ADAGRAD);
  return {w, DenseTableDef("bias", 3, 1), SparseTableDef("emb", 2, kBuckets)};
}

// Slice `slice` of model/w: keys [4 * slice, ...) up to key 9.
std::string DenseSlice(uint64_t slice, float add) {
  std::vector<float> values, state;
  for (uint64_t k = 4 * slice; k < 4 * slice + 4 && k < 10; ++k) {
    for (int j = 0; j < 3; ++j) {
      values.push_back(add + k + 0.25f * j);
      state.push_back(0.1f + k);
    }
  }
  return DenseRecord("model/w", slice, 4 * slice, 3, values, 3, state);
}

// One record per bucket of the given rows and erased keys.
std::string SparseRecords(const std::vector<SparseRow>& rows, const std::vector<uint64_t>& erased,
                          bool delta) {
  struct Bucket {
    std::vector<uint64_t> keys, erased;
    std::vector<float> rows;
  };
  std::map<uint64_t, Bucket> buckets;
  for (const SparseRow& r : rows) {
    Bucket& b = buckets[Placement::SparseSliceOf(r.key, kBuckets)];
    b.keys.push_back(r.key);
    b.rows.insert(b.rows.end(), {r.a, r.b, 0.1f, 0.1f, 1234.0f});  // state, then metadata
  }
  for (uint64_t key : erased)
    buckets[Placement::SparseSliceOf(key, kBuckets)].erased.push_back(key);
  std::string out;
  for (const auto& [slice, b] : buckets) {
    out += SparseRecord("emb", slice, 2, 5, delta, b.keys, b.rows, b.erased);
  }
  return out;
}

int Run(const std::string& root) {
  const std::vector<proto::TableDef> tables = Tables();
  const std::vector<SparseRow> rows(std::begin(kSparse), std::end(kSparse));
  absl::Status s = WriteTestCheckpoint(
      root, 1, 0, tables,
      {{"server-0-data", DenseSlice(0, 0) + DenseSlice(2, 0) + SparseRecords(rows, {}, false)},
       {"server-1-data", DenseSlice(1, 0) + DenseRecord("bias", 0, 0, 1, {9, 8, 7}, 0, {})}});
  if (s.ok()) {
    s = WriteTestCheckpoint(
        root, 2, 1, tables,
        {{"server-0-data", SparseRecords({{42, 42.25f, -42.25f}, {77, 7.5f, -7.5f}}, {17}, true)},
         {"server-1-data", DenseSlice(1, 100)}});
  }
  if (s.ok()) {
    auto writer = CheckpointFileWriter::Create(absl::StrCat(root, "/", CheckpointDirName(3)),
                                               "server-0-data");
    s = writer.ok() ? (*writer)->Append(DenseSlice(0, 500)) : writer.status();
    if (s.ok()) s = (*writer)->Finish().status();
  }
  if (!s.ok()) {
    std::fprintf(stderr, "checkpoint_export_fixture: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace ps

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: checkpoint_export_fixture ROOT\n");
    return 2;
  }
  return ps::Run(argv[1]);
}
