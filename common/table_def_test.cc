#include "common/table_def.h"

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util/table_defs.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

proto::TableDef ValidDef() { return WithSgd(DenseTableDef("t", 100, 4), 0.1f); }

// The message of ValidateTableDef for ValidDef() changed by `change`.
std::string Refusal(const std::function<void(proto::TableDef*)>& change) {
  proto::TableDef def = ValidDef();
  change(&def);
  const absl::Status s = ValidateTableDef(def);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  return std::string(s.message());
}

TEST(TableDefTest, AcceptsEveryRuleAndScheduleWithUsualSettings) {
  proto::TableDef def = ValidDef();
  def.set_initial_accumulator(0.1f);
  def.set_epsilon(1e-8f);
  def.set_momentum(0.9f);
  def.set_rho(0.9f);
  def.set_beta1(0.9f);
  def.set_beta2(0.999f);
  def.set_ftrl_beta(1.0f);
  def.set_l1(0.01f);
  def.set_l2(0.01f);
  def.set_weight_decay(1e-4f);
  def.set_clip_value(5.0f);
  def.set_clip_norm(1.0f);
  def.set_warmup_clocks(100);
  for (int kind = proto::OptimizerKind_MIN; kind <= proto::OptimizerKind_MAX; ++kind) {
    // Not an update rule: LbfgsNeedsItsMemoryAndNothingOfAnUpdateRule.
    if (kind == proto::OPT_LBFGS) continue;
    def.set_optimizer(static_cast<proto::OptimizerKind>(kind));
    def.set_lr_schedule(proto::LR_CONSTANT);
    EXPECT_TRUE(ValidateTableDef(def).ok()) << ValidateTableDef(def);
    def.set_lr_schedule(proto::LR_STEP);
    def.set_lr_step_clocks(10);
    def.set_lr_gamma(0.5f);
    EXPECT_TRUE(ValidateTableDef(def).ok()) << ValidateTableDef(def);
    def.set_lr_schedule(proto::LR_INV_SQRT);
    def.set_lr_decay_offset(1.0f);
    EXPECT_TRUE(ValidateTableDef(def).ok()) << ValidateTableDef(def);
  }
}

TEST(TableDefTest, AcceptsEachTableKind) {
  proto::TableDef def = ValidDef();
  def.set_kind(proto::TABLE_SPARSE);
  def.set_num_keys(0);
  EXPECT_TRUE(ValidateTableDef(def).ok()) << ValidateTableDef(def);
  def.set_num_buckets(4096);
  EXPECT_TRUE(ValidateTableDef(def).ok()) << ValidateTableDef(def);
  EXPECT_EQ(Refusal([](proto::TableDef* d) { d->set_kind(static_cast<proto::TableKind>(5)); }),
            "table 't': unknown kind 5");
}

TEST(TableDefTest, SparseAndDenseTablesKeepToTheirOwnFields) {
  auto sparse = [](proto::TableDef* d) {
    d->set_kind(proto::TABLE_SPARSE);
    d->set_num_keys(0);
  };
  EXPECT_EQ(Refusal([&](proto::TableDef* d) {
              sparse(d);
              d->set_num_keys(10);
            }),
            "table 't': a sparse table takes any uint64 key: leave num_keys 0, got 10");
  EXPECT_THAT(Refusal([&](proto::TableDef* d) {
                sparse(d);
                d->set_num_buckets(kMaxSparseBuckets + 1);
              }),
              HasSubstr("num_buckets must be <= 1048576, got 1048577"));
  EXPECT_THAT(Refusal([&](proto::TableDef* d) {
                sparse(d);
                d->set_width(kMaxSparseWidth + 1);
              }),
              HasSubstr("width must be <= 65536 for a sparse table"));
  EXPECT_THAT(Refusal([](proto::TableDef* d) { d->set_num_buckets(8); }),
              HasSubstr("are for sparse tables (kind TABLE_SPARSE), not dense ones"));
  EXPECT_THAT(Refusal([](proto::TableDef* d) { d->set_max_rows(8); }),
              HasSubstr("are for sparse tables"));
  // Tiered tables: sparse, with a cache (eviction applies to them too:
  // tiered_eviction_test).
  EXPECT_THAT(Refusal([](proto::TableDef* d) {
                d->set_storage(proto::STORAGE_TIERED);
                d->set_cache_mb(8);
              }),
              HasSubstr("are for sparse tables"));
  EXPECT_THAT(Refusal([&](proto::TableDef* d) {
                sparse(d);
                d->set_storage(proto::STORAGE_TIERED);
              }),
              HasSubstr("needs cache_mb >= 1"));
  EXPECT_THAT(Refusal([&](proto::TableDef* d) {
                sparse(d);
                d->set_cache_mb(8);
              }),
              HasSubstr("cache_mb is for tiered tables"));
  EXPECT_THAT(Refusal([&](proto::TableDef* d) {
                sparse(d);
                d->set_admit_after_pushes(300);
              }),
              HasSubstr("admit_after_pushes must be <= 255, got 300"));
  EXPECT_THAT(Refusal([&](proto::TableDef* d) {
                sparse(d);
                d->set_admit_probability(1.5f);
              }),
              HasSubstr("admit_probability must be in [0, 1], got 1.5"));
  EXPECT_THAT(Refusal([&](proto::TableDef* d) {
                sparse(d);
                d->set_evict_after_clocks(5);
                d->set_evict_after_seconds(5);
              }),
              HasSubstr("not both"));
}

