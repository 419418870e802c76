// The quantizer budgets of accuracy/quantized_store.hpp (ERROR_MODEL.md, "Quantized stores")
// calibrated against the owners' own binary32 quantizers (core/quantized.hpp, bit for bit theirs per
// tests/python/quant_crosscheck.py) on exact binary32 inputs (class error E = 0): wherever the golden
// margin exceeds the budget of those roundings, the owner's code, scale and bias are the golden ones.
// The undecided rest is counted and printed. Seeds fixed and printed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include "ropecheck/accuracy/quantized_store.hpp"
#include "ropecheck/core/quantized.hpp"
#include "ropecheck/reference/mpfr_value.hpp"
#include "ropecheck/reference/quantized_rounding.hpp"

namespace ropecheck::quant {
namespace {

using accuracy::group_budget;
using accuracy::GroupStore;

struct Exact {
  std::vector<std::unique_ptr<MpfrValue>> v;
  std::vector<mpfr_srcptr> p;
  explicit Exact(const std::vector<float>& x) {
    for (float xv : x) {
      v.push_back(std::make_unique<MpfrValue>(53));
      mpfr_set_d(v.back()->get(), xv, MPFR_RNDN);
      p.push_back(v.back()->get());
    }
  }
};

std::mt19937_64& rng() {
  static std::mt19937_64 r = [] {
    const unsigned seed = 8675309;
    std::printf("seed %u\n", seed);
    return std::mt19937_64(seed);
  }();
  return r;
}

// Normal values at a random binary scale, one exact zero now and then.
std::vector<float> draw_block(std::size_t n) {
  std::normal_distribution<double> nd(0.0, 1.0);
  std::vector<float> x(n);
  const double scale = std::ldexp(1.0, static_cast<int>(rng()() % 20) - 10);
  for (float& v : x) v = static_cast<float>(nd(rng()) * scale);
  if (rng()() % 8 == 0) x[rng()() % n] = 0.0f;
  return x;
}

double amax_of(const std::vector<float>& x) {
  double a = 0;
  for (float v : x) a = std::max(a, static_cast<double>(std::fabs(v)));
  return a;
}

TEST(quantized_calibration, GgmlQuantizersWithinTheirBudget) {
  int decided = 0, undecided = 0, undecided_equal = 0, scales = 0;
  for (int b = 0; b < 3000; ++b) {
    const std::vector<float> x = draw_block(kGgmlBlock);
    const Exact ex(x);
    const std::span<const mpfr_srcptr, kGgmlBlock> px(ex.p.data(), kGgmlBlock);
    const std::span<const float, kGgmlBlock> fx(x.data(), kGgmlBlock);
    const Q8_0Exact g8 = q8_0_exact(px);
    const BlockQ8_0 o8 = ggml_quantize_q8_0(fx);
    const Q4_0Exact g4 = q4_0_exact(px);
    const BlockQ4_0 o4 = ggml_quantize_q4_0(fx);
    const double e8 = group_budget(GroupStore::q8_0, 0, amax_of(x));
    const double e4 = group_budget(GroupStore::q4_0, 0, amax_of(x));
    if (g8.scale_margin > e8) {
      ASSERT_EQ(g8.block.d, o8.d) << b;
      ++scales;
    }
    if (g4.scale_margin > e4) {
      ASSERT_EQ(g4.block.d, o4.d) << b;
    }
    for (int j = 0; j < kGgmlBlock; ++j) {
      const auto uj = static_cast<std::size_t>(j);
      if (g8.margin[uj] > e8) {
        ASSERT_EQ(g8.block.qs[uj], o8.qs[uj]) << b << " " << j;
        ++decided;
      } else {
        ++undecided;
        undecided_equal += g8.block.qs[uj] == o8.qs[uj];
      }
      if (g4.margin[uj] > e4) {
        ASSERT_EQ(q4_0_code(g4.block, j), q4_0_code(o4, j)) << b << " " << j;
      }
    }
  }
  std::printf("q8_0: %d codes decided, all equal to ggml's; %d undecided (%d equal); %d scales decided\n", decided,
              undecided, undecided_equal, scales);
  EXPECT_GT(decided, 90000);
}

TEST(quantized_calibration, Fp8DynamicWithinItsBudget) {
  int decided = 0;
  for (int b = 0; b < 2000; ++b) {
    const std::vector<float> x = draw_block(64);
    const Exact ex(x);
    for (Fp8 f : {Fp8::e4m3fn, Fp8::e5m2}) {
      const Fp8GroupExact g = fp8_dynamic_exact(ex.p, f, Fp8Overflow::saturate);
      const float s = fp8_dynamic_scale(x, f);
      ASSERT_EQ(g.scale, static_cast<double>(s));  // both the one rounding of amax / max_finite
      const double e = group_budget(GroupStore::fp8_dynamic, 0, amax_of(x));
      for (std::size_t j = 0; j < x.size(); ++j) {
        if (g.codes[j].margin <= e) continue;
        ++decided;
        ASSERT_EQ(g.codes[j].code, fp8_quantize(x[j], s, f, Fp8Overflow::saturate)) << b << " " << j;
      }
    }
  }
  std::printf("FP8 dynamic: %d codes decided, all equal to the owner's\n", decided);
  EXPECT_GT(decided, 200000);
}

TEST(quantized_calibration, MlxAffineWithinItsBudget) {
  int decided = 0, scales = 0;
  for (int b = 0; b < 600; ++b) {
    const std::size_t gs = b % 3 == 0 ? 32 : (b % 3 == 1 ? 64 : 128);
    std::vector<float> x = draw_block(gs);
    const DType dt = b % 4 == 0 ? DType::bf16 : DType::f32;
    if (dt == DType::bf16)  // bf16 data, bf16 scale and bias: MLX quantizing a bf16 array
      for (float& xv : x) xv = static_cast<float>(round_to(xv, DType::bf16));
    const Exact ex(x);
    for (int bits : {4, 8}) {
      const AffineSpec spec{bits, static_cast<int>(gs), dt};
      const AffineExact g = mlx_affine_exact(ex.p, spec);
      const AffineQuantized o = mlx_affine_quantize(x, spec);
      const double e = group_budget(GroupStore::affine, 0, amax_of(x));
      if (g.scale_margin[0] > e) {
        ++scales;
        ASSERT_EQ(g.q.groups[0].scale, o.groups[0].scale) << b;
        ASSERT_EQ(g.q.groups[0].bias, o.groups[0].bias) << b;
      }
      for (std::size_t j = 0; j < x.size(); ++j) {
        if (g.margin[j] <= e) continue;
        ++decided;
        ASSERT_EQ(g.q.codes[j], o.codes[j]) << b << " " << j << " bits " << bits;
      }
    }
  }
  std::printf("MLX affine: %d codes and %d scales decided, all equal to MLX's\n", decided, scales);
  EXPECT_GT(decided, 60000);
}

}  // namespace
}  // namespace ropecheck::quant
