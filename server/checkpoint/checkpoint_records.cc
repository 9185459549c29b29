#include "server/checkpoint/checkpoint_records.h"

#include <algorithm>
#include <limits>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "server/checkpoint/row_snapshots.h"

namespace ps {

namespace {

// a * b + c, false on overflow.
bool MulAdd(uint64_t a, uint64_t b, uint64_t c, uint64_t* out) {
  unsigned __int128 r = static_cast<unsigned __int128>(a) * b + c;
  if (r > ~uint64_t{0}) return false;
  *out = static_cast<uint64_t>(r);
  return true;
}

std::string Where(const proto::SliceHeader& h) {
  return absl::StrCat("table '", h.table(), "' slice ", h.slice());
}

}  // namespace

absl::StatusOr<uint64_t> SlicePayloadBytes(const proto::SliceHeader& h) {
  if (h.width() == 0 || h.width() > h.floats_per_row()) {
    return absl::InvalidArgumentError(absl::StrCat(Where(h), ": width ", h.width(),
                                                   " with floats_per_row ", h.floats_per_row(),
                                                   " (expected 1 <= width <= floats_per_row)"));
  }
  if (!h.sparse() && (h.num_erased() != 0 || h.delta())) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(h), ": a dense slice with erased keys or delta set"));
  }
  uint64_t bytes = 0;
  const uint64_t row_bytes = uint64_t{h.floats_per_row()} * 4 + (h.sparse() ? 8 : 0);
  if (!MulAdd(h.num_rows(), row_bytes, 0, &bytes) || !MulAdd(h.num_erased(), 8, bytes, &bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(Where(h), ": ", h.num_rows(), " rows and ",
                                                   h.num_erased(), " erased keys overflow"));
  }
  return bytes;
}

