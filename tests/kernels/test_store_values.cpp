// dequantize_store (kernels/store_values.hpp): every store's values read back within half a step of the
// binary32 values quantized (a whole step where q4_0 / MLX clamp), with their scale groups.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ropecheck/kernels/store_values.hpp"

namespace ropecheck::kernels {
namespace {

TEST(StoreValues, ReadBackWithinOneStepOfTheQuantizedValues) {
  constexpr std::int64_t T = 2, H = 2, D = 64;
  std::vector<float> x(T * H * D);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)) * 3.0);
  for (const char* item : {"e4m3fn", "e5m2:nonfinite:per-token-head", "q8_0", "q4_0", "int4g32", "int8g64:bf16"}) {
    std::string why;
    const auto s = quant::parse_store(item, why);
    ASSERT_TRUE(s) << why;
    const StoredValuesAndSteps v = dequantize_store(quantize_store(x, T, H, D, *s), *s, T, H, D);
    ASSERT_EQ(v.value.size(), x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      EXPECT_LE(std::fabs(v.value[i] - x[i]), v.step[i]) << item << " element " << i;
      EXPECT_GT(v.step[i], 0) << item;
    }
    const std::int64_t per_group = s->kind == quant::StoreKind::fp8 ? (item == std::string("e4m3fn") ? H * D : D)
                                   : s->kind == quant::StoreKind::affine ? s->affine.group_size
                                                                         : 32;
    EXPECT_EQ(v.group.back(), T * H * D / per_group - 1) << item;
  }
}

// A given scale is the set's, not stored (the store has no scales): the values read back with each head's
// scale (this segfaulted when props / drift --stores met a given scale).
TEST(StoreValues, AGivenScaleReadsBackWithEachHeadsScale) {
  constexpr std::int64_t T = 3, H = 2, D = 32;
  std::vector<float> x(T * H * D);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::cos(0.21 * static_cast<double>(i)) * 0.7);
  for (const char* item : {"e4m3fn:scale=0.0625", "e5m2:scale=0.5/0.03125"}) {
    std::string why;
    const auto s = quant::parse_store(item, why);
    ASSERT_TRUE(s) << why;
    const StoredTensor st = quantize_store(x, T, H, D, *s);
    EXPECT_TRUE(st.scales.empty()) << item;
    const StoredValuesAndSteps v = dequantize_store(st, *s, T, H, D);
    for (std::size_t i = 0; i < x.size(); ++i) {
      EXPECT_LE(std::fabs(v.value[i] - x[i]), v.step[i]) << item << " element " << i;
      EXPECT_EQ(v.scale[i], quant::given_scale(*s, static_cast<std::int64_t>(i) / D % H)) << item;
    }
    EXPECT_EQ(v.group.back(), T * H * D - 1) << item;  // every element its own group
  }
}

TEST(StoreValues, AWrongStoredScaleShowsInTheValues) {
  std::vector<float> x(32, 1.5f);
  x[3] = -2.25f;
  std::string why;
  const quant::StoreSpec s = *quant::parse_store("q8_0", why);
  const StoredValuesAndSteps good = dequantize_store(quantize_store(x, 1, 1, 32, s), s, 1, 1, 32);
  const StoredValuesAndSteps bad = dequantize_store(quantize_store(x, 1, 1, 32, s, StoreMistake::scale_inverted), s, 1, 1, 32);
  EXPECT_NEAR(good.value[3], -2.25, good.step[3]);
  EXPECT_GT(std::fabs(bad.value[3] + 2.25), 100 * good.step[3]);
}

}  // namespace
}  // namespace ropecheck::kernels
