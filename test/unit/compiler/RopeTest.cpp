// RoPE tables resolved by the compiler, against closed forms and against
// values printed by transformers 5.24 (ROPE_INIT_FUNCTIONS["yarn"]).
#include "compiler/conversion/Rope.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/MLIRContext.h"

#include <cmath>
#include <gtest/gtest.h>

using namespace mlir;

namespace {

class RopeTest : public ::testing::Test {
protected:
  DictionaryAttr dict(std::initializer_list<std::pair<const char *, Attribute>> items) {
    SmallVector<NamedAttribute> attrs;
    for (auto &[k, v] : items)
      attrs.push_back(b.getNamedAttr(k, v));
    return b.getDictionaryAttr(attrs);
  }
  MLIRContext ctx;
  Builder b{&ctx};
};

TEST_F(RopeTest, DefaultIsThetaPower) {
  moe::RopeTable t;
  std::string error;
  ASSERT_TRUE(moe::computeRope(12, 1e6, {}, 128, t, error));
  ASSERT_EQ(t.invFreq.size(), 6u);
  for (int i = 0; i < 6; ++i)
    EXPECT_NEAR(t.invFreq[i], std::pow(1e6, -2.0 * i / 12), 1e-6 * std::pow(10.0, -i));
  EXPECT_EQ(t.attentionFactor, 1.0f);
}

TEST_F(RopeTest, LinearDividesByFactor) {
  moe::RopeTable t;
  std::string error;
  auto scaling = dict({{"rope_type", b.getStringAttr("linear")},
                       {"factor", b.getF64FloatAttr(4.0)}});
  ASSERT_TRUE(moe::computeRope(8, 1e4, scaling, 128, t, error));
  for (int i = 0; i < 4; ++i)
    EXPECT_NEAR(t.invFreq[i], std::pow(1e4, -2.0 * i / 8) / 4, 1e-7);
}

TEST_F(RopeTest, YarnMatchesTransformersSmall) {
  // test/e2e/goldens/deepseek_v2: dim 8, theta 1e4, factor 4, original 64.
  moe::RopeTable t;
  std::string error;
  auto scaling = dict({{"type", b.getStringAttr("yarn")},
                       {"factor", b.getF64FloatAttr(4.0)},
                       {"mscale", b.getF64FloatAttr(0.707)},
                       {"mscale_all_dim", b.getF64FloatAttr(0.707)},
                       {"original_max_position_embeddings", b.getI64IntegerAttr(64)},
                       {"beta_fast", b.getI64IntegerAttr(32)},
                       {"beta_slow", b.getI64IntegerAttr(1)}});
  ASSERT_TRUE(moe::computeRope(8, 1e4, scaling, 256, t, error)) << error;
  const float expected[] = {1.0f, 0.0625f, 0.0024999999441206455f, 0.0002500000118743628f};
  for (int i = 0; i < 4; ++i)
    EXPECT_FLOAT_EQ(t.invFreq[i], expected[i]) << i;
  EXPECT_FLOAT_EQ(t.attentionFactor, 1.0f);
}

TEST_F(RopeTest, YarnMatchesTransformersDeepseekLike) {
  // dim 64, theta 1e4, factor 40, original 4096, mscale 1, mscale_all_dim 0.5.
  moe::RopeTable t;
  std::string error;
  auto scaling = dict({{"type", b.getStringAttr("yarn")},
                       {"factor", b.getF64FloatAttr(40.0)},
                       {"mscale", b.getF64FloatAttr(1.0)},
                       {"mscale_all_dim", b.getF64FloatAttr(0.5)},
                       {"original_max_position_embeddings", b.getI64IntegerAttr(4096)}});
  ASSERT_TRUE(moe::computeRope(64, 1e4, scaling, 163840, t, error)) << error;
  ASSERT_EQ(t.invFreq.size(), 32u);
  const float head[] = {1.0f, 0.7498942017555237f, 0.5623413324356079f,
                        0.4216965138912201f, 0.3162277638912201f, 0.23713736236095428f};
  for (int i = 0; i < 6; ++i)
    EXPECT_NEAR(t.invFreq[i], head[i], 1e-6f * head[i]) << i;
  const float tail[] = {5.928434347879374e-06f, 4.445698323252145e-06f,
                        3.3338035336782923e-06f};
  for (int i = 0; i < 3; ++i)
    EXPECT_NEAR(t.invFreq[29 + i], tail[i], 1e-5f * tail[i]) << i;
  EXPECT_NEAR(t.attentionFactor, 1.1557219901962608, 1e-6);
}

TEST_F(RopeTest, UnsupportedScalingIsAnError) {
  moe::RopeTable t;
  std::string error;
  auto scaling = dict({{"rope_type", b.getStringAttr("dynamic")},
                       {"factor", b.getF64FloatAttr(2.0)}});
  EXPECT_FALSE(moe::computeRope(8, 1e4, scaling, 128, t, error));
  EXPECT_EQ(error, "rope scaling 'dynamic' is not supported (supported: default, linear, yarn)");
}

} // namespace
