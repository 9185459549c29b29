// The optimizer on rows scattered in memory: ApplyRows (rows of a key list)
// and ApplySparseRows (rows of a sparse table), against Apply and each
// other, with read-back.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "common/optimizer/optimizer.h"
#include "common/optimizer/optimizer_test_util.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

// FullDef, and with `transform` also clipping (by value and by norm) and
// weight decay.
proto::TableDef RowsDef(proto::OptimizerKind kind, bool transform) {
  proto::TableDef def = FullDef(kind);
  if (transform) {
    def.set_clip_value(0.4f);
    def.set_clip_norm(0.5f);
    def.set_weight_decay(0.01f);
  }
  return def;
}

// ApplyRows against Apply one row at a time, for every rule, with and
// without clipping and weight decay: exactly the same values, state and
// read-back.
TEST(OptimizerTest, ApplyRowsMatchesApplyRowByRowWithRepeatsAndReadBack) {
  constexpr size_t kRows = 64;
  const std::vector<size_t> rows = {4, 0, 63, 4, 24, 5, 4, 54, 3, 34, 35, 36, 1};
  for (proto::OptimizerKind kind : kAllKinds) {
    for (bool transform : {false, true}) {
      for (size_t width : {1u, 3u}) {
        SCOPED_TRACE(testing::Message() << proto::OptimizerKind_Name(kind) << " width " << width
                                        << (transform ? " clipped, decayed" : ""));
        auto opt = Make(RowsDef(kind, transform));
        const size_t spv = opt->state_per_value();
        std::vector<float> w0(kRows * width);
        for (size_t i = 0; i < w0.size(); ++i) w0[i] = 0.01f * static_cast<float>(i);
        Params by_apply(*opt, w0), by_rows(*opt, w0);
        std::vector<float> g(rows.size() * width);
        for (size_t i = 0; i < g.size(); ++i) g[i] = 0.5f - 0.07f * static_cast<float>(i);
        const std::vector<float> g_before = g;

        std::vector<float*> w_rows, state_rows;
        for (size_t r : rows) {
          w_rows.push_back(by_rows.w.data() + r * width);
          state_rows.push_back(spv ? by_rows.state.data() + r * width * spv : nullptr);
        }
        for (uint64_t clock : {0u, 7u}) {
          std::vector<float> out_ref(g.size());
          for (size_t i = 0; i < rows.size(); ++i) {
            const size_t at = rows[i] * width;
            opt->Apply(by_apply.w.data() + at, spv ? by_apply.state.data() + at * spv : nullptr,
                       g.data() + i * width, 1, width, clock);
            std::copy_n(by_apply.w.data() + at, width, out_ref.data() + i * width);
          }
          std::vector<float> out(g.size(), -1.0f);
          opt->ApplyRows(w_rows.data(), spv ? state_rows.data() : nullptr, g.data(), rows.size(),
                         width, clock, reinterpret_cast<char*>(out.data()));
          EXPECT_EQ(by_rows.w, by_apply.w);
          EXPECT_EQ(by_rows.state, by_apply.state);
          EXPECT_EQ(out, out_ref);  // row 4 reads back each of its three updates
        }
        EXPECT_EQ(g, g_before);  // the caller's gradient is left alone
      }
    }
  }
}

