#include "worker/train/update_filter.h"

#include <algorithm>
#include <cmath>

namespace ps {

UpdateFilter::UpdateFilter(uint32_t width, float threshold, size_t capacity)
    : width_(width), threshold_(threshold), capacity_(capacity) {}

void UpdateFilter::Add(absl::Span<const uint64_t> keys, absl::Span<const float> grads,
                       std::vector<uint64_t>* push_keys, std::vector<float>* push_grads) {
  for (size_t i = 0; i < keys.size(); ++i) {
    const float* g = grads.data() + i * width_;
    auto it = held_.find(keys[i]);
    float* sum = nullptr;
    if (it != held_.end()) {
      sum = sums_.data() + it->second * width_;
      for (uint32_t j = 0; j < width_; ++j) sum[j] += g[j];
    }
    const float* total = sum != nullptr ? sum : g;
    bool significant = threshold_ <= 0;
    for (uint32_t j = 0; j < width_ && !significant; ++j) {
      significant = std::fabs(total[j]) >= threshold_;
    }
    if (significant) {
      push_keys->push_back(keys[i]);
      push_grads->insert(push_grads->end(), total, total + width_);
      if (it != held_.end()) {
        free_slots_.push_back(it->second);
        held_.erase(it);
      }
      continue;
    }
    if (it != held_.end()) continue;  // accumulated in place
    size_t slot;
    if (!free_slots_.empty()) {
      slot = free_slots_.back();
      free_slots_.pop_back();
    } else {
      slot = sums_.size() / width_;
      sums_.resize(sums_.size() + width_);
    }
    std::copy(g, g + width_, sums_.begin() + slot * width_);
    held_.emplace(keys[i], slot);
  }
  if (held_.size() > capacity_) Flush(push_keys, push_grads);
}

void UpdateFilter::Flush(std::vector<uint64_t>* push_keys, std::vector<float>* push_grads) {
  for (const auto& [key, slot] : held_) {
    push_keys->push_back(key);
    const float* sum = sums_.data() + slot * width_;
    push_grads->insert(push_grads->end(), sum, sum + width_);
  }
  held_.clear();
  sums_.clear();
  free_slots_.clear();
}

}  // namespace ps
