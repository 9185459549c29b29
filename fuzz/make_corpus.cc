// Writes the seed corpora of the fuzz targets (fuzz/corpus/<target>/):
//   bazel run //fuzz:make_corpus -- $PWD/fuzz/corpus
// Each input follows its target's input layout (see the header comment of
// fuzz/<target>_fuzzer.cc). Records, manifests and requests are produced with
// the project's own protos and writers (AppendSliceHeader, SerializeAsString),
// so they are what a server writes or receives.
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "common/cluster_keys.h"
#include "common/hash.h"
#include "proto/checkpoint.pb.h"
#include "proto/membership.pb.h"
#include "proto/ps.pb.h"
#include "server/checkpoint/checkpoint_records.h"

namespace {

std::string root;

void Write(const std::string& target, const std::string& name, const std::string& bytes) {
  const std::string dir = root + "/" + target;
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/" + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() ||
      std::fclose(f) != 0) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    std::exit(1);
  }
}

std::string Byte(int b) { return std::string(1, static_cast<char>(b)); }
const std::string kMarker = "\xff\xfe";

// A gzip stream (deflate with a gzip wrapper), as gzip(1) writes.
std::string Gzip(const std::string& in) {
  z_stream z{};
  if (deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) std::abort();
  std::string out(deflateBound(&z, in.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) std::abort();
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string BigEndian32(uint32_t v) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i) s[i] = static_cast<char>(v >> (24 - 8 * i));
  return s;
}

std::string Idx(uint32_t magic, const std::vector<uint32_t>& dims) {
  std::string s = BigEndian32(magic);
  uint64_t n = 1;
  for (uint32_t d : dims) {
    s += BigEndian32(d);
    n *= d;
  }
  for (uint64_t i = 0; i < n; ++i) s += static_cast<char>((i * 37) & 0xff);
  return s;
}

void IdxCorpus() {
  // Control byte: bits 0-1 = dims - 1, bit 2 = gzip in the fuzzer.
  const std::string labels = Idx(0x801, {6});
  const std::string images = Idx(0x803, {2, 3, 3});
  Write("idx", "labels_plain", Byte(0) + labels);
  Write("idx", "images_plain", Byte(2) + images);
  Write("idx", "images_gzip_by_fuzzer", Byte(2 | 4) + images);
  Write("idx", "labels_gzip_file", Byte(0) + Gzip(labels));
  Write("idx", "matrix_2d", Byte(1) + Idx(0x802, {3, 4}));
  Write("idx", "tensor_4d", Byte(3) + Idx(0x804, {1, 2, 2, 2}));
  Write("idx", "trailing_byte", Byte(0) + labels + "x");
  Write("idx", "truncated_payload", Byte(2) + images.substr(0, images.size() - 3));
}

void LibsvmCorpus() {
  // Control: bit 0 skip_bad_lines, 1 gzip, 2-3 block size (3, 16, 4096,
  // 1 MiB), 4 max_line_bytes 64, 5 NextBatch, 6 rewind and compare.
  Write("libsvm", "basic", Byte(0) + "1 1:0.5 3:1\n0 2:1\n-1 7:2.5e-1 8:-3\n");
  Write("libsvm", "qid_comment_crlf_small_blocks",
        Byte(1 << 2 | 64) +
            "+1 qid:3 1:1 7:-0.5 # a comment\r\n# only a comment\r\n\r\n"
            "-1.0 qid:3 2:.5\t4:+2\r\n1e0 18446744073709551615:1");
  Write("libsvm", "field_aware_batched",
        Byte(32 | 64) + "1 0:1:1 1:5:0.5 65535:9:1e-2\n0 3:4:1 # ffm\n1 2:0:1\n");
  Write("libsvm", "bad_lines_skipped",
        Byte(1 | (0 << 2)) +
            "1 1:1\n2 1:1\nyes 3:1\n0 1:nan\n1 1:1 1:2:3\n0 70000:1:1\n1 qid:x 1:1\n0 1:\n1 5:1\n");
  Write("libsvm", "bad_line_fails", Byte(2 << 2) + "1 1:1\n0.5 2:1\n1 3:1\n");
  Write("libsvm", "gzip_by_fuzzer_tiny_blocks",
        Byte(2 | 64) + "1 1:1 2:1\n0 3:1\n# end\n1 4:0.25\n");
  Write("libsvm", "gzip_file", Byte(4 << 0) + Gzip("0 10:1 20:1\n1 qid:1 30:0.5\n1 qid:2 5:5\n"));
  Write("libsvm", "long_line_limit",
        Byte(1 | 16) +
            "1 1:1\n0 1:1 2:1 3:1 4:1 5:1 6:1 7:1 8:1 9:1 10:1 11:1 12:1 13:1 14:1\n1 2:2\n");
}

