// Fuzzes ReadManifest (server/checkpoint_files.h) and the chain of manifests
// CheckpointChain (server/checkpoint_records.h) follows.
// Input: a control byte, then up to two manifest bodies separated by the
// marker 0xff 0xfe: the first becomes SCRATCH/ckpt-0000000009/MANIFEST, the
// second (if any) SCRATCH/ckpt-0000000001/MANIFEST, the base an incremental
// manifest with base_sequence 1 is chained to.
//   bit 0  write each body raw (the fuzzer must get the 16-byte header
//          "PSCK", CRC32, length right); else prefix it with a valid header,
//          so mutations reach the protobuf parse and the chain logic
//   bit 1  flip one bit of the header's CRC (with bit 0 clear)
// The data files a manifest lists are never read: their names come from the
// input and could point anywhere on this machine.
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>

#include "fuzz/fuzz_util.h"
#include "server/checkpoint/checkpoint_records.h"

namespace {

std::string WithHeader(absl::string_view body, bool bad_crc) {
  uint32_t crc =
      static_cast<uint32_t>(crc32(crc32(0, nullptr, 0), reinterpret_cast<const Bytef*>(body.data()),
                                  static_cast<uInt>(body.size())));
  if (bad_crc) crc ^= 1;
  const uint64_t length = body.size();
  std::string out("PSCK", 4);
  out.append(reinterpret_cast<const char*>(&crc), 4);
  out.append(reinterpret_cast<const char*>(&length), 8);
  out.append(body.data(), body.size());
  return out;
}

void WriteManifest(const std::string& dir, absl::string_view body, uint8_t control) {
  std::filesystem::create_directories(ps_fuzz::ScratchDir() + "/" + dir);
  const std::string bytes = (control & 1) ? std::string(body) : WithHeader(body, control & 2);
  ps_fuzz::WriteScratchFile(dir + "/MANIFEST", bytes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > ps_fuzz::kMaxInputBytes) return 0;
  ps_fuzz::Input in(data, size);
  const uint8_t control = in.Byte();
  const absl::string_view newest = in.Piece();
  const bool has_base = in.remaining() > 0;
  const absl::string_view base = in.Piece();

  const std::string newest_dir = ps_fuzz::ScratchDir() + "/ckpt-0000000009";
  const std::string base_dir = ps_fuzz::ScratchDir() + "/ckpt-0000000001";
  WriteManifest("ckpt-0000000009", newest, control);
  std::error_code ec;
  std::filesystem::remove(base_dir + "/MANIFEST", ec);
  if (has_base) WriteManifest("ckpt-0000000001", base, control);

  absl::StatusOr<ps::proto::CheckpointManifest> manifest = ps::ReadManifest(newest_dir);
  ps_fuzz::Note("ReadManifest", manifest.status());
  if (!manifest.ok()) {
    FUZZ_CHECK(manifest.status().code() == absl::StatusCode::kDataLoss);
    return 0;
  }
  absl::StatusOr<std::vector<ps::FoundCheckpoint>> chain = ps::CheckpointChain(newest_dir);
  ps_fuzz::Note("CheckpointChain", chain.status());
  if (!chain.ok()) return 0;
  // Oldest first, ending at the one asked for; the first is a full
  // checkpoint and each later one is chained to the one before it.
  FUZZ_CHECK(!chain->empty());
  FUZZ_CHECK(chain->back().path == newest_dir);
  FUZZ_CHECK(chain->front().manifest.base_sequence() == 0);
  for (size_t i = 1; i < chain->size(); ++i) {
    FUZZ_CHECK((*chain)[i - 1].manifest.sequence() < (*chain)[i].manifest.sequence());
  }
  return 0;
}
