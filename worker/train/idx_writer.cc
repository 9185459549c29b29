#include "worker/train/idx_writer.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ps {
namespace {

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};

void PutBigEndian(uint32_t v, std::vector<uint8_t>& out) {
  out.push_back(static_cast<uint8_t>(v >> 24));
  out.push_back(static_cast<uint8_t>(v >> 16));
  out.push_back(static_cast<uint8_t>(v >> 8));
  out.push_back(static_cast<uint8_t>(v));
}

}  // namespace

absl::Status WriteIdxFile(const std::string& path, const std::vector<int64_t>& dims,
                          const std::vector<uint8_t>& data) {
  std::vector<uint8_t> header;
  PutBigEndian(0x00000800u | static_cast<uint32_t>(dims.size()), header);
  int64_t elements = 1;
  for (int64_t d : dims) {
    if (d < 0 || d > int64_t{0xffffffff}) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": dimension ", d, " is outside [0, 2^32)"));
    }
    PutBigEndian(static_cast<uint32_t>(d), header);
    elements *= d;
  }
  if (static_cast<int64_t>(data.size()) != elements) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": expected ", elements, " bytes of data, got ", data.size()));
  }
  std::unique_ptr<gzFile_s, GzCloser> f(gzopen(path.c_str(), "wb"));
  if (f == nullptr) return absl::InternalError(absl::StrCat(path, ": cannot open for writing"));
  for (const std::vector<uint8_t>* part : {&std::as_const(header), &data}) {
    if (part->empty()) continue;
    if (gzwrite(f.get(), part->data(), static_cast<unsigned>(part->size())) !=
        static_cast<int>(part->size())) {
      return absl::InternalError(absl::StrCat(path, ": write failed"));
    }
  }
  if (gzclose(f.release()) != Z_OK) {
    return absl::InternalError(absl::StrCat(path, ": close failed"));
  }
  return absl::OkStatus();
}

absl::Status WriteIdxDataset(const Dataset& data, int rows, int cols, const IdxPaths& paths) {
  if (data.dim != rows * cols) {
    return absl::InvalidArgumentError(
        absl::StrCat("data set has dim ", data.dim, ", not ", rows, "x", cols, " = ", rows * cols));
  }
  std::vector<uint8_t> pixels(data.features.size());
  for (size_t i = 0; i < pixels.size(); ++i) {
    const float v = std::clamp(data.features[i], 0.0f, 1.0f);
    pixels[i] = static_cast<uint8_t>(std::lround(v * 255.0f));
  }
  std::vector<uint8_t> labels;
  for (int32_t label : data.labels) {
    if (label < 0 || label > 255) {
      return absl::InvalidArgumentError(
          absl::StrCat("label ", label, " does not fit an IDX unsigned byte"));
    }
    labels.push_back(static_cast<uint8_t>(label));
  }
  if (absl::Status s = WriteIdxFile(paths.images, {data.num_examples, rows, cols}, pixels);
      !s.ok()) {
    return s;
  }
  return WriteIdxFile(paths.labels, {data.num_examples}, labels);
}

}  // namespace ps
