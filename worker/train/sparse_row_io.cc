#include "worker/train/sparse_row_io.h"

#include <algorithm>
#include <utility>

namespace ps {

SparseRowIo::SparseRowIo(PsClient& client, std::string table, uint32_t width,
                         const SparseRowIoOptions& options)
    : client_(client),
      table_(std::move(table)),
      width_(width),
      options_(options),
      cache_(width, options.cache_staleness, options.cache_staleness > 0 ? options.cache_rows : 0),
      filter_(width, options.push_threshold, options.filter_rows) {}

absl::Status SparseRowIo::Pull(absl::Span<const uint64_t> keys, uint64_t step,
                               absl::Span<float> out) {
  to_pull_.clear();
  to_pull_at_.clear();
  for (size_t j = 0; j < keys.size(); ++j) {
    if (options_.cache_staleness > 0 && cache_.Lookup(keys[j], step, out.data() + j * width_)) {
      continue;
    }
    to_pull_.push_back(keys[j]);
    to_pull_at_.push_back(j);
  }
  if (to_pull_.empty()) return absl::OkStatus();
  pulled_.resize(to_pull_.size() * width_);
  if (absl::Status s = client_.PullKeys(table_, to_pull_, width_, absl::MakeSpan(pulled_));
      !s.ok()) {
    return s;
  }
  for (size_t j = 0; j < to_pull_.size(); ++j) {
    const float* row = pulled_.data() + j * width_;
    std::copy(row, row + width_, out.data() + to_pull_at_[j] * width_);
    if (options_.cache_staleness > 0) cache_.Insert(to_pull_[j], step, {row, width_});
  }
  keys_pulled_ += static_cast<int64_t>(to_pull_.size());
  return absl::OkStatus();
}

absl::Status SparseRowIo::SendHeld(uint64_t clock) {
  if (push_keys_.empty()) return absl::OkStatus();
  keys_pushed_ += static_cast<int64_t>(push_keys_.size());
  return client_.PushKeys(table_, push_keys_, width_, push_grads_, clock);
}

absl::Status SparseRowIo::Push(absl::Span<const uint64_t> keys, absl::Span<const float> grads,
                               uint64_t clock) {
  push_keys_.clear();
  push_grads_.clear();
  filter_.Add(keys, grads, &push_keys_, &push_grads_);
  return SendHeld(clock);
}

absl::Status SparseRowIo::Flush(uint64_t clock) {
  push_keys_.clear();
  push_grads_.clear();
  filter_.Flush(&push_keys_, &push_grads_);
  return SendHeld(clock);
}

}  // namespace ps
