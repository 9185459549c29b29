#include "server/checkpoint/checkpoint_test_records.h"

#include "absl/strings/str_cat.h"
#include "server/checkpoint/checkpoint_files.h"
#include "server/checkpoint/checkpoint_records.h"

namespace ps {
namespace {

template <typename T>
void AppendRaw(const std::vector<T>& v, std::string* out) {
  out->append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

}  // namespace

std::string DenseRecord(const std::string& table, uint64_t slice, uint64_t first_key,
                        uint32_t width, const std::vector<float>& values, uint32_t state_per_row,
                        const std::vector<float>& state) {
  proto::SliceHeader h;
  h.set_table(table);
  h.set_slice(slice);
  h.set_first_key(first_key);
  h.set_num_rows(width == 0 ? 0 : values.size() / width);
  h.set_width(width);
  h.set_floats_per_row(width + state_per_row);
  std::string out;
  AppendSliceHeader(h, &out);
  AppendRaw(values, &out);
  AppendRaw(state, &out);
  return out;
}

std::string SparseRecord(const std::string& table, uint64_t slice, uint32_t width,
                         uint32_t floats_per_row, bool delta, const std::vector<uint64_t>& keys,
                         const std::vector<float>& rows, const std::vector<uint64_t>& erased) {
  proto::SliceHeader h;
  h.set_table(table);
  h.set_slice(slice);
  h.set_sparse(true);
  h.set_num_rows(keys.size());
  h.set_width(width);
  h.set_floats_per_row(floats_per_row);
  h.set_delta(delta);
  h.set_num_erased(erased.size());
  std::string out;
  AppendSliceHeader(h, &out);
  AppendRaw(keys, &out);
  AppendRaw(rows, &out);
  AppendRaw(erased, &out);
  return out;
}

absl::Status WriteTestCheckpoint(const std::string& root, uint64_t sequence, uint64_t base_sequence,
                                 const std::vector<proto::TableDef>& tables,
                                 const std::vector<std::pair<std::string, std::string>>& files) {
  const std::string dir = absl::StrCat(root, "/", CheckpointDirName(sequence));
  proto::CheckpointManifest m;
  m.set_sequence(sequence);
  m.set_base_sequence(base_sequence);
  m.set_cut(10 * sequence);
  m.set_num_servers(2);
  m.set_slice_size(4);
  m.set_virtual_nodes(16);
  for (const proto::TableDef& t : tables) *m.add_tables() = t;
  for (const auto& [name, bytes] : files) {
    absl::StatusOr<std::unique_ptr<CheckpointFileWriter>> w =
        CheckpointFileWriter::Create(dir, name, 1024);
    if (!w.ok()) return w.status();
    if (absl::Status s = (*w)->Append(bytes); !s.ok()) return s;
    absl::StatusOr<proto::CheckpointFile> entry = (*w)->Finish();
    if (!entry.ok()) return entry.status();
    *m.add_files() = *entry;
  }
  return CommitCheckpoint(dir, m);
}

}  // namespace ps
