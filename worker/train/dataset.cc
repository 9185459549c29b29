#include "worker/train/dataset.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace ps {
namespace {

// Copies example i of `from` onto the end of `to`.
void AppendExample(const Dataset& from, int64_t i, Dataset& to) {
  const float* r = from.row(i);
  to.features.insert(to.features.end(), r, r + from.dim);
  to.labels.push_back(from.labels[i]);
  ++to.num_examples;
}

Dataset EmptyLike(const Dataset& full) {
  Dataset out;
  out.dim = full.dim;
  out.num_classes = full.num_classes;
  return out;
}

}  // namespace

Dataset ShardOf(const Dataset& full, int index, int count) {
  if (count < 1 || index < 0 || index >= count) {
    std::fprintf(stderr, "ShardOf: shard index %d of count %d is out of range\n", index, count);
    std::abort();
  }
  Dataset out = EmptyLike(full);
  const int64_t n = full.num_examples > index ? (full.num_examples - index + count - 1) / count : 0;
  out.features.reserve(static_cast<size_t>(n) * full.dim);
  out.labels.reserve(n);
  for (int64_t i = index; i < full.num_examples; i += count) {
    AppendExample(full, i, out);
  }
  return out;
}

Dataset Head(const Dataset& full, int64_t n) {
  Dataset out = EmptyLike(full);
  n = std::clamp<int64_t>(n, 0, full.num_examples);
  out.num_examples = n;
  out.features.assign(full.features.begin(), full.features.begin() + n * full.dim);
  out.labels.assign(full.labels.begin(), full.labels.begin() + n);
  return out;
}

}  // namespace ps
