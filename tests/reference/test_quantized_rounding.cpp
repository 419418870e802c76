// reference/quantized_rounding.hpp: golden codes of exact values and their margins.
//   - the MPFR-free one rounding of core (round_to, fp8_encode) agrees with MPFR's for every drawn value;
//   - the margins are sound: moving every value of a group by less than the margin changes no code;
//   - ties have margin 0 and follow the owner's tie rule.
// That the owners' binary32 quantizers give the golden code wherever the margin exceeds the budget
// of their roundings is tests/accuracy/test_quantized_store.cpp (it calibrates those budgets).
// Seeds fixed and printed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <utility>
#include <random>
#include <vector>

#include "ropecheck/core/quantized.hpp"
#include "ropecheck/reference/mpfr_value.hpp"
#include "ropecheck/reference/quantized_rounding.hpp"
#include "ropecheck/reference/rounding.hpp"

namespace ropecheck::quant {
namespace {

// Exact values held in MPFR at 200 bits, with the pointer view the golden functions take.
struct Values {
  std::vector<std::unique_ptr<MpfrValue>> v;
  std::vector<mpfr_srcptr> p;
  void push(double x, double delta = 0) {
    v.push_back(std::make_unique<MpfrValue>(200));
    mpfr_set_d(v.back()->get(), x, MPFR_RNDN);
    mpfr_add_d(v.back()->get(), v.back()->get(), delta, MPFR_RNDN);  // exact at 200 bits here
    p.push_back(v.back()->get());
  }
};

std::mt19937_64& rng() {
  static std::mt19937_64 r = [] {
    const unsigned seed = 424242;
    std::printf("seed %u\n", seed);
    return std::mt19937_64(seed);
  }();
  return r;
}

float draw_float(double scale) {
  std::normal_distribution<double> nd(0.0, 1.0);
  return static_cast<float>(nd(rng()) * scale);
}

TEST(quantized_rounding, CoreRoundToIsMpfrsOneRounding) {
  std::uniform_int_distribution<int> exp(-150, 140);
  std::uniform_real_distribution<double> mant(1.0, 2.0);
  MpfrValue x(53);
  for (int i = 0; i < 100000; ++i) {
    const double v = std::ldexp(mant(rng()), exp(rng())) * ((i & 1) ? -1 : 1);
    mpfr_set_d(x.get(), v, MPFR_RNDN);
    for (DType t : {DType::f32, DType::f16, DType::bf16}) ASSERT_EQ(round_to(v, t), round_to_double(x.get(), t)) << v;
  }
}

// v is a decision boundary of the FP8 store when the codes just below and just above it differ.
bool fp8_boundary(double v, Fp8 f, Fp8Overflow o) {
  const double a = std::fabs(v);
  const double below = fp8_decode(fp8_encode(std::nextafter(a, 0.0), f, o), f);
  const double above = fp8_decode(fp8_encode(std::nextafter(a, HUGE_VAL), f, o), f);
  return !(below == above || (std::isnan(below) && std::isnan(above)));
}

TEST(quantized_rounding, Fp8ExactIsCoresOneRounding) {
  std::uniform_int_distribution<int> exp(-20, 18);
  std::uniform_real_distribution<double> mant(1.0, 2.0);
  MpfrValue x(53);
  int ties = 0;
  for (int i = 0; i < 100000; ++i) {
    double v = std::ldexp(mant(rng()), exp(rng())) * ((i & 1) ? -1 : 1);
    if (i % 5 == 0) v = std::ldexp(std::round(std::ldexp(v, 4)) + 0.5, -4);  // a 5-bit grid: many ties
    mpfr_set_d(x.get(), v, MPFR_RNDN);
    for (Fp8 f : {Fp8::e4m3fn, Fp8::e5m2}) {
      for (Fp8Overflow o : {Fp8Overflow::saturate, Fp8Overflow::nonfinite}) {
        const ExactCode c = fp8_exact(x.get(), 1.0, f, o);
        ASSERT_EQ(c.code, fp8_encode(v, f, o)) << v;
        // Margin 0 exactly on the boundaries, positive elsewhere (these values are far from them).
        ASSERT_EQ(c.margin == 0, fp8_boundary(v, f, o)) << v << " " << to_string(f) << " " << to_string(o);
        ties += c.margin == 0;
      }
    }
  }
  std::printf("boundaries hit (margin 0): %d\n", ties);
  EXPECT_GT(ties, 1000);
}

TEST(quantized_rounding, Fp8ScaledIsOneRoundingOfTheExactQuotient) {
  MpfrValue x(53);
  for (int i = 0; i < 50000; ++i) {
    const float xv = draw_float(100), sv = std::fabs(draw_float(1)) + 1e-3f;
    mpfr_set_d(x.get(), xv, MPFR_RNDN);
    for (Fp8Overflow o : {Fp8Overflow::saturate, Fp8Overflow::nonfinite})
      ASSERT_EQ(fp8_exact(x.get(), sv, Fp8::e4m3fn, o).code, fp8_quantize(xv, sv, Fp8::e4m3fn, o)) << xv << " / " << sv;
  }
  // 1.0625 s (a tie after division by s = 3) plus 2^-80: the exact quotient is above the tie, so it
  // rounds up, which no binary64 quotient could tell.
  Values v;
  v.push(1.0625 * 3, std::ldexp(1.0, -80));
  const ExactCode c = fp8_exact(v.p[0], 3.0, Fp8::e4m3fn, Fp8Overflow::saturate);
  EXPECT_EQ(c.code, 0x39);
  EXPECT_EQ(c.margin, 0.0);  // 2^-80 from the tie: within binary64 resolution of it, so undecidable
  Values t;
  t.push(1.0625 * 3);
  EXPECT_EQ(fp8_exact(t.p[0], 3.0, Fp8::e4m3fn, Fp8Overflow::saturate).code, 0x38);
  EXPECT_EQ(fp8_exact(t.p[0], 3.0, Fp8::e4m3fn, Fp8Overflow::saturate).margin, 0.0);
}

TEST(quantized_rounding, Fp8MarginIsTight) {
  // Given a scale the group is the element: moving x by just over the margin toward the nearest
  // boundary changes the code, by just under it does not.
  for (int i = 0; i < 20000; ++i) {
    const double x = draw_float(50), s = 0.75;
    Values v;
    v.push(x);
    const ExactCode c = fp8_exact(v.p[0], s, Fp8::e4m3fn, Fp8Overflow::nonfinite);
    if (c.margin == 0 || std::isinf(c.margin)) continue;
    for (double dir : {-1.0, 1.0}) {
      Values under;
      under.push(x, dir * c.margin * 0.999);
      const int cu = fp8_exact(under.p[0], s, Fp8::e4m3fn, Fp8Overflow::nonfinite).code;
      ASSERT_EQ(fp8_decode(static_cast<std::uint8_t>(cu), Fp8::e4m3fn), fp8_decode(static_cast<std::uint8_t>(c.code), Fp8::e4m3fn));
    }
    Values up, down;
    up.push(x, c.margin * 1.001);
    down.push(x, -c.margin * 1.001);
    const int cu = fp8_exact(up.p[0], s, Fp8::e4m3fn, Fp8Overflow::nonfinite).code;
    const int cd = fp8_exact(down.p[0], s, Fp8::e4m3fn, Fp8Overflow::nonfinite).code;
    const auto same = [](int a, int b) { return fp8_decode(static_cast<std::uint8_t>(a), Fp8::e4m3fn) == fp8_decode(static_cast<std::uint8_t>(b), Fp8::e4m3fn); };
    ASSERT_TRUE(!same(cu, c.code) || !same(cd, c.code)) << x;
  }
}

// A block of binary32 values: normal, some scaled up or down, some exact zeros.
std::vector<float> draw_block(int n) {
  std::vector<float> x(static_cast<std::size_t>(n));
  const double scale = std::ldexp(1.0, static_cast<int>(rng()() % 20) - 10);
  for (float& v : x) v = draw_float(scale);
  if (rng()() % 8 == 0) x[rng()() % x.size()] = 0.0f;
  return x;
}

// Every value moved by a random amount within (1 - 2^-20) margin.
Values perturbed(const std::vector<float>& x, double eps) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  Values v;
  for (float xv : x) v.push(xv, eps * (1 - std::ldexp(1.0, -20)) * u(rng()));
  return v;
}

// Every value of the group moved by less than a margin: the codes (and scales) with that margin or
// more stay. Three moves per group: one element's margin, the scale's, the least of all.
template <class Golden, class Code>
void expect_sound(const std::vector<float>& x, const std::vector<double>& margins, double scale_margin,
                  Golden golden, Code code_of) {
  double least = scale_margin;
  for (double m : margins) least = std::min(least, m);
  for (double eps : {margins[3], scale_margin, least}) {
    if (!std::isfinite(eps)) continue;
    const Values p = perturbed(x, eps);
    const auto moved = golden(p);
    const auto orig = golden(perturbed(x, 0));
    for (std::size_t j = 0; j < x.size(); ++j) {
      if (eps <= margins[j]) {
        ASSERT_EQ(code_of(moved, j), code_of(orig, j)) << j << " eps " << eps;
      }
    }
    if (eps <= scale_margin) {
      ASSERT_EQ(code_of(moved, x.size()), code_of(orig, x.size())) << "scale, eps " << eps;
    }
  }
}

TEST(quantized_rounding, MarginsAreSound) {
  // Margins are sound, and not vacuous: for q8_0, half the codes of random data have a margin over a
  // quarter of the largest possible one (half a step d, seen from t = 127 x / amax).
  int big = 0, all = 0;
  for (int b = 0; b < 300; ++b) {
    const std::vector<float> x = draw_block(kGgmlBlock);
    Values v;
    for (float xv : x) v.push(xv);
    const auto px = [](const Values& p) { return std::span<const mpfr_srcptr, kGgmlBlock>(p.p.data(), kGgmlBlock); };
    const Q8_0Exact g8 = q8_0_exact(px(v));
    const double d = bits_to_double(g8.block.d, DType::f16);
    for (double m : g8.margin) {
      ++all;
      big += m > d / 8;
    }
    expect_sound(x, std::vector<double>(g8.margin.begin(), g8.margin.end()), g8.scale_margin,
                 [&](const Values& p) { return q8_0_exact(px(p)).block; },
                 [](const BlockQ8_0& blk, std::size_t j) { return j < kGgmlBlock ? int{blk.qs[j]} : int{blk.d}; });
    const Q4_0Exact g4 = q4_0_exact(px(v));
    expect_sound(x, std::vector<double>(g4.margin.begin(), g4.margin.end()), g4.scale_margin,
                 [&](const Values& p) { return q4_0_exact(px(p)).block; },
                 [](const BlockQ4_0& blk, std::size_t j) {
                   return j < kGgmlBlock ? q4_0_code(blk, static_cast<int>(j)) : int{blk.d};
                 });
    for (Fp8 f : {Fp8::e4m3fn, Fp8::e5m2}) {
      const Fp8GroupExact gf = fp8_dynamic_exact(v.p, f, Fp8Overflow::nonfinite);
      std::vector<double> m;
      for (const ExactCode& c : gf.codes) m.push_back(c.margin);
      expect_sound(x, m, gf.scale_margin, [&](const Values& p) { return fp8_dynamic_exact(p.p, f, Fp8Overflow::nonfinite); },
                   [f](const Fp8GroupExact& g, std::size_t j) {
                     // +0 and -0 are one value
                     return j < g.codes.size() ? fp8_decode(static_cast<std::uint8_t>(g.codes[j].code), f) : g.scale;
                   });
    }
    for (int bits : {4, 8}) {
      const AffineSpec spec{bits, kGgmlBlock, b % 2 ? DType::bf16 : DType::f32};
      const AffineExact ga = mlx_affine_exact(v.p, spec);
      expect_sound(x, ga.margin, ga.scale_margin[0], [&](const Values& p) { return mlx_affine_exact(p.p, spec); },
                   [](const AffineExact& g, std::size_t j) {
                     return j < g.q.codes.size() ? std::pair<double, double>(g.q.codes[j], 0)
                                                 : std::pair<double, double>(g.q.groups[0].scale, g.q.groups[0].bias);
                   });
    }
  }
  std::printf("q8_0 margins over d / 8: %d of %d\n", big, all);
  EXPECT_GT(big, all / 2);
}

TEST(quantized_rounding, GgmlTies) {
  Values v;
  v.push(127);
  v.push(2.5);   // 127 * 2.5 / 127: a tie, roundf takes it away from zero
  v.push(-2.5);
  for (int j = 3; j < kGgmlBlock; ++j) v.push(j - 16);
  const Q8_0Exact g8 = q8_0_exact(std::span<const mpfr_srcptr, kGgmlBlock>(v.p.data(), kGgmlBlock));
  EXPECT_EQ(g8.block.d, 0x3C00);
  EXPECT_EQ(g8.block.qs[1], 3);
  EXPECT_EQ(g8.block.qs[2], -3);
  EXPECT_EQ(g8.margin[1], 0.0);
  EXPECT_EQ(g8.margin[2], 0.0);
  EXPECT_GT(g8.margin[5], 0.0);
  Values w;
  w.push(-8);  // d* = -8 / -8 = 1
  w.push(-2.5);  // t = -2.5: floor(t + 8.5) = 6, a tie that goes up
  w.push(1.5);   // t = 1.5: 10
  for (int j = 3; j < kGgmlBlock; ++j) w.push(0.25 * (j % 5));
  const Q4_0Exact g4 = q4_0_exact(std::span<const mpfr_srcptr, kGgmlBlock>(w.p.data(), kGgmlBlock));
  EXPECT_EQ(g4.block.d, 0x3C00);
  EXPECT_EQ(q4_0_code(g4.block, 1), 6);
  EXPECT_EQ(q4_0_code(g4.block, 2), 10);
  EXPECT_EQ(g4.margin[1], 0.0);
  EXPECT_EQ(g4.margin[2], 0.0);
}

}  // namespace
}  // namespace ropecheck::quant
