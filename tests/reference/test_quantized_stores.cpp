// reference/quantized_stores.hpp: what `golden --stores` names and computes per block of tokens.
//   - parse_store reads every documented item and refuses the rest with a reason; a given FP8 scale
//     (scale=V, scale=V1/V2/...) is rounded once to binary32, item() parses back to the same spec, and
//     store_block codes it as fp8(y / s) per head with the element's own margin;
//   - scale_groups_per_token and store_head_dim_problem follow each store's grouping;
//   - store_block lays out codes, scales and margins in [token, head, channel] order and agrees with
//     the owners' binary32 quantizers (core/quantized.hpp) on binary32 inputs wherever a margin is
//     positive, and is computed per token (a block of two tokens is the two tokens' blocks joined).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ropecheck/core/quantized.hpp"
#include "ropecheck/reference/quantized_stores.hpp"

namespace ropecheck::quant {
namespace {

StoreSpec parsed(const char* item) {
  std::string why;
  const auto s = parse_store(item, why);
  EXPECT_TRUE(s.has_value()) << item << ": " << why;
  return s.value_or(StoreSpec{});
}

TEST(ParseStore, ReadsEveryDocumentedItem) {
  StoreSpec s = parsed("e4m3fn");
  EXPECT_EQ(s.kind, StoreKind::fp8);
  EXPECT_EQ(s.fp8, Fp8::e4m3fn);
  EXPECT_EQ(s.overflow, Fp8Overflow::saturate);
  EXPECT_EQ(s.scale, ScaleGranularity::per_token);
  EXPECT_EQ(s.name(), "e4m3fn");
  s = parsed("e5m2:nonfinite:per-token-head");
  EXPECT_EQ(s.fp8, Fp8::e5m2);
  EXPECT_EQ(s.overflow, Fp8Overflow::nonfinite);
  EXPECT_EQ(s.scale, ScaleGranularity::per_token_head);
  EXPECT_EQ(s.name(), "e5m2");
  EXPECT_EQ(parsed("q8_0").kind, StoreKind::q8_0);
  EXPECT_EQ(parsed("q4_0").name(), "q4_0");
  s = parsed("int4g32");
  EXPECT_EQ(s.kind, StoreKind::affine);
  EXPECT_EQ(s.affine.bits, 4);
  EXPECT_EQ(s.affine.group_size, 32);
  EXPECT_EQ(s.affine.scale_dtype, DType::f32);
  s = parsed("int8g128:bf16");
  EXPECT_EQ(s.affine.bits, 8);
  EXPECT_EQ(s.affine.group_size, 128);
  EXPECT_EQ(s.affine.scale_dtype, DType::bf16);
  EXPECT_EQ(s.name(), "int8g128");
}

TEST(ParseStore, RefusesWithAReason) {
  for (const char* bad : {"", "e4m3", "e4m3fn:per-tensr", "e4m3fn:per-head:per-tensor", "e5m2:clamp", "q8_0:f16", "int4g48",
                          "int4g", "int4g64x", "int8g64:f64", "int8g64:f16:f16", "int2g64", "Q8_0"}) {
    std::string why;
    EXPECT_FALSE(parse_store(bad, why).has_value()) << bad;
    EXPECT_FALSE(why.empty()) << bad;
    EXPECT_EQ(why.find('\n'), std::string::npos) << bad;
  }
  std::string why;
  (void)parse_store("int4g48", why);
  EXPECT_EQ(why, "'int4g48': the group size is 32, 64 or 128");
}

TEST(StoreGrouping, ScaleGroupsAndHeadDim) {
  EXPECT_EQ(scale_groups_per_token(parsed("e4m3fn"), 4, 128), 1);
  EXPECT_EQ(scale_groups_per_token(parsed("e4m3fn:per-token-head"), 4, 128), 4);
  EXPECT_EQ(scale_groups_per_token(parsed("q8_0"), 4, 128), 16);
  EXPECT_EQ(scale_groups_per_token(parsed("q4_0"), 2, 64), 4);
  EXPECT_EQ(scale_groups_per_token(parsed("int4g64"), 4, 128), 8);
  EXPECT_EQ(scale_groups_per_token(parsed("int8g32"), 3, 64), 6);
  EXPECT_EQ(store_head_dim_problem(parsed("e4m3fn"), 6), "");
  EXPECT_EQ(store_head_dim_problem(parsed("q8_0"), 64), "");
  EXPECT_EQ(store_head_dim_problem(parsed("q4_0"), 48), "q4_0 needs head_dim a multiple of 32, not 48");
  EXPECT_EQ(store_head_dim_problem(parsed("int4g128"), 64), "int4g128 needs head_dim a multiple of 128, not 64");
}

// Binary32 values (exact in double) of a deterministic wave: two tokens, two heads, head_dim 64.
constexpr std::int64_t kT = 2, kH = 2, kD = 64;
std::vector<double> wave() {
  std::vector<double> y(static_cast<std::size_t>(kT * kH * kD));
  for (std::size_t i = 0; i < y.size(); ++i)
    y[i] = static_cast<float>(3.0 * std::sin(0.37 * static_cast<double>(i) + 0.1) * (1 + static_cast<double>(i % 7)));
  return y;
}

TEST(StoreBlock, Fp8MatchesTheOwnersQuantizerWhereDecided) {
  const std::vector<double> y = wave();
  for (const char* item : {"e4m3fn", "e5m2:nonfinite:per-token-head"}) {
    const StoreSpec s = parsed(item);
    const StoreBlock b = store_block(s, y, kT, kH, kD);
    const std::size_t group = static_cast<std::size_t>(s.scale == ScaleGranularity::per_token ? kH * kD : kD);
    ASSERT_EQ(b.bytes.size(), y.size()) << item;
    ASSERT_EQ(b.margin.size(), y.size());
    ASSERT_EQ(b.scales.size(), static_cast<std::size_t>(kT * scale_groups_per_token(s, kH, kD)));
    ASSERT_EQ(b.scale_margin.size(), b.scales.size());
    EXPECT_TRUE(b.words.empty() && b.biases.empty());
    int decided = 0;
    for (std::size_t g = 0; g < b.scales.size(); ++g) {
      std::vector<float> x(y.begin() + static_cast<std::ptrdiff_t>(g * group),
                           y.begin() + static_cast<std::ptrdiff_t>((g + 1) * group));
      const float scale = fp8_dynamic_scale(x, s.fp8);
      if (b.scale_margin[g] > 0) {
        EXPECT_EQ(b.scales[g], scale) << item << " group " << g;
      }
      for (std::size_t j = 0; j < group; ++j) {
        const std::size_t i = g * group + j;
        if (b.margin[i] <= 0) continue;
        ++decided;
        EXPECT_EQ(b.bytes[i], fp8_quantize(x[j], scale, s.fp8, s.overflow)) << item << " element " << i;
      }
    }
    EXPECT_GT(decided, static_cast<int>(y.size()) * 9 / 10) << item;
  }
}

TEST(StoreBlock, GgmlBlocksMatchTheOwnersQuantizerWhereDecided) {
  const std::vector<double> y = wave();
  const StoreBlock b8 = store_block(parsed("q8_0"), y, kT, kH, kD), b4 = store_block(parsed("q4_0"), y, kT, kH, kD);
  const std::size_t blocks = y.size() / kGgmlBlock;
  ASSERT_EQ(b8.bytes.size(), blocks * 34);
  ASSERT_EQ(b4.bytes.size(), blocks * 18);
  ASSERT_EQ(b8.scale_margin.size(), blocks);
  ASSERT_EQ(b8.margin.size(), y.size());
  for (std::size_t k = 0; k < blocks; ++k) {
    std::array<float, kGgmlBlock> x{};
    for (int j = 0; j < kGgmlBlock; ++j) x[static_cast<std::size_t>(j)] = static_cast<float>(y[k * kGgmlBlock + static_cast<std::size_t>(j)]);
    const BlockQ8_0 o8 = ggml_quantize_q8_0(x);
    const BlockQ4_0 o4 = ggml_quantize_q4_0(x);
    const BlockQ8_0 g8 = q8_0_from_bytes(std::span<const std::uint8_t, 34>(b8.bytes.data() + k * 34, 34));
    const BlockQ4_0 g4 = q4_0_from_bytes(std::span<const std::uint8_t, 18>(b4.bytes.data() + k * 18, 18));
    if (b8.scale_margin[k] > 0) {
      EXPECT_EQ(g8.d, o8.d) << "block " << k;
    }
    if (b4.scale_margin[k] > 0) {
      EXPECT_EQ(g4.d, o4.d) << "block " << k;
    }
    for (int j = 0; j < kGgmlBlock; ++j) {
      const std::size_t i = k * kGgmlBlock + static_cast<std::size_t>(j);
      if (b8.margin[i] > 0) {
        EXPECT_EQ(g8.qs[static_cast<std::size_t>(j)], o8.qs[static_cast<std::size_t>(j)]) << i;
      }
      if (b4.margin[i] > 0) {
        EXPECT_EQ(q4_0_code(g4, j), q4_0_code(o4, j)) << i;
      }
    }
  }
}

TEST(StoreBlock, AffineGroupsPackPerHeadAndMatchMlxWhereDecided) {
  const std::vector<double> y = wave();
  const StoreSpec s = parsed("int4g32:bf16");
  const StoreBlock b = store_block(s, y, kT, kH, kD);
  const std::size_t groups = y.size() / 32;
  ASSERT_EQ(b.words.size(), y.size() * 4 / 32);
  ASSERT_EQ(b.scales.size(), groups);
  ASSERT_EQ(b.biases.size(), groups);
  ASSERT_EQ(b.decision_margin.size(), groups);
  EXPECT_TRUE(b.bytes.empty());
  const std::vector<std::uint8_t> codes = affine_unpack(b.words, 4, y.size());
  const std::vector<float> x(y.begin(), y.end());
  const AffineQuantized o = mlx_affine_quantize(x, s.affine);
  for (std::size_t g = 0; g < groups; ++g) {
    const bool sure = b.scale_margin[g] > 0 && b.decision_margin[g] > 0;
    if (sure) {
      EXPECT_EQ(b.scales[g], o.groups[g].scale) << "group " << g;
    }
    if (sure) {
      EXPECT_EQ(b.biases[g], o.groups[g].bias) << "group " << g;
    }
    for (std::size_t j = 0; j < 32; ++j)
      if (b.decision_margin[g] > 0 && b.margin[g * 32 + j] > 0) {
        EXPECT_EQ(codes[g * 32 + j], o.codes[g * 32 + j]) << g * 32 + j;
      }
  }
}

TEST(StoreBlock, IsComputedPerToken) {
  const std::vector<double> y = wave();
  const std::size_t half = y.size() / 2;
  for (const char* item : {"e4m3fn", "q4_0", "int8g64:f16"}) {
    const StoreSpec s = parsed(item);
    const StoreBlock both = store_block(s, y, kT, kH, kD);
    const StoreBlock first = store_block(s, std::span<const double>(y).first(half), 1, kH, kD);
    const StoreBlock second = store_block(s, std::span<const double>(y).subspan(half), 1, kH, kD);
    std::vector<std::uint8_t> bytes = first.bytes;
    bytes.insert(bytes.end(), second.bytes.begin(), second.bytes.end());
    std::vector<std::uint32_t> words = first.words;
    words.insert(words.end(), second.words.begin(), second.words.end());
    std::vector<float> margin = first.margin;
    margin.insert(margin.end(), second.margin.begin(), second.margin.end());
    EXPECT_EQ(both.bytes, bytes) << item;
    EXPECT_EQ(both.words, words) << item;
    EXPECT_EQ(both.margin, margin) << item;
  }
  EXPECT_THROW(store_block(parsed("q8_0"), y, 3, kH, kD), std::invalid_argument);
}

// Ties have margin 0: a q8_0 block whose amax is 127 puts 0.5 exactly between codes 0 and 1.
TEST(StoreBlock, TiesAreUndecided) {
  std::vector<double> y(static_cast<std::size_t>(kGgmlBlock), 0.25);
  y[0] = 127, y[1] = 0.5;
  const StoreBlock b = store_block(parsed("q8_0"), y, 1, 1, kGgmlBlock);
  EXPECT_EQ(b.margin[1], 0.0f);
  EXPECT_GT(b.margin[2], 0.0f);
  EXPECT_GT(b.margin[0], 0.0f);
}


// A data-derived scale over every token: the bare per-tensor / per-head options (no scale=).
TEST(ParseStore, ScalesOverEveryToken) {
  const StoreSpec t = parsed("e4m3fn:per-tensor"), h = parsed("e5m2:nonfinite:per-head");
  EXPECT_TRUE(t.whole_tensor_scale());
  EXPECT_TRUE(h.whole_tensor_scale());
  EXPECT_FALSE(parsed("e4m3fn").whole_tensor_scale());
  EXPECT_FALSE(parsed("e4m3fn:scale=2").whole_tensor_scale());
  EXPECT_EQ(h.item(), "e5m2:nonfinite:per-head");
  EXPECT_EQ(parsed(h.item().c_str()).item(), h.item());
  EXPECT_TRUE(parsed(h.item().c_str()).whole_tensor_scale());
  EXPECT_EQ(store_heads_problem(h, 3), "");  // no listed scales to count
  EXPECT_EQ(scale_groups_per_token(h, 3, 64), 0);
  // Element 5 * 3 * 4 + 2 * 4 + 1 of [T, 3, 4]: token 5, head 2.
  EXPECT_EQ(fp8_scale_group(t, 69, 3, 4), 0);
  EXPECT_EQ(fp8_scale_group(h, 69, 3, 4), 2);
  EXPECT_EQ(fp8_scale_group(parsed("e4m3fn"), 69, 3, 4), 5);
  EXPECT_EQ(fp8_scale_group(parsed("e4m3fn:per-token-head"), 69, 3, 4), 17);
  EXPECT_EQ(fp8_scale_group(parsed("e4m3fn:scale=1/2/3"), 69, 3, 4), 2);
  EXPECT_EQ(fp8_scale_from_amax(448.0f, Fp8::e4m3fn), 1.0f);
  EXPECT_EQ(fp8_scale_from_amax(0.0f, Fp8::e4m3fn), static_cast<float>(1.0 / (448.0 * 512.0)));  // the clamp
}

TEST(ParseStore, GivenScales) {
  StoreSpec s = parsed("e4m3fn:scale=0.0625");
  EXPECT_EQ(s.scale, ScaleGranularity::per_tensor);
  EXPECT_EQ(s.given, std::vector<float>{0.0625f});
  EXPECT_EQ(s.item(), "e4m3fn:saturate:scale=0.0625");
  EXPECT_EQ(s.name(), "e4m3fn");
  s = parsed("e5m2:scale=0.1/3e-3:nonfinite");  // rounded once to binary32; the order of options is free
  EXPECT_EQ(s.scale, ScaleGranularity::per_head);
  EXPECT_EQ(s.given, (std::vector<float>{0.1f, 3e-3f}));
  EXPECT_EQ(s.item(), "e5m2:nonfinite:scale=0.1/0.003");
  EXPECT_EQ(parsed(s.item().c_str()).item(), s.item());
  EXPECT_EQ(parsed(s.item().c_str()).given, s.given);
  EXPECT_EQ(parsed("e4m3fn:scale=0.1000000014901161193847656").given, std::vector<float>{0.1f});  // its exact value
  EXPECT_EQ(parsed("int4g64:bf16").item(), "int4g64:bf16");
  EXPECT_EQ(parsed("e4m3fn").item(), "e4m3fn:saturate:per-token");
  EXPECT_EQ(store_heads_problem(s, 2), "");
  EXPECT_EQ(store_heads_problem(s, 4), "e5m2: scale= lists 2 per-head scales for 4 heads");
  EXPECT_EQ(store_heads_problem(parsed("e4m3fn:scale=2"), 4), "");
  EXPECT_EQ(given_scale(s, 1), static_cast<double>(3e-3f));
  EXPECT_EQ(given_scale(parsed("e4m3fn:scale=2"), 3), 2.0);
  EXPECT_EQ(scale_groups_per_token(s, 2, 64), 0);
}

TEST(ParseStore, RefusesBadGivenScales) {
  for (const char* bad : {"e4m3fn:scale=0", "e4m3fn:scale=-1", "e4m3fn:scale=nan", "e4m3fn:scale=inf",
                          "e4m3fn:scale=1e39", "e4m3fn:scale=1e-50", "e4m3fn:scale=1e-40", "e4m3fn:scale=x",
                          "e4m3fn:scale=", "e4m3fn:scale=1/", "e4m3fn:scale=0.5.", "e4m3fn:scale=+1",
                          "e4m3fn:scale=1:per-token", "e4m3fn:per-token-head:scale=1", "e4m3fn:scale=1:scale=2"}) {
    std::string why;
    EXPECT_FALSE(parse_store(bad, why).has_value()) << bad;
    EXPECT_FALSE(why.empty()) << bad;
    EXPECT_EQ(why.find('\n'), std::string::npos) << bad;
  }
  std::string why;
  (void)parse_store("e4m3fn:scale=1e39", why);
  EXPECT_EQ(why, "scale '1e39' is not a positive normal binary32 value (2^-126 to 2^128)");
  (void)parse_store("e4m3fn:scale=abc", why);
  EXPECT_EQ(why, "scale 'abc' is not a number");
}

TEST(StoreBlock, GivenScaleCodesEachElementOverItsHeadsScale) {
  const std::vector<double> y = wave();
  const StoreSpec s = parsed("e4m3fn:scale=0.25/0.01");
  const StoreBlock b = store_block(s, y, kT, kH, kD);
  ASSERT_EQ(b.bytes.size(), y.size());
  ASSERT_EQ(b.margin.size(), y.size());
  EXPECT_TRUE(b.scales.empty() && b.scale_margin.empty());
  int decided = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    const double sc = given_scale(s, static_cast<std::int64_t>(i) / kD % kH);
    if (b.margin[i] > 0) ++decided;
    EXPECT_EQ(b.bytes[i], fp8_quantize(y[i], sc, s.fp8, s.overflow)) << i;  // y binary32: one rounding of y / s
  }
  EXPECT_GT(decided, static_cast<int>(y.size()) * 9 / 10);
  const StoreBlock first = store_block(s, std::span<const double>(y).first(y.size() / 2), 1, kH, kD);
  EXPECT_TRUE(std::equal(first.bytes.begin(), first.bytes.end(), b.bytes.begin()));
}

}  // namespace
}  // namespace ropecheck::quant
