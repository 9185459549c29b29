// Test fixture for ps_ckpt: writes checkpoints 1 (full) and 2 (incremental
// on 1) under argv[1], each a manifest with one table and a clock and a data
// file of 3 blocks of 1 KiB.
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/checkpoint/checkpoint_files.h"
#include "tests/test_util/table_defs.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: checkpoint_fixture ROOT\n");
    return 2;
  }
  for (uint64_t sequence = 1; sequence <= 2; ++sequence) {
    const std::string dir = absl::StrCat(argv[1], "/", ps::CheckpointDirName(sequence));
    auto writer = ps::CheckpointFileWriter::Create(dir, "server-0-table-w", 1024);
    if (!writer.ok() || !(*writer)->Append(std::string(3072, static_cast<char>(sequence))).ok()) {
      return 1;
    }
    auto entry = (*writer)->Finish();
    if (!entry.ok()) return 1;
    ps::proto::CheckpointManifest m;
    m.set_sequence(sequence);
    m.set_base_sequence(sequence - 1);
    m.set_cut(100 * sequence);
    m.set_unix_micros(absl::ToUnixMicros(absl::Now()));
    m.set_num_servers(2);
    m.set_slice_size(4096);
    m.set_virtual_nodes(512);
    *m.add_tables() = ps::DenseTableDef("w", 1000, 4);
    ps::proto::WorkerClock* c = m.add_clocks();
    c->set_table("w");
    c->set_worker_id(3);
    c->set_clock(100 * sequence);
    *m.add_files() = *entry;
    if (!ps::CommitCheckpoint(dir, m).ok()) return 1;
  }
  return 0;
}
