#include "common/optimizer/lbfgs_vectors.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ps {
namespace {

// A push adds g to the accumulator, nothing else: no learning rate, no
// clipping or decay (ValidateTableDef refuses them on OPT_LBFGS tables).
class LbfgsAccumulator final : public Optimizer {
 public:
  explicit LbfgsAccumulator(int memory) : spv_(LbfgsStatePerValue(memory)) {}

  int state_per_value() const override { return spv_; }

  void InitState(float* state, size_t n) const override {
    std::memset(state, 0, n * sizeof(float));
  }

  void ApplyTrusted(float* /*w*/, float* state, const float* g, size_t rows, size_t width,
                    uint64_t /*clock*/, float /*trust*/) const override {
    Accumulate(state, g, rows * width);
  }

  void ApplyRowsTrusted(float* const* w_rows, float* const* state_rows, const float* g,
                        size_t num_rows, size_t width, uint64_t /*clock*/, char* out,
                        float /*trust*/) const override {
    for (size_t r = 0; r < num_rows; ++r) {
      Accumulate(state_rows[r], g + r * width, width);
      if (out != nullptr) {
        std::memcpy(out + r * width * sizeof(float), w_rows[r], width * sizeof(float));
      }
    }
  }

  void ApplySparseRows(float* const* rows, const float* g, size_t num_rows, size_t width,
                       size_t tag_at, uint32_t tag, uint64_t /*clock*/, char* out) const override {
    for (size_t r = 0; r < num_rows; ++r) {
      float* row = rows[r];
      Accumulate(row + width, g + r * width, width);
      uint32_t t;
      std::memcpy(&t, row + tag_at, sizeof t);
      if (tag > t) std::memcpy(row + tag_at, &tag, sizeof tag);
      if (out != nullptr) std::memcpy(out + r * width * sizeof(float), row, width * sizeof(float));
    }
  }

 private:
  void Accumulate(float* state, const float* g, size_t n) const {
    for (size_t i = 0; i < n; ++i) state[i * spv_ + kLbfgsGradientSlot] += g[i];
  }

  const int spv_;
};

// Vector v of value i.
inline float& At(float* values, float* state, int spv, size_t i, uint32_t v) {
  return v == 0 ? values[i] : state[i * spv + (v - 1)];
}

}  // namespace

std::unique_ptr<Optimizer> MakeLbfgsAccumulator(const proto::TableDef& def) {
  return std::make_unique<LbfgsAccumulator>(static_cast<int>(def.lbfgs_memory()));
}

absl::Status CheckVectorOps(absl::Span<const proto::VectorOp> ops, int state_per_value,
                            absl::string_view table) {
  for (size_t k = 0; k < ops.size(); ++k) {
    const proto::VectorOp& op = ops[k];
    if (!proto::VectorOp::Kind_IsValid(op.kind())) {
      return absl::InvalidArgumentError(
          absl::StrCat("table '", table, "': vector op ", k, " has unknown kind ", op.kind()));
    }
    for (const uint32_t v : {op.dst(), op.src()}) {
      if (v > static_cast<uint32_t>(state_per_value)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "table '", table, "': vector op ", k, " names vector ", v, ", past the table's last (",
            state_per_value, ": the values and one per state slot)"));
      }
    }
  }
  return absl::OkStatus();
}

void RunVectorOps(absl::Span<const proto::VectorOp> ops, float* values, float* state, size_t n,
                  int state_per_value, absl::Span<double> partials) {
  const int spv = state_per_value;
  size_t dot = 0;
  for (const proto::VectorOp& op : ops) {
    const uint32_t d = op.dst(), s = op.src();
    const float alpha = static_cast<float>(op.alpha());
    switch (op.kind()) {
      case proto::VectorOp::DOT: {
        double sum = 0;
        for (size_t i = 0; i < n; ++i) {
          sum += static_cast<double>(At(values, state, spv, i, d)) *
                 static_cast<double>(At(values, state, spv, i, s));
        }
        partials[dot++] += sum;
        break;
      }
      case proto::VectorOp::AXPY:
        for (size_t i = 0; i < n; ++i) {
          At(values, state, spv, i, d) += alpha * At(values, state, spv, i, s);
        }
        break;
      case proto::VectorOp::SCALE:
        for (size_t i = 0; i < n; ++i) {
          float& x = At(values, state, spv, i, d);
          x = alpha == 0 ? 0.0f : x * alpha;
        }
        break;
      case proto::VectorOp::COPY:
        for (size_t i = 0; i < n; ++i) At(values, state, spv, i, d) = At(values, state, spv, i, s);
        break;
      default:  // CheckVectorOps refused it
        break;
    }
  }
}

}  // namespace ps
