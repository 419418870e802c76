// Table and storage mistakes: a crude sin / cos, sin negated, cos and sin swapped, the table held in
// f16, bf16 results truncated instead of rounded.
#include "mutation.hpp"

#include <cmath>
#include <cstring>
#include <tuple>

namespace ropecheck::props::mutation {

namespace {

// A crude low-accuracy sin / cos of the kind shipped as "fast math" (precision.md 1.2: CUDA's
// __sinf / __cosf are bounded only on [-pi, pi] and "larger otherwise"; a third-party RoPE kernel
// measured 3e-6 at position 40 growing to 1e-2 at 131071). Emulated on the CPU: the argument is
// reduced in f32 with ONE f32 constant for 2 pi (no Cody-Waite tail, so the reduced argument is off
// by about |x| 2^-24 plus k |fl(2 pi) - 2 pi|, growing with |x|), folded to [-pi/2, pi/2], and
// evaluated with short Taylor polynomials (sin degree 7, cos degree 8): exact at 0, absolute error
// 2.8e-6 at 1 radian, up to 1.6e-4 at pi/2. (A faithful model of the hardware __sinf, error 2^-21.4
// on [-pi, pi], stays inside fp32-angle: ERROR_MODEL.md section 4. This one does not.)
float sin_poly7(float a) {
  const float a2 = a * a;
  return a * (1.0f + a2 * (-1.0f / 6.0f + a2 * (1.0f / 120.0f + a2 * (-1.0f / 5040.0f))));
}
float cos_poly8(float a) {
  const float a2 = a * a;
  return 1.0f + a2 * (-0.5f + a2 * (1.0f / 24.0f + a2 * (-1.0f / 720.0f + a2 * (1.0f / 40320.0f))));
}
std::pair<float, float> crude_sincos(float x) {  // {cos, sin}
  constexpr float kInvTwoPi = 0.159154937f;
  constexpr float kTwoPi = 6.28318548f;  // f32(2 pi), the only reduction constant
  constexpr float kPi = 3.14159274f, kHalfPi = 1.57079637f;
  const float kq = std::nearbyint(x * kInvTwoPi);
  float a = x - kq * kTwoPi;  // in about [-pi, pi]
  float cos_sign = 1.0f;
  if (a > kHalfPi) {  // sin(pi - a) = sin a, cos(pi - a) = -cos a
    a = kPi - a;
    cos_sign = -1.0f;
  } else if (a < -kHalfPi) {
    a = -kPi - a;
    cos_sign = -1.0f;
  }
  return {cos_sign * cos_poly8(a), sin_poly7(a)};
}

}  // namespace

// {cos, sin} of the angle, as the (mutated) kernel evaluates them, attention factor folded in.
std::pair<float, float> mutant_table(Bug bug, float theta, float att) {
  float c = 0, s = 0;
  if (bug == Bug::crude_sincos) {
    std::tie(c, s) = crude_sincos(theta);
  } else {
    c = std::cos(theta);
    s = std::sin(theta);
  }
  if (bug == Bug::sin_sign_flipped) s = -s;
  if (bug == Bug::cos_sin_swapped) std::swap(c, s);
  c = c * att;
  s = s * att;
  if (bug == Bug::f16_table) {  // cos / sin cached in f16, rotation in f32
    c = k::round_to_dtype(c, DType::f16);
    s = k::round_to_dtype(s, DType::f16);
  }
  return {c, s};
}

// The store: rounding to nearest even (k::round_to_dtype), or the bug's truncation of a bf16 result
// (the low 16 bits of the f32 pattern dropped: rounding toward zero).
float mutant_store(Bug bug, float v, DType dt) {
  if (bug != Bug::bf16_truncating_store || dt != DType::bf16 || !std::isfinite(v)) return k::round_to_dtype(v, dt);
  std::uint32_t bits;
  std::memcpy(&bits, &v, 4);
  bits &= 0xFFFF0000u;
  std::memcpy(&v, &bits, 4);
  return v;
}

}  // namespace ropecheck::props::mutation
