#include "common/optimizer/lars.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace ps {
namespace {

float L2Norm(absl::Span<const float> v) {
  double sum = 0;
  for (float x : v) sum += static_cast<double>(x) * x;
  return static_cast<float>(std::sqrt(sum));
}

}  // namespace

proto::LayerNorms LayerNormsOf(absl::Span<const float> weights, absl::Span<const float> gradient) {
  proto::LayerNorms norms;
  norms.set_weight(L2Norm(weights));
  norms.set_gradient(L2Norm(gradient));
  return norms;
}

absl::StatusOr<float> LarsTrust(const proto::TableDef& def, const proto::LayerNorms* norms) {
  if (def.lars_eta() == 0) return 1.0f;
  if (norms == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "table '", def.name(), "' uses LARS (lars_eta ", def.lars_eta(),
        "): a push must carry layer_norms, the L2 norms of the whole table's parameters and "
        "of the push's whole gradient; nothing was applied"));
  }
  const float w = norms->weight();
  const float g = norms->gradient();
  if (!(std::isfinite(w) && w >= 0 && std::isfinite(g) && g >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("table '", def.name(), "': layer_norms must be finite and >= 0, got weight ",
                     w, " gradient ", g, "; nothing was applied"));
  }
  if (w == 0 || g == 0) return 1.0f;
  const double trust = static_cast<double>(def.lars_eta()) * w /
                       (static_cast<double>(g) + static_cast<double>(def.lars_beta()) * w);
  return static_cast<float>(trust);
}

}  // namespace ps