void ClusterSpecCorpus() {
  Write("cluster_spec", "one", "localhost:5000");
  Write("cluster_spec", "three_spaces", "10.0.0.1:5000, 10.0.0.2:5001 ,host-3:65535");
  Write("cluster_spec", "ipv6", "[::1]:80,[::1]:81");
  Write("cluster_spec", "port_zero", "a:0");
  Write("cluster_spec", "duplicate", "a:1,a:1");
  Write("cluster_spec", "empty_entry", "a:1,,b:2");
  Write("cluster_spec", "blank", " \t\n");
}

void CheckpointRecordsCorpus() {
  auto floats = [](uint64_t n) {
    std::string s;
    for (uint64_t i = 0; i < n; ++i) {
      const float f = 0.25f * static_cast<float>(i + 1);
      s.append(reinterpret_cast<const char*>(&f), 4);
    }
    return s;
  };
  auto u64s = [](std::vector<uint64_t> keys) {
    return std::string(reinterpret_cast<const char*>(keys.data()), keys.size() * 8);
  };
  ps::proto::SliceHeader sparse;
  sparse.set_table("emb");
  sparse.set_slice(3);
  sparse.set_sparse(true);
  sparse.set_num_rows(3);
  sparse.set_floats_per_row(4);
  sparse.set_width(2);
  sparse.set_delta(true);
  sparse.set_num_erased(1);
  std::string sparse_rec;
  ps::AppendSliceHeader(sparse, &sparse_rec);
  sparse_rec += u64s({7, 1ull << 63, 42}) + floats(3 * 4) + u64s({99});

  ps::proto::SliceHeader dense;
  dense.set_table("w");
  dense.set_slice(0);
  dense.set_first_key(128);
  dense.set_num_rows(4);
  dense.set_floats_per_row(3);
  dense.set_width(1);
  std::string dense_rec;
  ps::AppendSliceHeader(dense, &dense_rec);
  dense_rec += floats(4 * 3);

  ps::proto::SliceHeader empty = dense;
  empty.set_num_rows(0);
  std::string empty_rec;
  ps::AppendSliceHeader(empty, &empty_rec);

  Write("checkpoint_records", "sparse_delta", sparse_rec);
  Write("checkpoint_records", "dense", dense_rec);
  Write("checkpoint_records", "three_records", dense_rec + sparse_rec + empty_rec);
  Write("checkpoint_records", "truncated_payload", dense_rec.substr(0, dense_rec.size() - 5));
  Write("checkpoint_records", "short_length", std::string("\x05\x00", 2));
  ps::proto::SliceHeader bad = dense;
  bad.set_width(9);
  std::string bad_rec;
  ps::AppendSliceHeader(bad, &bad_rec);
  Write("checkpoint_records", "width_over_row", bad_rec + floats(12));
}

