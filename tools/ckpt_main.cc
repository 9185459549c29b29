// ps_ckpt: looks at checkpoints without a server, and exports them.
//
//   ps_ckpt inspect DIR   every checkpoint under DIR: sequence, whether it is
//                         complete, its cut, base, tables, clocks and files
//   ps_ckpt verify DIR    checks every complete checkpoint's manifest, file
//                         sizes and block CRCs; names what is wrong; exits 1
//                         when the newest complete one does not verify
//   ps_ckpt export DIR OUT_DIR [--tables=a,b]
//                         writes the tables' values as NumPy files: a dense
//                         table as OUT_DIR/<table>.npy (float32 [num_keys,
//                         width]), a sparse one as OUT_DIR/<table>.npz (keys
//                         uint64 [n] ascending, values float32 [n, width]);
//                         a '/' in a table name makes a subdirectory. Every
//                         table, or those --tables names. Prints each file
//                         with its shape and size; exits 1 on any error
//                         (server/checkpoint_export.h)
//
// DIR is a --checkpoint_dir (it holds ckpt-<sequence> directories), or one
// ckpt-<sequence> directory. export uses the newest complete checkpoint that
// verifies under a --checkpoint_dir (saying which newer ones it skipped),
// or the one directory given, with the checkpoints it is incremental on.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "server/checkpoint/checkpoint_export.h"
#include "server/checkpoint/checkpoint_files.h"

ABSL_FLAG(std::vector<std::string>, tables, {},
          "export: the tables to export, comma-separated (default: all)");