TEST(TableDefTest, NamesTheFieldOfANonFiniteHyperParameter) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(Refusal([&](proto::TableDef* d) { d->set_beta1(nan); }),
            "table 't': beta1 must be finite, got nan");
  EXPECT_EQ(Refusal([&](proto::TableDef* d) { d->set_clip_norm(inf); }),
            "table 't': clip_norm must be finite, got inf");
  EXPECT_EQ(Refusal([&](proto::TableDef* d) { d->set_lr_decay_offset(-inf); }),
            "table 't': lr_decay_offset must be finite, got -inf");
  EXPECT_EQ(Refusal([&](proto::TableDef* d) { d->set_learning_rate(nan); }),
            "table 't': learning_rate must be finite, got nan");
}

TEST(TableDefTest, DecayRatesMustBeInZeroToOne) {
  EXPECT_EQ(Refusal([](proto::TableDef* d) { d->set_beta1(1.5f); }),
            "table 't': beta1 must be in [0, 1), got 1.5");
  EXPECT_EQ(Refusal([](proto::TableDef* d) { d->set_beta2(1.0f); }),
            "table 't': beta2 must be in [0, 1), got 1");
  EXPECT_EQ(Refusal([](proto::TableDef* d) { d->set_momentum(-0.1f); }),
            "table 't': momentum must be in [0, 1), got -0.1");
  EXPECT_EQ(Refusal([](proto::TableDef* d) { d->set_rho(1.0f); }),
            "table 't': rho must be in [0, 1), got 1");
}

TEST(TableDefTest, NonNegativeHyperParameters) {
  EXPECT_EQ(Refusal([](proto::TableDef* d) { d->set_epsilon(-1e-8f); }),
            "table 't': epsilon must be >= 0, got -1e-08");
  EXPECT_EQ(Refusal([](proto::TableDef* d) { d->set_ftrl_beta(-1.0f); }),
            "table 't': ftrl_beta must be >= 0, got -1");
  EXPECT_EQ(Refusal([](proto::TableDef* d) { d->set_l1(-0.5f); }),
            "table 't': l1 must be >= 0, got -0.5");
  EXPECT_EQ(Refusal([](proto::TableDef* d) { d->set_l2(-0.5f); }),
            "table 't': l2 must be >= 0, got -0.5");
  EXPECT_EQ(Refusal([](proto::TableDef* d) { d->set_weight_decay(-0.01f); }),
            "table 't': weight_decay must be >= 0, got -0.01");
  EXPECT_EQ(Refusal([](proto::TableDef* d) { d->set_clip_value(-1.0f); }),
            "table 't': clip_value must be >= 0, got -1");
  EXPECT_EQ(Refusal([](proto::TableDef* d) { d->set_clip_norm(-2.0f); }),
            "table 't': clip_norm must be >= 0, got -2");
  EXPECT_EQ(Refusal([](proto::TableDef* d) { d->set_initial_accumulator(-1.0f); }),
            "table 't': initial_accumulator must be >= 0, got -1");
}

