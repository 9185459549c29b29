#include "worker/lbfgs/lr_portions.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "absl/strings/str_cat.h"
#include "worker/train/libsvm_reader.h"

namespace ps::lbfgs {

void LrData::Add(float label, absl::Span<const uint64_t> idx, absl::Span<const float> vals) {
  indices.insert(indices.end(), idx.begin(), idx.end());
  values.insert(values.end(), vals.begin(), vals.end());
  offsets.push_back(indices.size());
  labels.push_back(label);
  for (const uint64_t i : idx) max_index = std::max(max_index, i);
}

absl::StatusOr<LrData> LoadLrData(const std::string& path) {
  absl::StatusOr<std::unique_ptr<LibsvmReader>> reader = LibsvmReader::Open(path);
  if (!reader.ok()) return reader.status();
  LrData data;
  SparseExample example;
  while (true) {
    absl::StatusOr<bool> more = (*reader)->Next(&example);
    if (!more.ok()) return more.status();
    if (!*more) break;
    data.Add(example.label, example.indices, example.values);
  }
  if (data.size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no examples"));
  }
  return data;
}

absl::StatusOr<PortionPlan> PlanPortion(const LrData& data, size_t begin, size_t end,
                                        const uint64_t* bias_key) {
  PortionPlan plan;
  plan.begin = begin;
  plan.end = end;
  const auto first = data.indices.begin() + static_cast<ptrdiff_t>(data.offsets[begin]);
  const auto last = data.indices.begin() + static_cast<ptrdiff_t>(data.offsets[end]);
  plan.keys.assign(first, last);
  if (bias_key != nullptr) {
    if (std::find(first, last, *bias_key) != last) {
      return absl::InvalidArgumentError(
          absl::StrCat("an example of examples [", begin, ", ", end, ") has feature ", *bias_key,
                       ", the bias key (a dense table's last key: raise ps_lbfgs --num_keys)"));
    }
    plan.keys.push_back(*bias_key);
  }
  std::sort(plan.keys.begin(), plan.keys.end());
  plan.keys.erase(std::unique(plan.keys.begin(), plan.keys.end()), plan.keys.end());
  plan.positions.reserve(static_cast<size_t>(last - first));
  for (auto it = first; it != last; ++it) {
    plan.positions.push_back(static_cast<uint32_t>(
        std::lower_bound(plan.keys.begin(), plan.keys.end(), *it) - plan.keys.begin()));
  }
  if (bias_key != nullptr) {
    plan.bias = std::lower_bound(plan.keys.begin(), plan.keys.end(), *bias_key) - plan.keys.begin();
  }
  return plan;
}

PortionResult LogisticPortion(const LrData& data, const PortionPlan& plan,
                              absl::Span<const float> weights) {
  PortionResult result;
  std::vector<double> gradient(plan.keys.size(), 0.0);
  const uint64_t base = data.offsets[plan.begin];
  for (size_t e = plan.begin; e < plan.end; ++e) {
    const uint64_t from = data.offsets[e], to = data.offsets[e + 1];
    double z = plan.bias >= 0 ? weights[plan.bias] : 0.0;
    for (uint64_t f = from; f < to; ++f) {
      z += static_cast<double>(weights[plan.positions[f - base]]) * data.values[f];
    }
    const double y = data.labels[e] > 0 ? 1.0 : -1.0;
    // log(1 + exp(-y z)), without overflow for large |z|.
    const double m = -y * z;
    result.loss += m > 0 ? m + std::log1p(std::exp(-m)) : std::log1p(std::exp(m));
    // d/dz = -y * sigmoid(-y z)
    const double dz = -y / (1.0 + std::exp(-m));
    for (uint64_t f = from; f < to; ++f) gradient[plan.positions[f - base]] += dz * data.values[f];
    if (plan.bias >= 0) gradient[plan.bias] += dz;
  }
  result.gradient.assign(gradient.begin(), gradient.end());
  return result;
}

}  // namespace ps::lbfgs