void CheckpointManifestCorpus() {
  ps::proto::CheckpointManifest full;
  full.set_sequence(1);
  full.set_cut(17);
  full.set_unix_micros(1700000000000000);
  full.set_num_servers(2);
  full.set_slice_size(4096);
  full.set_virtual_nodes(64);
  full.add_tables()->set_name("w");
  full.mutable_tables(0)->set_width(4);
  full.mutable_tables(0)->set_num_keys(1000);
  ps::proto::WorkerClock* clock = full.add_clocks();
  clock->set_table("w");
  clock->set_worker_id(1);
  clock->set_clock(17);
  ps::proto::CheckpointFile* file = full.add_files();
  file->set_name("server-0.data");
  file->set_bytes(3 << 20);
  file->set_block_bytes(1 << 20);
  for (uint32_t crc : {0x1234u, 0xdeadbeefu, 7u}) file->add_block_crc32(crc);
  ps::proto::DedupWindow* dedup = full.add_dedup();
  dedup->set_worker_id(1);
  dedup->add_request_ids(5);
  dedup->set_forgotten_max(4);

  ps::proto::CheckpointManifest newest = full;
  newest.set_sequence(9);
  newest.set_base_sequence(1);
  ps::proto::CheckpointManifest full9 = full;
  full9.set_sequence(9);

  // Control bit 0: raw (header included here), else the fuzzer adds it.
  Write("checkpoint_manifest", "full", Byte(0) + full9.SerializeAsString());
  Write("checkpoint_manifest", "incremental_chain",
        Byte(0) + newest.SerializeAsString() + kMarker + full.SerializeAsString());
  Write("checkpoint_manifest", "incremental_missing_base", Byte(0) + newest.SerializeAsString());
  Write("checkpoint_manifest", "bad_crc", Byte(2) + full9.SerializeAsString());
  ps::proto::CheckpointManifest loop = full;
  loop.set_base_sequence(1);  // the base names itself
  Write("checkpoint_manifest", "base_chained_to_itself",
        Byte(0) + newest.SerializeAsString() + kMarker + loop.SerializeAsString());
  // A raw file with a correct header.
  const std::string body = full9.SerializeAsString();
  uint32_t crc =
      static_cast<uint32_t>(crc32(crc32(0, nullptr, 0), reinterpret_cast<const Bytef*>(body.data()),
                                  static_cast<uInt>(body.size())));
  uint64_t length = body.size();
  std::string raw = "PSCK";
  raw.append(reinterpret_cast<const char*>(&crc), 4);
  raw.append(reinterpret_cast<const char*>(&length), 8);
  Write("checkpoint_manifest", "raw_with_header", Byte(1) + raw + body);
  Write("checkpoint_manifest", "not_a_proto", Byte(0) + "\xff\xff\xff\xff\x0f");
}

std::string Le16(uint16_t v) {
  return std::string{static_cast<char>(v & 0xff), static_cast<char>(v >> 8)};
}

// mode, slice count, three cut positions, then the message.
std::string Framed(int mode, int slices, uint16_t a, uint16_t b, uint16_t c, const std::string& m) {
  return Byte(mode) + Byte(slices - 1) + Le16(a) + Le16(b) + Le16(c) + m;
}

void RawMessageCorpus() {
  auto floats = [](int n) {
    std::string s;
    for (int i = 0; i < n; ++i) {
      const float f = 0.5f * static_cast<float>(i) - 1.0f;
      s.append(reinterpret_cast<const char*>(&f), 4);
    }
    return s;
  };
  ps::proto::PushRequest ranges;
  ranges.set_table("w");
  ps::proto::KeyRange* r = ranges.add_ranges();
  r->set_begin(10);
  r->set_end(13);
  ranges.set_worker_id(2);
  ranges.set_clock(5);
  ranges.set_request_id(77);
  ranges.set_values(floats(6));  // width 2
  const std::string push_ranges = ranges.SerializeAsString();
  Write("raw_message", "push_ranges_f32_3_slices",
        Framed(0, 3, 5, static_cast<uint16_t>(push_ranges.size() - 7), 0, push_ranges));

  const std::vector<uint64_t> keys = {3, 1ull << 40, 9, 12};
  const std::string key_bytes(reinterpret_cast<const char*>(keys.data()), keys.size() * 8);
  ps::proto::PushRequest list;
  list.set_table("emb");
  list.set_key_list(key_bytes);
  list.set_value_encoding(ps::proto::VALUES_F16);
  list.set_values(std::string(keys.size() * 2 * 2, '\x3c'));
  list.set_key_list_signature(ps::KeyListSignature(keys.data(), keys.size()));
  const std::string push_list = list.SerializeAsString();
  // Mode bit 2: with a key-list cache (the signature is kept, then hit).
  Write("raw_message", "push_list_f16_signature_cached",
        Framed(0 | 4, 4, 3, 20, static_cast<uint16_t>(push_list.size() - 2), push_list));
  ps::proto::PushRequest bf16 = list;
  bf16.set_value_encoding(ps::proto::VALUES_BF16);
  bf16.clear_key_list_signature();
  Write("raw_message", "push_list_bf16_one_slice", Framed(0, 1, 0, 0, 0, bf16.SerializeAsString()));
  ps::proto::PushRequest clock_only;
  clock_only.set_table("w");
  clock_only.set_clock(9);
  Write("raw_message", "push_clock_only", Framed(0, 2, 1, 0, 0, clock_only.SerializeAsString()));

  ps::proto::PullRequest pull;
  pull.set_table("emb");
  pull.set_key_list(key_bytes);
  pull.set_worker_id(1);
  const std::string pull_bytes = pull.SerializeAsString();
  Write("raw_message", "pull_list_2_slices",
        Framed(1, 2, static_cast<uint16_t>(pull_bytes.size() / 2), 0, 0, pull_bytes));

  ps::proto::PushPullRequest pp;
  ps::proto::PushRequest* p1 = pp.add_pushes();
  p1->set_table("emb");
  p1->set_key_list(key_bytes.substr(0, 16));
  p1->set_values_bytes(2 * 4);
  ps::proto::PushRequest* p2 = pp.add_pushes();
  p2->set_table("w");
  p2->add_ranges()->set_end(2);
  p2->set_values_bytes(2 * 2);
  p2->set_value_encoding(ps::proto::VALUES_F16);
  pp.set_values(floats(2) + std::string(4, '\x01'));
  const std::string pp_bytes = pp.SerializeAsString();
  Write("raw_message", "pushpull_two_pushes",
        Framed(2, 3, static_cast<uint16_t>(pp_bytes.size() - 6), 9, 0, pp_bytes));

  Write("raw_message", "push_in_proto", Framed(3, 1, 0, 0, 0, push_list));
  Write("raw_message", "ragged_values",
        Framed(0, 1, 0, 0, 0,
               push_ranges.substr(0, push_ranges.size()) + "\x22\x03"
                                                           "abc"));
}