TEST(TableDefTest, LarsOnDenseTablesWithAProportionalRule) {
  proto::TableDef def = ValidDef();
  def.set_lars_eta(0.001f);
  def.set_lars_beta(5e-4f);
  for (proto::OptimizerKind kind : {proto::OPT_SGD, proto::OPT_MOMENTUM, proto::OPT_NESTEROV}) {
    def.set_optimizer(kind);
    EXPECT_TRUE(ValidateTableDef(def).ok()) << ValidateTableDef(def);
  }
  EXPECT_EQ(Refusal([](proto::TableDef* d) {
              d->set_lars_eta(0.001f);
              d->set_optimizer(proto::OPT_ADAGRAD);
              d->set_initial_accumulator(0.1f);
            }),
            "table 't': LARS (lars_eta) needs OPT_SGD, OPT_MOMENTUM or OPT_NESTEROV, not "
            "OPT_ADAGRAD (which normalizes the gradient's scale away)");
  EXPECT_EQ(Refusal([](proto::TableDef* d) {
              d->set_lars_eta(0.001f);
              d->set_kind(proto::TABLE_SPARSE);
              d->set_num_keys(0);
            }),
            "table 't': LARS (lars_eta) is for dense tables, not sparse ones");
  EXPECT_EQ(Refusal([](proto::TableDef* d) { d->set_lars_beta(0.01f); }),
            "table 't': lars_beta (0.01) is used only with LARS on: set lars_eta > 0");
  EXPECT_EQ(Refusal([](proto::TableDef* d) { d->set_lars_eta(-1.0f); }),
            "table 't': lars_eta must be >= 0, got -1");
  EXPECT_EQ(
      Refusal([](proto::TableDef* d) { d->set_lars_eta(std::numeric_limits<float>::infinity()); }),
      "table 't': lars_eta must be finite, got inf");
}

TEST(TableDefTest, LbfgsNeedsItsMemoryAndNothingOfAnUpdateRule) {
  proto::TableDef def = ValidDef();
  def.set_optimizer(proto::OPT_LBFGS);
  def.set_lbfgs_memory(10);
  def.set_learning_rate(0);  // unused by L-BFGS
  EXPECT_TRUE(ValidateTableDef(def).ok()) << ValidateTableDef(def);
  EXPECT_EQ(TableDefSummary(def).find("opt=OPT_LBFGS") != std::string::npos, true);
  EXPECT_EQ(Refusal([](proto::TableDef* d) { d->set_optimizer(proto::OPT_LBFGS); }),
            "table 't': OPT_LBFGS needs lbfgs_memory in [1, 64], got 0");
  EXPECT_EQ(Refusal([](proto::TableDef* d) {
              d->set_optimizer(proto::OPT_LBFGS);
              d->set_lbfgs_memory(65);
            }),
            "table 't': OPT_LBFGS needs lbfgs_memory in [1, 64], got 65");
  EXPECT_EQ(Refusal([](proto::TableDef* d) { d->set_lbfgs_memory(5); }),
            "table 't': lbfgs_memory (5) is for OPT_LBFGS tables, not OPT_SGD");
  EXPECT_EQ(Refusal([](proto::TableDef* d) {
              d->set_optimizer(proto::OPT_LBFGS);
              d->set_lbfgs_memory(5);
              d->set_weight_decay(0.1f);
            }),
            "table 't': weight_decay (0.1) does not apply to OPT_LBFGS tables (pushes accumulate "
            "the gradient; rows keep their history): leave it 0");
  EXPECT_THAT(Refusal([](proto::TableDef* d) {
                d->set_optimizer(proto::OPT_LBFGS);
                d->set_lbfgs_memory(5);
                d->set_kind(proto::TABLE_SPARSE);
                d->set_num_keys(0);
                d->set_max_rows(100);
              }),
              HasSubstr("max_rows (100) does not apply to OPT_LBFGS tables"));
}

TEST(TableDefTest, AdagradNeedsAnAccumulatorOrEpsilon) {
  EXPECT_THAT(Refusal([](proto::TableDef* d) { d->set_optimizer(proto::OPT_ADAGRAD); }),
              HasSubstr("AdaGrad needs initial_accumulator > 0 or epsilon > 0"));
}

