// The pull and push ops of a model's blocks over one flat vector: block b
// is table "<prefix>/<b's name>", keys [0, block size), at the block's
// offset in the vector (the layout of Model's parameters and gradients).
#ifndef PS_WORKER_TRAIN_MODEL_OPS_H_
#define PS_WORKER_TRAIN_MODEL_OPS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "worker/client/param_client.h"
#include "worker/train/model.h"

namespace ps {

// Op is PullRange (flat: absl::Span<float>) or PushRange
// (absl::Span<const float>).
template <typename Op, typename Flat>
std::vector<Op> ModelOps(const Model& model, const std::string& prefix, Flat flat) {
  std::vector<Op> ops;
  int64_t offset = 0;
  for (const ParamBlock& block : model.blocks()) {
    ops.push_back({absl::StrCat(prefix, "/", block.name), 0, static_cast<uint64_t>(block.size),
                   flat.subspan(offset, block.size)});
    offset += block.size;
  }
  return ops;
}

inline std::vector<PullRange> ModelPullOps(const Model& model, const std::string& prefix,
                                           absl::Span<float> flat) {
  return ModelOps<PullRange>(model, prefix, flat);
}

inline std::vector<PushRange> ModelPushOps(const Model& model, const std::string& prefix,
                                           absl::Span<const float> flat) {
  return ModelOps<PushRange>(model, prefix, flat);
}

}  // namespace ps

#endif  // PS_WORKER_TRAIN_MODEL_OPS_H_
