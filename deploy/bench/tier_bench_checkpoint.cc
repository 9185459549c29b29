#include "deploy/bench/tier_bench_checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/checkpoint/checkpoint_files.h"
#include "server/checkpoint/checkpoint_records.h"
#include "server/checkpoint/row_snapshots.h"

namespace ps {
namespace {

void Check(const absl::Status& s) {
  if (s.ok()) return;
  std::fprintf(stderr, "tier_bench --checkpoints: %s\n", s.ToString().c_str());
  std::exit(1);
}

struct Taken {
  double write_seconds = 0, read_seconds = 0, restore_seconds = 0;
  uint64_t written_bytes = 0;   // records
  uint64_t snapshot_bytes = 0;  // the store's files, linked
  uint64_t rows = 0;            // read back (a row in a snapshot and in the records counts twice)
};

Taken TakeOne(ShardStore& store, const std::string& table, const std::string& dir, uint64_t cut,
              bool snapshot) {
  Taken taken;
  std::filesystem::remove_all(dir);
  const absl::Time start = absl::Now();
  Check(store.MarkCut(cut));
  store.CompleteCut();
  absl::StatusOr<std::unique_ptr<CheckpointFileWriter>> writer =
      CheckpointFileWriter::Create(dir, "server-0-table-0");
  Check(writer.status());
  std::vector<proto::RowStoreSnapshot> snapshots;
  Check(store.WriteCut(
      [&](const proto::TableDef&, std::string record) { return (*writer)->Append(record); }, 0, 0,
      snapshot ? &snapshots : nullptr, dir + "/server-0-rows-"));
  absl::StatusOr<proto::CheckpointFile> file = (*writer)->Finish();
  Check(file.status());
  for (proto::RowStoreSnapshot& s : snapshots) {
    Check(DescribeRowSnapshot(dir, &s));
    for (const proto::CheckpointFile& f : s.files()) taken.snapshot_bytes += f.bytes();
  }
  taken.write_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  taken.written_bytes = file->bytes();
  // Read back as a restore reads it: snapshots, then the records.
  const absl::Time read = absl::Now();
  const auto count = [&](const SliceRecord& r) {
    if (r.header.table() == table) taken.rows += r.header.num_rows();
    return absl::OkStatus();
  };
  for (const proto::RowStoreSnapshot& s : snapshots) {
    Check(ForEachRowSnapshotRecord(dir, s, count));
  }
  absl::StatusOr<std::string> bytes = ReadCheckpointFile(dir, *file);
  Check(bytes.status());
  Check(ForEachSliceRecord(*bytes, file->name(), count));
  taken.read_seconds = absl::ToDoubleSeconds(absl::Now() - read);
  // Restored into an empty tiered table of a fresh store, every record
  // loaded as a server's restore does (the files' checks not counted).
  {
    absl::StatusOr<proto::TableDef> def = store.GetTableDef(table);
    Check(def.status());
    StoreLimits limits;
    limits.table_dir = dir + "/restored";
    ShardStore restored(0, Placement(1), limits);
    Check(restored.CreateTable(*def).status());
    const absl::Time start_restore = absl::Now();
    const auto load = [&](const SliceRecord& r) { return restored.LoadRecord(r).status(); };
    for (const proto::RowStoreSnapshot& s : snapshots) {
      Check(ForEachRowSnapshotRecord(dir, s, load));
    }
    Check(ForEachSliceRecord(*bytes, file->name(), load));
    taken.restore_seconds = absl::ToDoubleSeconds(absl::Now() - start_restore);
  }
  std::filesystem::remove_all(dir);
  return taken;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

void RunTierCheckpoints(ShardStore& store, const std::string& table, const std::string& dir,
                        int rounds, bool cold, void (*page_out)(const std::string& dir)) {
  std::vector<double> write[2], read[2], restore[2];
  uint64_t cut = store.max_clock() + 1;
  const char* const kinds[2] = {"records", "snapshot"};
  for (int round = 0; round < rounds; ++round) {
    for (int kind = 0; kind < 2; ++kind) {
      if (cold) page_out(dir);
      const Taken t = TakeOne(store, table, absl::StrCat(dir, "/ckpt"), cut++, kind == 1);
      write[kind].push_back(t.write_seconds);
      read[kind].push_back(t.read_seconds);
      restore[kind].push_back(t.restore_seconds);
      std::printf(
          "checkpoint %d, rows on disk in %s: written in %.3f s (%.1f MiB of records, %.1f MiB "
          "of the store's files linked), read back in %.3f s (%llu rows), restored in %.3f s\n",
          round, kinds[kind], t.write_seconds, static_cast<double>(t.written_bytes) / (1 << 20),
          static_cast<double>(t.snapshot_bytes) / (1 << 20), t.read_seconds,
          static_cast<unsigned long long>(t.rows), t.restore_seconds);
    }
  }
  const double w0 = Median(write[0]), w1 = Median(write[1]);
  const double r0 = Median(read[0]), r1 = Median(read[1]);
  const double l0 = Median(restore[0]), l1 = Median(restore[1]);
  std::printf(
      "full checkpoint (medians of %d): records %.3f s, snapshot %.3f s (%.1fx faster); read "
      "back: records %.3f s, snapshot %.3f s (%.2fx); restored: records %.3f s, snapshot %.3f s "
      "(%.2fx)\n",
      rounds, w0, w1, w0 / w1, r0, r1, r1 / r0, l0, l1, l1 / l0);
  std::printf(
      "RESULT path=checkpoint%s records_write_seconds=%.3f snapshot_write_seconds=%.3f "
      "write_speedup=%.2f records_read_seconds=%.3f snapshot_read_seconds=%.3f "
      "records_restore_seconds=%.3f snapshot_restore_seconds=%.3f\n",
      cold ? "_cold" : "", w0, w1, w0 / w1, r0, r1, l0, l1);
  std::fflush(stdout);
}

}  // namespace ps