TEST(TableDefTest, AdamAndRmsPropNeedPositiveEpsilon) {
  EXPECT_EQ(Refusal([](proto::TableDef* d) { d->set_optimizer(proto::OPT_ADAM); }),
            "table 't': OPT_ADAM needs epsilon > 0 (else a value whose gradients were all 0 "
            "divides 0 by 0)");
  EXPECT_THAT(Refusal([](proto::TableDef* d) { d->set_optimizer(proto::OPT_RMSPROP); }),
              HasSubstr("OPT_RMSPROP needs epsilon > 0"));
}

TEST(TableDefTest, SchedulesNeedTheirParameters) {
  EXPECT_EQ(
      Refusal([](proto::TableDef* d) { d->set_lr_schedule(static_cast<proto::LrSchedule>(9)); }),
      "table 't': unknown lr_schedule 9");
  EXPECT_EQ(Refusal([](proto::TableDef* d) {
              d->set_lr_schedule(proto::LR_STEP);
              d->set_lr_gamma(0.5f);
            }),
            "table 't': LR_STEP needs lr_step_clocks >= 1, got 0");
  EXPECT_EQ(Refusal([](proto::TableDef* d) {
              d->set_lr_schedule(proto::LR_STEP);
              d->set_lr_step_clocks(10);
            }),
            "table 't': LR_STEP needs lr_gamma in (0, 1], got 0");
  EXPECT_EQ(Refusal([](proto::TableDef* d) {
              d->set_lr_schedule(proto::LR_STEP);
              d->set_lr_step_clocks(10);
              d->set_lr_gamma(1.5f);
            }),
            "table 't': LR_STEP needs lr_gamma in (0, 1], got 1.5");
  EXPECT_EQ(Refusal([](proto::TableDef* d) { d->set_lr_schedule(proto::LR_INV_SQRT); }),
            "table 't': LR_INV_SQRT needs lr_decay_offset > 0, got 0");
  // A schedule's parameters do not matter to another schedule.
  proto::TableDef def = ValidDef();
  def.set_lr_gamma(7.0f);
  EXPECT_TRUE(ValidateTableDef(def).ok());
}

TEST(TableDefTest, KeepsTheExistingChecks) {
  EXPECT_EQ(Refusal([](proto::TableDef* d) { d->set_name(""); }), "table '': name is empty");
  EXPECT_EQ(Refusal([](proto::TableDef* d) { d->set_width(0); }), "table 't': width must be >= 1");
  EXPECT_EQ(Refusal([](proto::TableDef* d) { d->set_learning_rate(0); }),
            "table 't': learning_rate must be > 0, got 0");
  EXPECT_EQ(
      Refusal([](proto::TableDef* d) { d->set_optimizer(static_cast<proto::OptimizerKind>(42)); }),
      "table 't': unknown optimizer 42");
}

TEST(TableDefTest, SummaryShowsTheRulesHyperParameters) {
  proto::TableDef def = ValidDef();
  EXPECT_EQ(TableDefSummary(def), "'t' keys=100 width=4 init=INIT_ZEROS opt=OPT_SGD lr=0.1");
  def.set_optimizer(proto::OPT_ADAM);
  def.set_beta1(0.9f);
  def.set_beta2(0.999f);
  def.set_epsilon(1e-8f);
  def.set_lr_schedule(proto::LR_STEP);
  def.set_lr_gamma(0.5f);
  def.set_lr_step_clocks(100);
  def.set_warmup_clocks(10);
  def.set_clip_norm(1.0f);
  def.set_weight_decay(0.01f);
  EXPECT_EQ(TableDefSummary(def),
            "'t' keys=100 width=4 init=INIT_ZEROS opt=OPT_ADAM lr=0.1 beta1=0.9 beta2=0.999 "
            "epsilon=1e-08 schedule=LR_STEP(gamma=0.5 every=100) warmup=10 clip_norm=1 "
            "weight_decay=0.01");
  def = ValidDef();
  def.set_optimizer(proto::OPT_FTRL);
  def.set_ftrl_beta(1.0f);
  def.set_l1(0.5f);
  def.set_l2(0.25f);
  EXPECT_THAT(TableDefSummary(def), HasSubstr("opt=OPT_FTRL lr=0.1 ftrl_beta=1 l1=0.5 l2=0.25"));
}

}  // namespace
}  // namespace ps
