#include "server/store/initializer.h"

#include <cmath>

#include "common/hash.h"

namespace ps {
namespace {

// Uniform in [0, 1) from the top 24 bits of a hash (exact in float).
inline float UnitFloat(uint64_t h) { return static_cast<float>(h >> 40) * (1.0f / 16777216.0f); }

}  // namespace

void InitializeValues(const proto::TableDef& def, uint64_t first_key, uint64_t num_keys,
                      float* out) {
  const uint64_t width = def.width();
  const uint64_t n = num_keys * width;
  const uint64_t first = first_key * width;
  switch (def.initializer()) {
    case proto::INIT_UNIFORM: {
      const float lo = def.init_low(), span = def.init_high() - def.init_low();
      for (uint64_t i = 0; i < n; ++i) {
        out[i] = lo + span * UnitFloat(HashCombine(def.seed(), first + i));
      }
      return;
    }
    case proto::INIT_NORMAL: {
      // Box-Muller on two independent hashes of the value's index.
      for (uint64_t i = 0; i < n; ++i) {
        const uint64_t h = HashCombine(def.seed(), first + i);
        const double u1 = (static_cast<double>(h >> 11) + 0.5) * 0x1.0p-53;
        const double u2 = static_cast<double>(Mix64(h) >> 11) * 0x1.0p-53;
        const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
        out[i] = static_cast<float>(def.init_mean() + def.init_stddev() * z);
      }
      return;
    }
    case proto::INIT_ZEROS:
    default:
      for (uint64_t i = 0; i < n; ++i) out[i] = 0.0f;
      return;
  }
}

}  // namespace ps
