// Shared by tests/kernels/test_kernels*.cpp: deterministic positions and inputs, the exact reference held
// at the right MPFR precision, exact reduction modulo 2pi, and the bounds the kernels are held to.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <utility>
#include <vector>

#include "float_recipes.hpp"
#include "ropecheck/formulas/rope.hpp"
#include "ropecheck/reference/scalar.hpp"

namespace ropecheck::kernels::test {

// Measured worst cases (printed by the tests, written in kernels/RECIPES.md) with a little headroom.
// accurate's cos / sin against the exact values, |error| in units of 2^-24, positions up to 2^24.
inline constexpr double kAccurateRowBoundU32 = 1.5;
// accurate's f32 rotation against the exact one, |error| / (2^-24 * att * (|x_a| + |x_b|)).
inline constexpr double kAccurateRotationBoundU32 = 3.0;

// 0..16, then in every octave [2^k, 2^(k+1)) below max: its ends and `per_octave` uniform random
// positions (std::mt19937_64 seeded with `seed`); max - 1 last. Sorted, distinct.
inline std::vector<std::int64_t> log_positions(std::int64_t max, int per_octave, std::uint64_t seed) {
  std::vector<std::int64_t> out;
  for (std::int64_t p = 0; p <= 16 && p < max; ++p) out.push_back(p);
  std::mt19937_64 rng(seed);
  for (std::int64_t lo = 16; lo < max; lo *= 2) {
    const std::int64_t hi = std::min(2 * lo, max);
    out.push_back(lo);
    out.push_back(hi - 1);
    std::uniform_int_distribution<std::int64_t> d(lo, hi - 1);
    for (int i = 0; i < per_octave; ++i) out.push_back(d(rng));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// n values k / 64, k uniform in [-256, 256]: exact in bf16, f16 and f32 (so every dtype sees the same
// input), seeded.
inline std::vector<float> random_input(std::int64_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> d(-256, 256);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = static_cast<float>(d(rng)) / 64.0f;
  return v;
}

// The exact reference (MPFR at working_precision_bits for the largest angle), results as doubles.
class ExactRope {
 public:
  ExactRope(const RopeSpec& r, std::optional<std::int64_t> seq_len, std::int64_t max_position)
      : spec_(r),
        precision_(working_precision_bits(53, rope_max_abs_angle(r, seq_len, max_position))),
        f_(rope_frequencies<Real>(r, seq_len)) {}

  std::pair<double, double> cos_sin(const Position& p, int j) const {
    const Real a = rope_angle(spec_, f_, p, j);
    return {cos(a).convert_to<double>(), sin(a).convert_to<double>()};
  }
  // head_dim exact outputs for one head vector x.
  std::vector<double> rotate(const Position& p, const float* x) const {
    std::vector<Real> xr;
    for (int i = 0; i < spec_.head_dim; ++i) xr.emplace_back(static_cast<double>(x[i]));
    const std::vector<Real> y = rope_apply(spec_, f_, p, std::span<const Real>(xr));
    std::vector<double> out;
    for (const Real& v : y) out.push_back(v.convert_to<double>());
    return out;
  }
  double attention_factor() const { return f_.attention_factor.convert_to<double>(); }

 private:
  RopeSpec spec_;
  ScopedPrecision precision_;
  RopeFrequencies<Real> f_;
};

// x reduced modulo 2pi to [-pi, pi] exactly (MPFR at 256 bits + x's exponent), rounded to binary64.
inline double reduce_two_pi_exact(double x) {
  int e = 0;
  std::frexp(x, &e);
  ScopedPrecision prec(256 + static_cast<unsigned>(std::max(e, 0)));
  const Real two_pi = 2 * pi_value<Real>();
  const Real xr(x);
  const Real n = round(xr / two_pi);
  return Real(xr - n * two_pi).convert_to<double>();
}

// CUDA's __sinf / __cosf model with an exact sin of the f32 revolution (tests/support/float_recipes.hpp).
inline std::pair<double, double> fast_sincos_exact_model(float x) {
  const float rev = recipes::mul_rz(x, 0x1.45f306p-3f);
  const double frac = static_cast<double>(rev) - std::floor(static_cast<double>(rev));
  const double a = 2 * 3.14159265358979323846 * frac;
  return {std::sin(a), std::cos(a)};
}

}  // namespace ropecheck::kernels::test