// ApplySparseRows on rows laid out as a sparse table's (values, state, a
// uint32 change tag) against ApplyRows on the same values and state kept
// apart: the same values, state and read-back, for every rule, with and
// without clipping; each updated row's tag raised to the push's when lower
// and left when higher; rows not listed untouched.
TEST(OptimizerTest, ApplySparseRowsMatchesApplyRowsAndRaisesTags) {
  constexpr size_t kRows = 40;
  const std::vector<size_t> rows = {7, 0, 39, 7, 12, 5, 7, 30, 3};
  for (proto::OptimizerKind kind : kAllKinds) {
    for (bool transform : {false, true}) {
      for (size_t width : {1u, 2u, 17u}) {
        SCOPED_TRACE(testing::Message() << proto::OptimizerKind_Name(kind) << " width " << width
                                        << (transform ? " clipped, decayed" : ""));
        auto opt = Make(RowsDef(kind, transform));
        const size_t spv = opt->state_per_value();
        const size_t tag_at = width * (1 + spv);
        const size_t stride = tag_at + 1;
        std::vector<float> w0(kRows * width);
        for (size_t i = 0; i < w0.size(); ++i) w0[i] = 0.01f * static_cast<float>(i) - 0.1f;
        Params apart(*opt, w0);
        // The same rows interleaved; tags: odd rows 9 (above the push's 5),
        // even rows 2 (below it).
        std::vector<float> interleaved(kRows * stride);
        for (size_t r = 0; r < kRows; ++r) {
          float* row = interleaved.data() + r * stride;
          std::copy_n(apart.w.data() + r * width, width, row);
          std::copy_n(apart.state.data() + r * width * spv, width * spv, row + width);
          const uint32_t tag = r % 2 == 1 ? 9 : 2;
          std::memcpy(row + tag_at, &tag, sizeof tag);
        }
        std::vector<float> g(rows.size() * width);
        for (size_t i = 0; i < g.size(); ++i) g[i] = 0.5f - 0.07f * static_cast<float>(i);
        std::vector<float*> w_rows, state_rows, sparse_rows;
        for (size_t r : rows) {
          w_rows.push_back(apart.w.data() + r * width);
          state_rows.push_back(spv ? apart.state.data() + r * width * spv : nullptr);
          sparse_rows.push_back(interleaved.data() + r * stride);
        }
        for (uint64_t clock : {0u, 7u}) {
          std::vector<float> out_ref(g.size()), out(g.size(), -1.0f);
          opt->ApplyRows(w_rows.data(), spv ? state_rows.data() : nullptr, g.data(), rows.size(),
                         width, clock, reinterpret_cast<char*>(out_ref.data()));
          opt->ApplySparseRows(sparse_rows.data(), g.data(), rows.size(), width, tag_at, 5, clock,
                               reinterpret_cast<char*>(out.data()));
          EXPECT_EQ(out, out_ref);
        }
        for (size_t r = 0; r < kRows; ++r) {
          const float* row = interleaved.data() + r * stride;
          EXPECT_EQ(
              std::vector<float>(row, row + width),
              std::vector<float>(apart.w.begin() + r * width, apart.w.begin() + (r + 1) * width))
              << "row " << r;
          EXPECT_EQ(std::vector<float>(row + width, row + tag_at),
                    std::vector<float>(apart.state.begin() + r * width * spv,
                                       apart.state.begin() + (r + 1) * width * spv))
              << "row " << r;
          uint32_t tag;
          std::memcpy(&tag, row + tag_at, sizeof tag);
          const bool listed = std::find(rows.begin(), rows.end(), r) != rows.end();
          EXPECT_EQ(tag, r % 2 == 1 ? 9u : (listed ? 5u : 2u)) << "row " << r;
        }
      }
    }
  }
}

TEST(OptimizerTest, ReadBackNeedsNoAlignment) {
  auto opt = Make(Def(proto::OPT_SGD, 1.0f));
  std::vector<float> w = {1.0f, 2.0f};
  float* rows[] = {&w[1], &w[0]};
  const float g[] = {0.5f, 0.25f};
  char out[1 + 2 * sizeof(float)];
  opt->ApplyRows(rows, nullptr, g, 2, 1, 0, out + 1);
  float read[2];
  std::memcpy(read, out + 1, sizeof read);
  EXPECT_EQ(read[0], 1.5f);   // 2 - 0.5
  EXPECT_EQ(read[1], 0.75f);  // 1 - 0.25
}

}  // namespace
}  // namespace ps
