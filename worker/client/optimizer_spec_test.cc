#include "worker/client/optimizer_spec.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

TEST(OptimizerSpecTest, SetsTheChosenRulesFieldsOnly) {
  OptimizerSpec spec;
  spec.optimizer = "adam";
  spec.beta1 = 0.8;
  spec.lr_schedule = "step";
  spec.lr_step_clocks = 10;
  spec.lr_gamma = 0.5;
  spec.warmup_clocks = 3;
  auto def = OptimizerFields(spec);
  ASSERT_TRUE(def.ok()) << def.status();
  EXPECT_EQ(def->optimizer(), proto::OPT_ADAM);
  EXPECT_FLOAT_EQ(def->beta1(), 0.8f);
  EXPECT_FLOAT_EQ(def->beta2(), 0.999f);
  EXPECT_EQ(def->momentum(), 0.0f);             // not Adam's
  EXPECT_EQ(def->initial_accumulator(), 0.0f);  // not Adam's
  EXPECT_EQ(def->lr_schedule(), proto::LR_STEP);
  EXPECT_EQ(def->lr_step_clocks(), 10u);
  EXPECT_EQ(def->warmup_clocks(), 3u);
  for (const char* name : {"sgd", "adagrad", "momentum", "nesterov", "rmsprop", "ftrl"}) {
    spec = OptimizerSpec();
    spec.optimizer = name;
    EXPECT_TRUE(OptimizerFields(spec).ok()) << name << ": " << OptimizerFields(spec).status();
  }
}

TEST(OptimizerSpecTest, BadNamesAndValuesNameTheFlag) {
  OptimizerSpec spec;
  spec.optimizer = "adamw";
  EXPECT_THAT(OptimizerFields(spec).status().message(),
              HasSubstr("--optimizer=adamw: expected one of sgd, adagrad"));
  spec = OptimizerSpec();
  spec.lr_schedule = "cosine";
  EXPECT_THAT(OptimizerFields(spec).status().message(),
              HasSubstr("--lr_schedule=cosine: expected one of constant, step, inv_sqrt"));
  spec = OptimizerSpec();
  spec.optimizer = "adam";
  spec.beta1 = 1.5;
  EXPECT_EQ(OptimizerFields(spec).status().message(),
            "optimizer flags: beta1 must be in [0, 1), got 1.5");
  spec = OptimizerSpec();
  spec.learning_rate = -1;
  EXPECT_THAT(OptimizerFields(spec).status().message(), HasSubstr("learning_rate must be > 0"));
}

}  // namespace
}  // namespace ps