void ClusterStateCorpus() {
  ps::proto::RingRecord ring;
  ring.set_version(4);
  ring.set_replicas(2);
  for (uint32_t s = 0; s < 3; ++s) {
    ps::proto::MemberRecord m;
    m.set_server_id(s);
    m.set_address("ps-" + std::to_string(s) + ":5000");
    m.set_incarnation(1000 + s);
    (*ring.mutable_members())[s] = m;
  }
  for (int shard = 0; shard < 3; ++shard) {
    ps::proto::ShardChain* c = ring.add_shards();
    c->add_servers(shard);
    c->add_servers((shard + 1) % 3);
  }
  ring.mutable_shards(0)->add_joining(2);
  const std::string ring_json = ps::ToJson(ring);
  const std::string m0 = ps::ToJson(ring.members().at(0));
  const std::string m1 = ps::ToJson(ring.members().at(1));
  ps::proto::MemberRecord m3;
  m3.set_server_id(3);
  m3.set_address("ps-3:5000");
  m3.set_incarnation(55);
  ps::proto::SyncedRecord synced;
  synced.set_ring_version(4);
  synced.set_incarnation(1002);

  // Control bit 7: one JSON record (bit 6: a member).
  Write("cluster_state", "ring_json", Byte(0x80) + ring_json);
  Write("cluster_state", "member_json", Byte(0xc0) + m0);
  // Entries: key piece (form, a, b), value piece. Server 2 is not live (it
  // leaves its chains), 3 is added, shard 0's copy on 2 is synced.
  auto key = [](int form, int a, int b) { return Byte(form) + Byte(a) + Byte(b); };
  Write("cluster_state", "ring_members_synced_adding",
        Byte(5) + key(0, 0, 0) + kMarker + ring_json + kMarker + key(1, 0, 0) + kMarker + m0 +
            kMarker + key(1, 1, 0) + kMarker + m1 + kMarker + key(1, 3, 0) + kMarker +
            ps::ToJson(m3) + kMarker + key(2, 0, 2) + kMarker + ps::ToJson(synced) + kMarker +
            key(4, 3, 0) + kMarker + "");
  Write("cluster_state", "all_live_draining",
        Byte(7) + key(0, 0, 0) + kMarker + ring_json + kMarker + key(1, 0, 0) + kMarker + m0 +
            kMarker + key(1, 1, 0) + kMarker + m1 + kMarker + key(1, 2, 0) + kMarker +
            ps::ToJson(ring.members().at(2)) + kMarker + key(3, 1, 0) + kMarker + "");
  Write("cluster_state", "bad_member_json",
        Byte(1) + key(1, 4, 0) + kMarker + "{\"serverId\": \"x\"}" + kMarker + key(9, 0, 0) +
            "unknown/key" + kMarker + "{}");
  Write("cluster_state", "other_cluster_ignored", Byte(0) + key(5, 1, 0) + kMarker + "not json");
}

}  // namespace

int main(int argc, char** argv) {
  root = argc > 1 ? argv[1] : "fuzz/corpus";
  IdxCorpus();
  LibsvmCorpus();
  ClusterSpecCorpus();
  CheckpointRecordsCorpus();
  CheckpointManifestCorpus();
  RawMessageCorpus();
  ClusterStateCorpus();
  std::printf("make_corpus: wrote the seed corpora under %s\n", root.c_str());
  return 0;
}
