// core/quantized.hpp: the stores' exact definitions. Bit-for-bit agreement with the owners' own code
// (ml_dtypes, MLX, gguf-py) is tests/python/quant_crosscheck.py; agreement with MPFR's rounding is
// tests/reference/test_quantized_rounding.cpp. Here: the definitions from their documented rules.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "ropecheck/core/quantized.hpp"

namespace ropecheck::quant {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(quantized_fp8, DecodesTheDocumentedValues) {
  // e4m3fn: bias 7, 3 mantissa bits, S.1111.111 NaN, no infinities (OCP 8-bit floating point spec).
  EXPECT_EQ(fp8_decode(0x00, Fp8::e4m3fn), 0.0);
  EXPECT_TRUE(std::signbit(fp8_decode(0x80, Fp8::e4m3fn)));
  EXPECT_EQ(fp8_decode(0x01, Fp8::e4m3fn), std::ldexp(1.0, -9));  // smallest subnormal
  EXPECT_EQ(fp8_decode(0x07, Fp8::e4m3fn), 7 * std::ldexp(1.0, -9));
  EXPECT_EQ(fp8_decode(0x08, Fp8::e4m3fn), std::ldexp(1.0, -6));  // smallest normal
  EXPECT_EQ(fp8_decode(0x38, Fp8::e4m3fn), 1.0);
  EXPECT_EQ(fp8_decode(0x78, Fp8::e4m3fn), 256.0);
  EXPECT_EQ(fp8_decode(0x7E, Fp8::e4m3fn), 448.0);
  EXPECT_EQ(fp8_decode(0xFE, Fp8::e4m3fn), -448.0);
  EXPECT_TRUE(std::isnan(fp8_decode(0x7F, Fp8::e4m3fn)));
  EXPECT_TRUE(std::isnan(fp8_decode(0xFF, Fp8::e4m3fn)));
  // e5m2: bias 15, 2 mantissa bits, IEEE-style specials.
  EXPECT_EQ(fp8_decode(0x01, Fp8::e5m2), std::ldexp(1.0, -16));
  EXPECT_EQ(fp8_decode(0x04, Fp8::e5m2), std::ldexp(1.0, -14));
  EXPECT_EQ(fp8_decode(0x3C, Fp8::e5m2), 1.0);
  EXPECT_EQ(fp8_decode(0x7B, Fp8::e5m2), 57344.0);
  EXPECT_EQ(fp8_decode(0x7C, Fp8::e5m2), kInf);
  EXPECT_EQ(fp8_decode(0xFC, Fp8::e5m2), -kInf);
  for (int b : {0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF}) EXPECT_TRUE(fp8_is_nan(static_cast<std::uint8_t>(b), Fp8::e5m2));
  int nans_e4 = 0, nans_e5 = 0;
  for (int b = 0; b < 256; ++b) {
    nans_e4 += fp8_is_nan(static_cast<std::uint8_t>(b), Fp8::e4m3fn);
    nans_e5 += fp8_is_nan(static_cast<std::uint8_t>(b), Fp8::e5m2);
  }
  EXPECT_EQ(nans_e4, 2);
  EXPECT_EQ(nans_e5, 6);
}

TEST(quantized_fp8, EveryPatternRoundTripsAndIsOrdered) {
  for (Fp8 f : {Fp8::e4m3fn, Fp8::e5m2}) {
    double prev = -1;
    for (int b = 0; b < 128; ++b) {
      const auto bits = static_cast<std::uint8_t>(b);
      const double v = fp8_decode(bits, f);
      if (std::isnan(v)) continue;
      if (b > 0) {
        EXPECT_GT(v, prev) << b;  // positive patterns in increasing order
      }
      prev = v;
      for (Fp8Overflow o : {Fp8Overflow::saturate, Fp8Overflow::nonfinite}) {
        if (std::isinf(v) && o == Fp8Overflow::saturate) continue;
        EXPECT_EQ(fp8_encode(v, f, o), bits) << to_string(f) << " " << b;
        EXPECT_EQ(fp8_encode(-v, f, o), bits | 0x80) << to_string(f) << " " << b;
      }
    }
  }
}

TEST(quantized_fp8, TiesGoToEvenAndEverythingElseToNearest) {
  for (Fp8 f : {Fp8::e4m3fn, Fp8::e5m2}) {
    const Fp8Info& fi = fp8_info(f);
    for (int b = 0; b + 1 < 128; ++b) {
      const double lo = fp8_decode(static_cast<std::uint8_t>(b), f), hi = fp8_decode(static_cast<std::uint8_t>(b + 1), f);
      if (!std::isfinite(hi)) break;
      const double mid = (lo + hi) / 2;  // exact
      for (Fp8Overflow o : {Fp8Overflow::saturate, Fp8Overflow::nonfinite}) {
        EXPECT_EQ(fp8_encode(mid, f, o), (b % 2 == 0) ? b : b + 1) << to_string(f) << " tie above " << lo;
        EXPECT_EQ(fp8_encode(std::nextafter(mid, kInf), f, o), b + 1);
        EXPECT_EQ(fp8_encode(std::nextafter(mid, 0.0), f, o), b);
        // Not through binary32: just above a midpoint by far less than a binary32 ulp still rounds up.
        EXPECT_EQ(fp8_encode(mid * (1 + std::ldexp(1.0, -40)), f, o), b + 1);
      }
      if (hi == fi.max_finite) break;
    }
  }
}

TEST(quantized_fp8, OverflowRules) {
  const auto sat = Fp8Overflow::saturate, nf = Fp8Overflow::nonfinite;
  // e4m3fn: 464 is the tie between 448 (even) and 480 (not a value): it stays 448.
  EXPECT_EQ(fp8_encode(464.0, Fp8::e4m3fn, sat), 0x7E);
  EXPECT_EQ(fp8_encode(464.0, Fp8::e4m3fn, nf), 0x7E);
  EXPECT_EQ(fp8_encode(std::nextafter(464.0, kInf), Fp8::e4m3fn, sat), 0x7E);
  EXPECT_EQ(fp8_encode(std::nextafter(464.0, kInf), Fp8::e4m3fn, nf), 0x7F);
  EXPECT_EQ(fp8_encode(-1e300, Fp8::e4m3fn, sat), 0xFE);
  EXPECT_EQ(fp8_encode(-1e300, Fp8::e4m3fn, nf), 0xFF);
  EXPECT_EQ(fp8_encode(kInf, Fp8::e4m3fn, sat), 0x7E);  // CUDA __NV_SATFINITE: inf -> max
  EXPECT_EQ(fp8_encode(-kInf, Fp8::e4m3fn, nf), 0xFF);
  // e5m2: 61440 is the tie between 57344 (odd significand) and 65536 (= inf): it overflows.
  EXPECT_EQ(fp8_encode(61440.0, Fp8::e5m2, nf), 0x7C);
  EXPECT_EQ(fp8_encode(61440.0, Fp8::e5m2, sat), 0x7B);
  EXPECT_EQ(fp8_encode(std::nextafter(61440.0, 0.0), Fp8::e5m2, nf), 0x7B);
  EXPECT_EQ(fp8_encode(-kInf, Fp8::e5m2, nf), 0xFC);
  EXPECT_EQ(fp8_encode(-kInf, Fp8::e5m2, sat), 0xFB);
  // NaN keeps its sign, under either rule.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(fp8_encode(nan, Fp8::e4m3fn, sat), 0x7F);
  EXPECT_EQ(fp8_encode(-nan, Fp8::e4m3fn, sat), 0xFF);
  EXPECT_EQ(fp8_encode(nan, Fp8::e5m2, sat), 0x7E);
  EXPECT_EQ(fp8_encode(-nan, Fp8::e5m2, nf), 0xFE);
  EXPECT_EQ(fp8_info(Fp8::e4m3fn).overflow_from, 464.0);
  EXPECT_EQ(fp8_info(Fp8::e5m2).overflow_from, 61440.0);
}

TEST(quantized_fp8, Underflow) {
  // Half the smallest subnormal is a tie between 0 (even) and it.
  EXPECT_EQ(fp8_encode(std::ldexp(1.0, -10), Fp8::e4m3fn, Fp8Overflow::saturate), 0x00);
  EXPECT_EQ(fp8_encode(std::nextafter(std::ldexp(1.0, -10), 1.0), Fp8::e4m3fn, Fp8Overflow::saturate), 0x01);
  EXPECT_EQ(fp8_encode(-std::ldexp(1.0, -10), Fp8::e4m3fn, Fp8Overflow::saturate), 0x80);
  EXPECT_EQ(fp8_encode(1e-300, Fp8::e5m2, Fp8Overflow::nonfinite), 0x00);
  EXPECT_EQ(fp8_encode(3 * std::ldexp(1.0, -17), Fp8::e5m2, Fp8Overflow::nonfinite), 0x02);  // tie 1.5 -> 2
  EXPECT_EQ(fp8_step(0.0, Fp8::e4m3fn), std::ldexp(1.0, -9));
  EXPECT_EQ(fp8_step(1.0, Fp8::e4m3fn), 0.125);
  EXPECT_EQ(fp8_step(448.0, Fp8::e4m3fn), 32.0);
  EXPECT_EQ(fp8_step(1.0, Fp8::e5m2), 0.25);
}

TEST(quantized_fp8, NamesRoundTrip) {
  for (Fp8 f : {Fp8::e4m3fn, Fp8::e5m2}) EXPECT_EQ(parse_fp8(to_string(f)), f);
  for (Fp8Overflow o : {Fp8Overflow::saturate, Fp8Overflow::nonfinite}) EXPECT_EQ(parse_fp8_overflow(to_string(o)), o);
  EXPECT_EQ(parse_fp8("e4m3"), std::nullopt);  // not the OCP 'fn' type: e4m3 with infinities is another format
  EXPECT_STREQ(fp8_info(Fp8::e4m3fn).safetensors, "F8_E4M3");
  EXPECT_STREQ(fp8_info(Fp8::e5m2).ml_dtypes, "float8_e5m2");
}

TEST(quantized_rounding, RoundToMatchesTheHardwareConversions) {
  // binary64 -> binary32 (the FPU's correctly rounded conversion) and -> _Float16 (GCC's conversion,
  // one rounding) for doubles across the formats' ranges; seed printed.
  const unsigned seed = 20240601;
  std::printf("seed %u\n", seed);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> exp(-160, 140);
  std::uniform_real_distribution<double> mant(1.0, 2.0);
  for (int i = 0; i < 200000; ++i) {
    double v = std::ldexp(mant(rng), exp(rng)) * ((i & 1) ? -1 : 1);
    if (i % 7 == 0) v = static_cast<double>(static_cast<float>(v)) + std::ldexp(std::fabs(v), -25);  // near ties
    ASSERT_EQ(round_to(v, DType::f32), static_cast<double>(static_cast<float>(v))) << v;
    const double h = round_to(v, DType::f16);
    ASSERT_EQ(h, static_cast<double>(static_cast<_Float16>(v))) << v;
  }
  EXPECT_EQ(round_to(65520.0, DType::f16), kInf);  // max 65504 + half its ulp: the tie overflows
  EXPECT_EQ(round_to(std::nextafter(65520.0, 0.0), DType::f16), 65504.0);
  EXPECT_EQ(round_to(1.0 + std::ldexp(1.0, -8), DType::bf16), 1.0);  // tie to even
  EXPECT_EQ(round_to(1.0 + 3 * std::ldexp(1.0, -8), DType::bf16), 1.0 + std::ldexp(1.0, -6));
}

TEST(quantized_scales, CountsAndIndices) {
  EXPECT_EQ(scale_count(ScaleGranularity::per_tensor, 7, 3), 1);
  EXPECT_EQ(scale_count(ScaleGranularity::per_head, 7, 3), 3);
  EXPECT_EQ(scale_count(ScaleGranularity::per_token, 7, 3), 7);
  EXPECT_EQ(scale_count(ScaleGranularity::per_token_head, 7, 3), 21);
  EXPECT_EQ(scale_index(ScaleGranularity::per_tensor, 5, 2, 3), 0);
  EXPECT_EQ(scale_index(ScaleGranularity::per_head, 5, 2, 3), 2);
  EXPECT_EQ(scale_index(ScaleGranularity::per_token, 5, 2, 3), 5);
  EXPECT_EQ(scale_index(ScaleGranularity::per_token_head, 5, 2, 3), 17);
  for (ScaleGranularity g : {ScaleGranularity::per_tensor, ScaleGranularity::per_head, ScaleGranularity::per_token,
                             ScaleGranularity::per_token_head})
    EXPECT_EQ(parse_scale_granularity(to_string(g)), g);
}

TEST(quantized_scales, Fp8WithScale) {
  // x / s rounded once: 3 / 2 = 1.5 is an e4m3fn value; 1.0625 = 1 + 1/16 is a tie (to 1.0).
  EXPECT_EQ(fp8_quantize(3.0, 2.0, Fp8::e4m3fn, Fp8Overflow::saturate), fp8_encode(1.5, Fp8::e4m3fn, Fp8Overflow::saturate));
  EXPECT_EQ(fp8_quantize(2.125, 2.0, Fp8::e4m3fn, Fp8Overflow::saturate), 0x38);
  EXPECT_EQ(fp8_dequantize(0x7E, 0.5, Fp8::e4m3fn), 224.0);
  EXPECT_EQ(fp8_quantize(1000.0, 1.0, Fp8::e4m3fn, Fp8Overflow::nonfinite), 0x7F);
  // vLLM's dynamic scale: amax / 448, at least 1 / (448 * 512).
  const std::vector<float> x = {1.0f, -896.0f, 3.0f};
  EXPECT_EQ(fp8_dynamic_scale(x, Fp8::e4m3fn), 2.0f);
  const std::vector<float> zeros(4, 0.0f);
  EXPECT_EQ(fp8_dynamic_scale(zeros, Fp8::e4m3fn), static_cast<float>(1.0 / (448.0 * 512.0)));
}

TEST(quantized_affine, PackingIsLowBitsFirst) {
  const std::vector<std::uint8_t> c4 = {0, 1, 2, 3, 4, 5, 6, 7, 15, 14};
  const auto w4 = affine_pack(c4, 4);
  ASSERT_EQ(w4.size(), 2u);
  EXPECT_EQ(w4[0], 0x76543210u);
  EXPECT_EQ(w4[1], 0x000000EFu);
  EXPECT_EQ(affine_unpack(w4, 4, c4.size()), c4);
  const std::vector<std::uint8_t> c8 = {1, 2, 3, 4, 255};
  const auto w8 = affine_pack(c8, 8);
  EXPECT_EQ(w8[0], 0x04030201u);
  EXPECT_EQ(w8[1], 0x000000FFu);
  EXPECT_EQ(affine_unpack(w8, 8, c8.size()), c8);
}

TEST(quantized_affine, GroupsReconstructWithinAStep) {
  const unsigned seed = 7;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> w(256);
  for (float& v : w) v = nd(rng);
  for (int bits : {4, 8}) {
    const AffineSpec spec{bits, 64, DType::f32};
    const AffineQuantized q = mlx_affine_quantize(w, spec);
    ASSERT_EQ(q.groups.size(), 4u);
    for (std::size_t i = 0; i < w.size(); ++i) {
      const AffineGroup& g = q.groups[i / 64];
      EXPECT_LE(q.codes[i], (1 << bits) - 1);
      // Half a step, plus the quantizer's binary32 roundings; a whole step where the far extreme is
      // clamped (scale = edge / q0 makes t of the other extreme up to n + R / (2 |edge|) <= n + 1).
      const bool clamped = q.codes[i] == (1 << bits) - 1;
      EXPECT_LE(std::fabs(affine_value(q.codes[i], g) - w[i]), std::fabs(g.scale) * (clamped ? 1.0 : 0.5) + 1e-6) << i;
    }
    // The edge (the larger magnitude of min and max) reconstructs exactly: its code is 0, its value the bias.
    for (const AffineGroup& g : q.groups) EXPECT_NE(g.bias, 0.0);
  }
  EXPECT_THROW(mlx_affine_quantize(w, AffineSpec{3, 64, DType::f32}), std::invalid_argument);
  EXPECT_THROW(mlx_affine_quantize(std::span<const float>(w).first(100), AffineSpec{4, 64, DType::f32}), std::invalid_argument);
}

TEST(quantized_ggml, Q8_0) {
  std::array<float, kGgmlBlock> x{};
  for (int j = 0; j < kGgmlBlock; ++j) x[static_cast<std::size_t>(j)] = static_cast<float>(j - 16);
  x[0] = 127.0f;   // amax 127: d = 1, the codes are the values
  x[1] = 2.5f;     // roundf: ties away from zero
  x[2] = -2.5f;
  const BlockQ8_0 b = ggml_quantize_q8_0(x);
  EXPECT_EQ(b.d, 0x3C00);  // f16 1.0
  EXPECT_EQ(b.qs[0], 127);
  EXPECT_EQ(b.qs[1], 3);
  EXPECT_EQ(b.qs[2], -3);
  EXPECT_EQ(b.qs[20], 4);
  for (int j = 0; j < kGgmlBlock; ++j) EXPECT_EQ(ggml_value(b, j), b.qs[static_cast<std::size_t>(j)]);
  const auto bytes = to_bytes(b);
  EXPECT_EQ(bytes[0], 0x00);
  EXPECT_EQ(bytes[1], 0x3C);
  EXPECT_EQ(bytes[2], 127);
  const BlockQ8_0 back = q8_0_from_bytes(bytes);
  EXPECT_EQ(back.d, b.d);
  EXPECT_EQ(back.qs, b.qs);
  const BlockQ8_0 zero = ggml_quantize_q8_0(std::array<float, kGgmlBlock>{});
  EXPECT_EQ(zero.d, 0);
}

TEST(quantized_ggml, Q4_0) {
  std::array<float, kGgmlBlock> x{};
  for (int j = 0; j < kGgmlBlock; ++j) x[static_cast<std::size_t>(j)] = static_cast<float>(j % 8);
  x[5] = -8.0f;  // the first element of largest magnitude: d = -8 / -8 = 1
  x[6] = 8.0f;   // same magnitude, later: not the maximum
  x[7] = -2.5f;  // x / d + 8.5 = 6.0 -> 6: a tie goes up
  const BlockQ4_0 b = ggml_quantize_q4_0(x);
  EXPECT_EQ(b.d, 0x3C00);
  EXPECT_EQ(q4_0_code(b, 5), 0);
  EXPECT_EQ(q4_0_code(b, 6), 15);   // 16, clamped
  EXPECT_EQ(q4_0_code(b, 7), 6);
  EXPECT_EQ(q4_0_code(b, 1), 9);
  // Element j in the low nibble of byte j, element j + 16 in its high nibble.
  EXPECT_EQ(b.qs[1], static_cast<std::uint8_t>(q4_0_code(b, 1) | (q4_0_code(b, 17) << 4)));
  EXPECT_EQ(ggml_value(b, 6), 7.0);
  const auto bytes = to_bytes(b);
  const BlockQ4_0 back = q4_0_from_bytes(bytes);
  EXPECT_EQ(back.d, b.d);
  EXPECT_EQ(back.qs, b.qs);
  // An all-zero block: max stays +0, d = 0 / -8 = -0 in ggml's float arithmetic, every code 8.
  const BlockQ4_0 zero = ggml_quantize_q4_0(std::array<float, kGgmlBlock>{});
  EXPECT_EQ(zero.d, 0x8000);
  for (int j = 0; j < kGgmlBlock; ++j) EXPECT_EQ(q4_0_code(zero, j), 8);
}

}  // namespace
}  // namespace ropecheck::quant
