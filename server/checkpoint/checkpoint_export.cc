#include "server/checkpoint/checkpoint_export.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <system_error>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/npy.h"
#include "common/placement.h"
#include "common/table_layout.h"
#include "server/checkpoint/checkpoint_files.h"
#include "server/checkpoint/checkpoint_records.h"

namespace ps {
namespace {

// "ROOT/ckpt-0000000002: table 'w' slice 3"
std::string Where(const FoundCheckpoint& c, const proto::SliceHeader& h) {
  return absl::StrCat(c.path, ": table '", h.table(), "' slice ", h.slice());
}

// A dense table as the chain has left it so far.
struct DenseImage {
  std::vector<float> values;  // num_keys * width, key-major
  std::vector<bool> covered;  // per key: some record of the chain held it
};

// The rows of one slice (hash bucket) of a sparse table.
struct SparseBucket {
  std::vector<uint64_t> keys;  // ascending
  std::vector<float> values;   // keys.size() * width
};

struct SparseImage {
  uint64_t num_buckets = 0;
  absl::flat_hash_map<uint64_t, SparseBucket> buckets;  // by slice
};

struct TableImage {
  const proto::TableDef* def = nullptr;
  std::string file;  // relative to out_dir
  DenseImage dense;
  SparseImage sparse;
};

bool IsSparse(const proto::TableDef& def) { return def.kind() == proto::TABLE_SPARSE; }

absl::Status CheckKindAndWidth(const FoundCheckpoint& c, const SliceRecord& r,
                               const proto::TableDef& def) {
  if (r.header.sparse() != IsSparse(def)) {
    return absl::DataLossError(
        absl::StrCat(Where(c, r.header), ": a ", r.header.sparse() ? "sparse" : "dense",
                     " record, but the table is ", IsSparse(def) ? "sparse" : "dense"));
  }
  if (r.header.width() != def.width()) {
    return absl::DataLossError(absl::StrCat(Where(c, r.header), ": width ", r.header.width(),
                                            ", but the table's is ", def.width()));
  }
  return absl::OkStatus();
}

// A dense record replaces the values of its keys.
absl::Status ApplyDense(const FoundCheckpoint& c, const SliceRecord& r, const proto::TableDef& def,
                        DenseImage* image) {
  const proto::SliceHeader& h = r.header;
  if (h.num_rows() > def.num_keys() || h.first_key() > def.num_keys() - h.num_rows()) {
    return absl::DataLossError(absl::StrCat(Where(c, h), ": keys [", h.first_key(), ", +",
                                            h.num_rows(), ") run past the table's ", def.num_keys(),
                                            " keys"));
  }
  const uint64_t width = def.width();
  r.CopyFloats(0, h.num_rows() * width, image->values.data() + h.first_key() * width);
  std::fill_n(image->covered.begin() + h.first_key(), h.num_rows(), true);
  return absl::OkStatus();
}

// A sparse record without delta replaces its slice's rows; with delta, it
// writes its rows over the slice's and removes its erased keys.
absl::Status ApplySparse(const FoundCheckpoint& c, const SliceRecord& r, SparseImage* image) {
  const proto::SliceHeader& h = r.header;
  const uint64_t width = h.width();
  auto check_slice = [&](uint64_t key) -> absl::Status {
    const uint64_t slice = Placement::SparseSliceOf(key, image->num_buckets);
    if (slice == h.slice()) return absl::OkStatus();
    return absl::DataLossError(absl::StrCat(Where(c, h), ": key ", key, " belongs to slice ", slice,
                                            " of ", image->num_buckets,
                                            " (hash of the key mod num_buckets)"));
  };
  // The record's rows by key.
  std::vector<std::pair<uint64_t, uint64_t>> rows(h.num_rows());  // key, row in the record
  for (uint64_t i = 0; i < h.num_rows(); ++i) {
    rows[i] = {r.Key(i), i};
    if (absl::Status s = check_slice(rows[i].first); !s.ok()) return s;
  }
  std::sort(rows.begin(), rows.end());
  for (size_t i = 1; i < rows.size(); ++i) {
    if (rows[i].first == rows[i - 1].first) {
      return absl::DataLossError(
          absl::StrCat(Where(c, h), ": key ", rows[i].first, " has two rows in the record"));
    }
  }
  std::vector<uint64_t> erased(h.num_erased());
  for (uint64_t i = 0; i < h.num_erased(); ++i) {
    erased[i] = r.ErasedKey(i);
    if (absl::Status s = check_slice(erased[i]); !s.ok()) return s;
    if (std::binary_search(rows.begin(), rows.end(), std::make_pair(erased[i], uint64_t{0}),
                           [](const auto& a, const auto& b) { return a.first < b.first; })) {
      return absl::DataLossError(
          absl::StrCat(Where(c, h), ": key ", erased[i], " is both written and erased"));
    }
  }
  std::sort(erased.begin(), erased.end());

  SparseBucket& bucket = image->buckets[h.slice()];
  SparseBucket old;
  if (h.delta()) old = std::move(bucket);
  SparseBucket merged;
  merged.keys.reserve(old.keys.size() + rows.size());
  merged.values.reserve(merged.keys.capacity() * width);
  std::vector<float> row(h.floats_per_row());
  size_t i = 0, j = 0, e = 0;  // into old, rows, erased
  while (i < old.keys.size() || j < rows.size()) {
    if (j == rows.size() || (i < old.keys.size() && old.keys[i] < rows[j].first)) {
      const uint64_t key = old.keys[i];
      while (e < erased.size() && erased[e] < key) ++e;
      if (e == erased.size() || erased[e] != key) {
        merged.keys.push_back(key);
        merged.values.insert(merged.values.end(), old.values.begin() + i * width,
                             old.values.begin() + (i + 1) * width);
      }
      ++i;
      continue;
    }
    if (i < old.keys.size() && old.keys[i] == rows[j].first) ++i;  // replaced
    r.CopyRow(rows[j].second, row.data());
    merged.keys.push_back(rows[j].first);
    merged.values.insert(merged.values.end(), row.begin(), row.begin() + width);
    ++j;
  }
  bucket = std::move(merged);
  return absl::OkStatus();
}

// Keys in no record of the chain, as "keys [a, b) and 3 more": a dense
// table restored from it would be missing them.
absl::Status CheckCovered(const FoundCheckpoint& newest, const proto::TableDef& def,
                          const DenseImage& image) {
  const auto first = std::find(image.covered.begin(), image.covered.end(), false);
  if (first == image.covered.end()) return absl::OkStatus();
  const uint64_t begin = first - image.covered.begin();
  const uint64_t end = std::find(first, image.covered.end(), true) - image.covered.begin();
  const uint64_t missing = std::count(image.covered.begin(), image.covered.end(), false);
  return absl::DataLossError(absl::StrCat(
      newest.path, ": table '", def.name(), "': keys [", begin, ", ", end, ")",
      missing > end - begin ? absl::StrCat(" and ", missing - (end - begin), " more") : "",
      " of its ", def.num_keys(), " are in no slice of the checkpoint or its bases"));
}

absl::StatusOr<ExportedTable> WriteDense(const std::string& path, const proto::TableDef& def,
                                         const DenseImage& image) {
  ExportedTable out{def.name(), false, path, {def.num_keys(), def.width()}, 0};
  absl::StatusOr<uint64_t> bytes = WriteNpy(path, NpyArray::Float32(image.values, out.shape));
  if (!bytes.ok()) return bytes.status();
  out.bytes = *bytes;
  return out;
}

// Writes the keys of every slice in ascending order with their values;
// frees the slices as it goes.
absl::StatusOr<ExportedTable> WriteSparse(const std::string& path, const proto::TableDef& def,
                                          SparseImage* image) {
  const uint64_t width = def.width();
  std::vector<std::pair<uint64_t, const float*>> order;
  for (const auto& [slice, bucket] : image->buckets) {
    for (size_t i = 0; i < bucket.keys.size(); ++i) {
      order.emplace_back(bucket.keys[i], bucket.values.data() + i * width);
    }
  }
  std::sort(order.begin(), order.end());
  std::vector<uint64_t> keys(order.size());
  std::vector<float> values(order.size() * width);
  for (size_t i = 0; i < order.size(); ++i) {
    keys[i] = order[i].first;
    std::copy_n(order[i].second, width, values.begin() + i * width);
  }
  order = {};
  image->buckets = {};
  ExportedTable out{def.name(), true, path, {keys.size(), width}, 0};
  absl::StatusOr<std::unique_ptr<NpzWriter>> npz = NpzWriter::Create(path);
  if (!npz.ok()) return npz.status();
  if (absl::Status s = (*npz)->Add("keys", NpyArray::Uint64(keys, {keys.size()})); !s.ok()) {
    return s;
  }
  if (absl::Status s = (*npz)->Add("values", NpyArray::Float32(values, out.shape)); !s.ok()) {
    return s;
  }
  absl::StatusOr<uint64_t> bytes = (*npz)->Finish();
  if (!bytes.ok()) return bytes.status();
  out.bytes = *bytes;
  return out;
}

// The selected tables of the newest manifest, each with its file and its
// values allocated, in manifest order.
absl::StatusOr<std::vector<TableImage>> SelectTables(const FoundCheckpoint& newest,
                                                     const std::vector<std::string>& names) {
  absl::flat_hash_set<std::string> wanted(names.begin(), names.end());
  std::vector<std::string> all;
  for (const proto::TableDef& def : newest.manifest.tables()) all.push_back(def.name());
  for (const std::string& name : wanted) {
    if (std::find(all.begin(), all.end(), name) == all.end()) {
      return absl::NotFoundError(absl::StrCat(newest.path, " has no table '", name,
                                              "'; its tables: ", absl::StrJoin(all, ", ")));
    }
  }
  std::vector<TableImage> images;
  for (const proto::TableDef& def : newest.manifest.tables()) {
    if (!wanted.empty() && !wanted.contains(def.name())) continue;
    TableImage image;
    image.def = &def;
    absl::StatusOr<std::string> file = ExportFileName(def);
    if (!file.ok()) return file.status();
    image.file = *std::move(file);
    if (IsSparse(def)) {
      image.sparse.num_buckets = LayoutOf(def).num_buckets;
    } else {
      const unsigned __int128 floats = static_cast<unsigned __int128>(def.num_keys()) * def.width();
      if (floats > (uint64_t{1} << 40)) {  // 4 TiB of float32
        return absl::ResourceExhaustedError(
            absl::StrCat("table '", def.name(), "': ", def.num_keys(), " keys of width ",
                         def.width(), " are too many floats to export (over 2^40)"));
      }
      image.dense.values.assign(static_cast<size_t>(floats), 0.0f);
      image.dense.covered.assign(def.num_keys(), false);
    }
    images.push_back(std::move(image));
  }
  return images;
}

}  // namespace

absl::StatusOr<std::string> ExportFileName(const proto::TableDef& table) {
  const std::string& name = table.name();
  auto refuse = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("table '", name,
                                                   "' cannot be exported under its name: ", why,
                                                   " (export the other tables with --tables)"));
  };
  if (name.find('\0') != std::string::npos) return refuse("it holds a NUL byte");
  for (absl::string_view part : absl::StrSplit(name, '/')) {
    if (part.empty()) return refuse("an empty part between '/' (or at either end)");
    if (part[0] == '.') {
      return refuse(absl::StrCat("its part '", part, "' starts with '.'"));
    }
  }
  return absl::StrCat(name, IsSparse(table) ? ".npz" : ".npy");
}