void AppendSliceHeader(const proto::SliceHeader& header, std::string* out) {
  const std::string bytes = header.SerializeAsString();
  const uint32_t n = static_cast<uint32_t>(bytes.size());
  char len[4];
  for (int i = 0; i < 4; ++i) len[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  out->append(len, 4);
  out->append(bytes);
}

absl::Status ForEachSliceRecord(absl::string_view bytes, absl::string_view file,
                                absl::FunctionRef<absl::Status(const SliceRecord&)> fn) {
  uint64_t offset = 0;
  while (offset < bytes.size()) {
    auto loss = [&](const std::string& what) {
      return absl::DataLossError(
          absl::StrCat("checkpoint file ", file, " at byte ", offset, ": ", what));
    };
    if (bytes.size() - offset < 4) {
      return loss(
          absl::StrCat("a record length needs 4 bytes, ", bytes.size() - offset, " are left"));
    }
    uint32_t n = 0;
    for (int i = 0; i < 4; ++i) n |= uint32_t{static_cast<uint8_t>(bytes[offset + i])} << (8 * i);
    if (bytes.size() - offset - 4 < n) {
      return loss(absl::StrCat("a header of ", n, " bytes runs past the end (",
                               bytes.size() - offset - 4, " bytes left)"));
    }
    SliceRecord record;
    if (!record.header.ParseFromArray(bytes.data() + offset + 4, static_cast<int>(n))) {
      return loss(absl::StrCat("a slice header of ", n, " bytes does not parse"));
    }
    absl::StatusOr<uint64_t> payload = SlicePayloadBytes(record.header);
    if (!payload.ok()) return loss(std::string(payload.status().message()));
    const uint64_t start = offset + 4 + n;
    if (bytes.size() - start < *payload) {
      return loss(absl::StrCat(Where(record.header), ": a payload of ", *payload,
                               " bytes runs past the end (", bytes.size() - start, " bytes left)"));
    }
    record.payload = bytes.substr(start, *payload);
    if (absl::Status s = fn(record); !s.ok()) return s;
    offset = start + *payload;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<FoundCheckpoint>> CheckpointChain(const std::string& dir) {
  std::string path = dir;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const size_t slash = path.find_last_of('/');
  const std::string root = slash == std::string::npos ? "." : path.substr(0, slash);
  std::vector<FoundCheckpoint> chain;
  for (;;) {
    absl::StatusOr<proto::CheckpointManifest> m = ReadManifest(path);
    if (!m.ok()) {
      if (chain.empty()) return m.status();
      return absl::Status(m.status().code(),
                          absl::StrCat(chain.back().path, " is incremental on ", path,
                                       ", which cannot be used: ", m.status().message()));
    }
    const uint64_t base = m->base_sequence();
    if (!chain.empty() && m->sequence() >= chain.back().manifest.sequence()) {
      return absl::DataLossError(absl::StrCat(path, ": sequence ", m->sequence(),
                                              " is not older than the checkpoint chained to it"));
    }
    chain.push_back({path, *std::move(m)});
    if (base == 0) break;
    path = absl::StrCat(root, "/", CheckpointDirName(base));
  }
  std::reverse(chain.begin(), chain.end());
  return chain;
}

absl::StatusOr<std::vector<FoundCheckpoint>> FindNewestValidChain(
    const std::string& root, std::vector<std::string>* skipped) {
  absl::StatusOr<std::vector<CheckpointDir>> dirs = ListCheckpoints(root);
  if (!dirs.ok()) return dirs.status();
  auto skip = [&](uint64_t sequence, absl::string_view why) {
    if (skipped != nullptr)
      skipped->push_back(absl::StrCat(CheckpointDirName(sequence), ": ", why));
  };
  absl::flat_hash_map<std::string, absl::Status> verified;  // by path
  for (auto it = dirs->rbegin(); it != dirs->rend(); ++it) {
    if (!it->has_manifest) {
      skip(it->sequence, "incomplete (no MANIFEST)");
      continue;
    }
    absl::StatusOr<std::vector<FoundCheckpoint>> chain = CheckpointChain(it->path);
    if (!chain.ok()) {
      skip(it->sequence, chain.status().message());
      continue;
    }
    absl::Status status;
    for (auto c = chain->rbegin(); c != chain->rend() && status.ok(); ++c) {
      auto [v, fresh] = verified.try_emplace(c->path);
      if (fresh) v->second = VerifyCheckpoint(c->path);
      if (!v->second.ok()) {
        status = c->path == it->path
                     ? v->second
                     : absl::Status(v->second.code(),
                                    absl::StrCat("its base ", c->path, ": ", v->second.message()));
      }
    }
    if (!status.ok()) {
      skip(it->sequence, status.message());
      continue;
    }
    return chain;
  }
  return absl::NotFoundError(absl::StrCat("no valid checkpoint under ", root));
}

absl::Status ForEachRowSnapshotRecord(const std::string& dir,
                                      const proto::RowStoreSnapshot& snapshot,
                                      absl::FunctionRef<absl::Status(const SliceRecord&)> fn) {
  absl::StatusOr<std::unique_ptr<RowStore>> store = OpenRowSnapshot(dir, snapshot);
  if (!store.ok()) return store.status();
  const size_t value_bytes = size_t{snapshot.floats_per_row()} * sizeof(float);
  const std::string name = absl::StrCat(dir, "/", snapshot.dir());
  std::vector<uint64_t> keys;
  std::string rows;
  for (uint64_t bucket : snapshot.buckets()) {
    if (bucket > std::numeric_limits<uint32_t>::max()) {
      return absl::DataLossError(absl::StrCat("row store snapshot ", name, ": bucket ", bucket,
                                              " is past the store's slices"));
    }
    // The bucket's rows in records of about kSnapshotRecordBytes: the first
    // replaces the bucket, the others add to it.
    bool first = true;
    const auto flush = [&]() -> absl::Status {
      proto::SliceHeader header;
      header.set_table(snapshot.table());
      header.set_slice(bucket);
      header.set_sparse(true);
      header.set_num_rows(keys.size());
      header.set_floats_per_row(snapshot.floats_per_row());
      header.set_width(snapshot.width());
      header.set_delta(!first);
      first = false;
      std::string record;
      AppendSliceHeader(header, &record);
      record.append(reinterpret_cast<const char*>(keys.data()), keys.size() * 8);
      record += rows;
      keys.clear();
      rows.clear();
      return ForEachSliceRecord(record, name, fn);
    };
    absl::Status status =
        (*store)->ForEach(static_cast<uint32_t>(bucket), [&](uint64_t key, const char* row) {
          keys.push_back(key);
          rows.append(row, value_bytes);  // not the change tag
          if (rows.size() < kSnapshotRecordBytes) return absl::OkStatus();
          return flush();
        });
    if (status.ok() && (first || !keys.empty())) status = flush();
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::Status ForEachChainRecord(
    const std::vector<FoundCheckpoint>& chain,
    absl::FunctionRef<absl::Status(const FoundCheckpoint&, const SliceRecord&)> fn) {
  for (const FoundCheckpoint& c : chain) {
    for (const proto::RowStoreSnapshot& snapshot : c.manifest.row_snapshots()) {
      absl::Status s = ForEachRowSnapshotRecord(c.path, snapshot,
                                                [&](const SliceRecord& r) { return fn(c, r); });
      if (!s.ok()) return s;
    }
    for (const proto::CheckpointFile& entry : c.manifest.files()) {
      absl::StatusOr<std::string> bytes = ReadCheckpointFile(c.path, entry);
      if (!bytes.ok()) return bytes.status();
      absl::Status s = ForEachSliceRecord(*bytes, absl::StrCat(c.path, "/", entry.name()),
                                          [&](const SliceRecord& r) { return fn(c, r); });
      if (!s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace ps