namespace {

int Usage() {
  std::fprintf(stderr,
               "usage: ps_ckpt inspect|verify DIR, or ps_ckpt export DIR OUT_DIR "
               "[--tables=a,b] (see ps_ckpt --help)\n");
  return 2;
}

// DIR without trailing slashes; true with *sequence set when it is a
// ckpt-<sequence> directory.
bool IsCheckpointDir(const std::string& dir, std::string* base, uint64_t* sequence) {
  *base = dir;
  while (base->size() > 1 && base->back() == '/') base->pop_back();
  const size_t slash = base->find_last_of('/');
  return ps::ParseCheckpointDirName(slash == std::string::npos ? *base : base->substr(slash + 1),
                                    sequence);
}

// The ckpt-<sequence> directory DIR names: itself, or the newest valid one
// under it. Empty after printing why when there is none.
std::string CheckpointToExport(const std::string& dir) {
  std::string base;
  uint64_t sequence = 0;
  if (IsCheckpointDir(dir, &base, &sequence)) return base;
  std::vector<std::string> skipped;
  absl::StatusOr<ps::FoundCheckpoint> found = ps::FindNewestValidCheckpoint(base, &skipped);
  for (const std::string& s : skipped) {
    std::fprintf(stderr, "ps_ckpt: skipped %s\n", s.c_str());
  }
  if (!found.ok()) {
    std::fprintf(stderr, "ps_ckpt: %s\n", std::string(found.status().message()).c_str());
    return "";
  }
  return found->path;
}

std::string Shape(const std::vector<uint64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

int Export(const std::string& dir, const std::string& out_dir) {
  const std::string checkpoint = CheckpointToExport(dir);
  if (checkpoint.empty()) return 1;
  absl::StatusOr<ps::proto::CheckpointManifest> m = ps::ReadManifest(checkpoint);
  if (m.ok()) {
    std::printf("exporting %s (%s)\n", checkpoint.c_str(),
                m->base_sequence() == 0
                    ? "full"
                    : absl::StrCat("incremental on ", m->base_sequence()).c_str());
  }
  absl::StatusOr<std::vector<ps::ExportedTable>> written =
      ps::ExportCheckpoint(checkpoint, out_dir, absl::GetFlag(FLAGS_tables));
  if (!written.ok()) {
    std::fprintf(stderr, "ps_ckpt: export of %s: %s\n", checkpoint.c_str(),
                 std::string(written.status().message()).c_str());
    return 1;
  }
  for (const ps::ExportedTable& t : *written) {
    std::printf("wrote %s: table %s, %s, %svalues float32 %s, %llu bytes\n", t.path.c_str(),
                t.table.c_str(), t.sparse ? "sparse" : "dense",
                t.sparse ? absl::StrCat("keys uint64 [", t.shape[0], "], ").c_str() : "",
                Shape(t.shape).c_str(), static_cast<unsigned long long>(t.bytes));
  }
  return 0;
}

// The checkpoints DIR names: its ckpt-* directories, or DIR itself.
std::vector<ps::CheckpointDir> Checkpoints(const std::string& dir, std::string* error) {
  std::string base;
  uint64_t sequence = 0;
  if (IsCheckpointDir(dir, &base, &sequence)) {
    ps::CheckpointDir one;
    one.sequence = sequence;
    one.path = base;
    one.has_manifest = ps::ReadManifest(base).status().code() != absl::StatusCode::kNotFound;
    return {one};
  }
  absl::StatusOr<std::vector<ps::CheckpointDir>> all = ps::ListCheckpoints(base);
  if (!all.ok()) {
    *error = std::string(all.status().message());
    return {};
  }
  if (all->empty()) *error = absl::StrCat("no ckpt-* directories under ", base);
  return *all;
}

void Inspect(const ps::CheckpointDir& c) {
  std::printf("%s\n", c.path.c_str());
  if (!c.has_manifest) {
    std::printf("  incomplete: no MANIFEST (a write that did not finish)\n");
    return;
  }
  absl::StatusOr<ps::proto::CheckpointManifest> m = ps::ReadManifest(c.path);
  if (!m.ok()) {
    std::printf("  unreadable: %s\n", std::string(m.status().message()).c_str());
    return;
  }
  std::printf(
      "  sequence %llu, %s, cut %llu, taken %s\n", static_cast<unsigned long long>(m->sequence()),
      m->base_sequence() == 0 ? "full"
                              : absl::StrCat("incremental on ", m->base_sequence()).c_str(),
      static_cast<unsigned long long>(m->cut()),
      absl::FormatTime(absl::FromUnixMicros(m->unix_micros()), absl::UTCTimeZone()).c_str());
  std::printf("  placement: %u servers, slice_size %llu, virtual_nodes %u\n", m->num_servers(),
              static_cast<unsigned long long>(m->slice_size()), m->virtual_nodes());
  for (const ps::proto::TableDef& t : m->tables()) {
    std::printf("  table %s: %s, width %u%s\n", t.name().c_str(),
                t.kind() == ps::proto::TABLE_SPARSE ? "sparse" : "dense", t.width(),
                t.kind() == ps::proto::TABLE_SPARSE
                    ? ""
                    : absl::StrCat(", ", t.num_keys(), " keys").c_str());
  }
  for (const ps::proto::WorkerClock& w : m->clocks()) {
    std::printf("  clock: table %s worker %u at %llu\n", w.table().c_str(), w.worker_id(),
                static_cast<unsigned long long>(w.clock()));
  }
  uint64_t bytes = 0;
  for (const ps::proto::CheckpointFile& f : m->files()) {
    bytes += f.bytes();
    std::printf("  file %s: %llu bytes, %d blocks\n", f.name().c_str(),
                static_cast<unsigned long long>(f.bytes()), f.block_crc32_size());
  }
  for (const ps::proto::RowStoreSnapshot& r : m->row_snapshots()) {
    uint64_t snapshot_bytes = 0;
    for (const ps::proto::CheckpointFile& f : r.files()) snapshot_bytes += f.bytes();
    bytes += snapshot_bytes;
    std::printf("  row store snapshot %s: table %s, %d buckets, %d segment files, %llu bytes\n",
                r.dir().c_str(), r.table().c_str(), r.buckets_size(), r.files_size(),
                static_cast<unsigned long long>(snapshot_bytes));
  }
  std::printf("  %d files, %d row store snapshots, %llu bytes\n", m->files_size(),
              m->row_snapshots_size(), static_cast<unsigned long long>(bytes));
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "ps_ckpt inspect|verify DIR: lists or checks the checkpoints under DIR (a "
      "--checkpoint_dir, or one ckpt-<sequence> directory).\n"
      "ps_ckpt export DIR OUT_DIR [--tables=a,b]: writes the tables of the newest valid "
      "checkpoint under DIR (or of the ckpt-<sequence> directory DIR) as NumPy files: "
      "OUT_DIR/<table>.npy (dense) or .npz (sparse: keys, values). See docs/guide/tools.md.");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() < 2) return Usage();
  const std::string command = args[1];
  if (command == "export") {
    if (args.size() != 4) return Usage();
    return Export(args[2], args[3]);
  }
  if (args.size() != 3) return Usage();
  std::string error;
  const std::vector<ps::CheckpointDir> checkpoints = Checkpoints(args[2], &error);
  if (!error.empty()) {
    std::fprintf(stderr, "ps_ckpt: %s\n", error.c_str());
    return 1;
  }
  if (command == "inspect") {
    for (const ps::CheckpointDir& c : checkpoints) Inspect(c);
    return 0;
  }
  if (command != "verify") return Usage();
  int newest_complete_failed = -1;  // -1: none complete
  for (const ps::CheckpointDir& c : checkpoints) {
    if (!c.has_manifest) {
      std::printf("%s: incomplete (no MANIFEST), never loaded\n", c.path.c_str());
      continue;
    }
    const absl::Status s = ps::VerifyCheckpoint(c.path);
    std::printf("%s: %s\n", c.path.c_str(), s.ok() ? "OK" : std::string(s.message()).c_str());
    newest_complete_failed = s.ok() ? 0 : 1;
  }
  if (newest_complete_failed < 0) {
    std::fprintf(stderr, "ps_ckpt: no complete checkpoint\n");
    return 1;
  }
  return newest_complete_failed;
}