absl::StatusOr<std::vector<ExportedTable>> ExportCheckpoint(
    const std::string& dir, const std::string& out_dir, const std::vector<std::string>& tables) {
  if (out_dir.empty()) {
    return absl::InvalidArgumentError("the output directory is empty: name one (\".\" for here)");
  }
  absl::StatusOr<std::vector<FoundCheckpoint>> chain = CheckpointChain(dir);
  if (!chain.ok()) return chain.status();
  const FoundCheckpoint& newest = chain->back();
  absl::StatusOr<std::vector<TableImage>> images = SelectTables(newest, tables);
  if (!images.ok()) return images.status();
  absl::flat_hash_map<std::string, TableImage*> by_name;
  for (TableImage& image : *images) by_name[image.def->name()] = &image;

  absl::Status applied =
      ForEachChainRecord(*chain, [&](const FoundCheckpoint& c, const SliceRecord& r) {
        const auto it = by_name.find(r.header.table());
        if (it == by_name.end()) return absl::OkStatus();  // not exported, or dropped
        TableImage& image = *it->second;
        if (absl::Status s = CheckKindAndWidth(c, r, *image.def); !s.ok()) return s;
        return r.header.sparse() ? ApplySparse(c, r, &image.sparse)
                                 : ApplyDense(c, r, *image.def, &image.dense);
      });
  if (!applied.ok()) return applied;
  for (const TableImage& image : *images) {
    if (IsSparse(*image.def)) continue;
    if (absl::Status s = CheckCovered(newest, *image.def, image.dense); !s.ok()) return s;
  }

  std::vector<ExportedTable> written;
  for (TableImage& image : *images) {
    const std::string path = absl::StrCat(out_dir, "/", image.file);
    std::error_code error;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), error);
    if (error) {
      return absl::InternalError(
          absl::StrCat("creating the directory of ", path, ": ", error.message()));
    }
    absl::StatusOr<ExportedTable> table = IsSparse(*image.def)
                                              ? WriteSparse(path, *image.def, &image.sparse)
                                              : WriteDense(path, *image.def, image.dense);
    if (!table.ok()) return table.status();
    image.dense = {};  // the next table's memory
    written.push_back(*std::move(table));
  }
  return written;
}

}  // namespace ps
