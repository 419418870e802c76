// Device-side math of the recipes (recipe.hpp), shared by every CUDA kernel.
//
// Determinism rule: wherever the CPU kernels (kernels/src) define the computation operation by
// operation (storage conversions, the accurate reduction and polynomials, the angle products, the
// attention factor, the rotation), this file performs the same IEEE operations in the same order,
// through fp.cuh's wrappers (the _rn intrinsics on the device, which nvcc cannot contract into an
// FMA; the CPU is built with -ffp-contract=off and uses no FMA either). Every function here is
// __host__ __device__ so that the host emulation (emulation.hpp) runs the same code. Where a recipe names a vendor function
// (hf and the other f32 recipes: sinf / cosf; fast-sincos: __sinf / __cosf) the GPU calls CUDA's and
// the results differ from the CPU's within the recipe's accuracy class.
//
// fast-sincos is the only recipe that calls fast-math intrinsics; tests/gpu/check_ptx_fast_math.py
// proves it on the generated PTX (sin.approx / cos.approx only in kernels instantiated for it).
#pragma once

#include <cstdint>
#include <stdexcept>

#include "fp.cuh"
#include "launch.hpp"

namespace ropecheck::kernels::cuda_detail {

// ---- recipe tags ---------------------------------------------------------------------------------
//
// Kernels are templates over a tag type per recipe rather than over the RC value, so that a kernel's
// (mangled) symbol names its recipe in letters, e.g. ...cuda_detail6recipe11fast_sincos...: the
// fast-math test (tests/gpu/check_ptx_fast_math.py) reads them in the PTX.
namespace recipe {
#define ROPECHECK_RECIPE_TAG(name) \
  struct name {                    \
    static constexpr RC id = RC::name; \
  };
ROPECHECK_RECIPE_TAG(accurate)
ROPECHECK_RECIPE_TAG(hf)
ROPECHECK_RECIPE_TAG(meta)
ROPECHECK_RECIPE_TAG(ggml)
ROPECHECK_RECIPE_TAG(bf16_table)
ROPECHECK_RECIPE_TAG(f16_table)
ROPECHECK_RECIPE_TAG(bf16_inv_freq)
ROPECHECK_RECIPE_TAG(f16_inv_freq)
ROPECHECK_RECIPE_TAG(bf16_positions)
ROPECHECK_RECIPE_TAG(f16_positions)
ROPECHECK_RECIPE_TAG(fast_sincos)
ROPECHECK_RECIPE_TAG(accurate_f64)
#undef ROPECHECK_RECIPE_TAG
}  // namespace recipe

// Calls f(tag) with the tag of r (host code: the launchers' dispatch).
template <class F>
void with_recipe(RC r, F&& f) {
  switch (r) {
    case RC::accurate: return f(recipe::accurate{});
    case RC::hf: return f(recipe::hf{});
    case RC::meta: return f(recipe::meta{});
    case RC::ggml: return f(recipe::ggml{});
    case RC::bf16_table: return f(recipe::bf16_table{});
    case RC::f16_table: return f(recipe::f16_table{});
    case RC::bf16_inv_freq: return f(recipe::bf16_inv_freq{});
    case RC::f16_inv_freq: return f(recipe::f16_inv_freq{});
    case RC::bf16_positions: return f(recipe::bf16_positions{});
    case RC::f16_positions: return f(recipe::f16_positions{});
    case RC::fast_sincos: return f(recipe::fast_sincos{});
    case RC::accurate_f64: return f(recipe::accurate_f64{});
  }
  throw std::invalid_argument("ropecheck::kernels (CUDA): unknown recipe");
}

// ---- storage formats: bit for bit the CPU's conversions (scalar_recipes.cpp) ---------------------

RC_HD std::uint16_t f32_to_bf16_bits(float v) {
  std::uint32_t u = fp::bits(v);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
  u += 0x7FFFu + ((u >> 16) & 1u);  // round to nearest even (PyTorch c10::round_to_nearest_even)
  return static_cast<std::uint16_t>(u >> 16);
}

RC_HD float bf16_bits_to_f32(std::uint16_t b) {
  return fp::from_bits(static_cast<std::uint32_t>(b) << 16);
}

RC_HD std::uint16_t f32_to_f16_bits(float v) {
  const std::uint32_t u = fp::bits(v);
  const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t a = u & 0x7FFFFFFFu;
  if (a >= 0x7F800000u) return static_cast<std::uint16_t>(sign | (a > 0x7F800000u ? 0x7E00u : 0x7C00u));
  if (a >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // >= 65520: infinity
  if (a >= 0x38800000u) {                                                   // normal binary16
    const std::uint32_t r = a + 0x0FFFu + ((a >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | ((r - 0x38000000u) >> 13));
  }
  // Below 2^-14: a multiple of 2^-24; |v| * 2^24 is exact, round_even rounds to nearest even.
  const float units = fp::round_even(fp::mul(fp::abs(v), 16777216.0f));
  return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(units));
}

RC_HD float f16_bits_to_f32(std::uint16_t b) {
  const std::uint32_t sign = static_cast<std::uint32_t>(b & 0x8000u) << 16;
  const std::uint32_t e = (b >> 10) & 0x1Fu, m = b & 0x3FFu;
  if (e == 0x1F) return fp::from_bits(sign | 0x7F800000u | (m << 13));
  if (e == 0) {  // zero or subnormal: m * 2^-24, exact
    const float mag = fp::mul(static_cast<float>(m), 0x1p-24f);
    return sign ? -mag : mag;
  }
  return fp::from_bits(sign | ((e + 112u) << 23) | (m << 13));
}

// v rounded once to T, held as a float (every f16 / bf16 value is a float). f32 / f64: v.
template <DT T>
RC_HD float round_to(float v) {
  if constexpr (T == DT::bf16) return bf16_bits_to_f32(f32_to_bf16_bits(v));
  else if constexpr (T == DT::f16) return f16_bits_to_f32(f32_to_f16_bits(v));
  else return v;
}

RC_HD float round_to(float v, DT t) {
  switch (t) {
    case DT::bf16: return round_to<DT::bf16>(v);
    case DT::f16: return round_to<DT::f16>(v);
    default: return v;
  }
}

// d rounded once to t (f32, f16, bf16), held as a float. For f16 / bf16 d is first rounded to f32
// with round-to-odd (13 / 16 spare bits make the second rounding correct): the CPU's
// round_double_to_float (kernels/src/storage.hpp).
RC_HD float round_double_to_float(double d, DT t) {
  if (t == DT::f32 || t == DT::f64) return fp::f64_to_f32_rn(d);
  float f = fp::f64_to_f32_rz(d);  // toward zero: never overflows to infinity
  if (fp::is_finite(d) && static_cast<double>(f) != d) f = fp::from_bits(fp::bits(f) | 1u);  // sticky bit
  return round_to(f, t);
}

// ---- element access with a run-time dtype (the generic, strided path) -----------------------------

RC_HD float load_as_float(const void* p, std::int64_t i, DT t) {
  switch (t) {
    case DT::f64: return fp::f64_to_f32_rn(static_cast<const double*>(p)[i]);  // one rounding
    case DT::f32: return static_cast<const float*>(p)[i];
    case DT::f16: return f16_bits_to_f32(static_cast<const std::uint16_t*>(p)[i]);
    case DT::bf16: return bf16_bits_to_f32(static_cast<const std::uint16_t*>(p)[i]);
  }
  return 0.0f;
}

RC_HD double load_as_double(const void* p, std::int64_t i, DT t) {
  return t == DT::f64 ? static_cast<const double*>(p)[i] : static_cast<double>(load_as_float(p, i, t));
}

RC_HD void store_float(void* p, std::int64_t i, DT t, float v) {
  switch (t) {
    case DT::f64: static_cast<double*>(p)[i] = static_cast<double>(v); break;
    case DT::f32: static_cast<float*>(p)[i] = v; break;
    case DT::f16: static_cast<std::uint16_t*>(p)[i] = f32_to_f16_bits(v); break;
    case DT::bf16: static_cast<std::uint16_t*>(p)[i] = f32_to_bf16_bits(v); break;
  }
}

// ---- positions --------------------------------------------------------------------------------------

RC_HD std::int64_t load_position(const PosArgs& p, std::int64_t token, int stream) {
  const std::int64_t i = token * p.token_stride + (p.streams == 3 ? stream * p.stream_stride : 0);
  return p.is_int64 ? static_cast<const std::int64_t*>(p.data)[i]
                    : static_cast<std::int64_t>(static_cast<const std::int32_t*>(p.data)[i]);
}

// ---- accurate: reduction modulo pi/2 in binary64, f32 polynomials (kernels/src/kernel_detail.hpp) -----

// Same constants as the CPU (kernel_detail.hpp); tests/gpu checks the results bit for bit.
constexpr double kTwoOverPi = 0x1.45f306dc9c883p-1;
constexpr double kPio2_1 = 0x1.921fb5p+0;
constexpr double kPio2_2 = 0x1.110b46p-26;
constexpr double kPio2_3 = 0x1.1a62633145c07p-54;
constexpr double kReduceLimit = 0x1p28;
constexpr float kS1 = -1.6666654611e-1f;
constexpr float kS2 = 8.3321608736e-3f;
constexpr float kS3 = -1.9515295891e-4f;
constexpr float kC1 = 4.166664568298827e-2f;
constexpr float kC2 = -1.388731625493765e-3f;
constexpr float kC3 = 2.443315711809948e-5f;

// sin / cos of r in [-pi/4, pi/4] (f32), left to right, every operation rounded to f32.
RC_HD void poly_sincos(float r, float& s, float& c) {
  const float z = fp::mul(r, r);
  // sin r = ((kS3*z + kS2)*z + kS1)*z*r + r
  float ps = fp::add(fp::mul(kS3, z), kS2);
  ps = fp::add(fp::mul(ps, z), kS1);
  ps = fp::mul(fp::mul(ps, z), r);
  s = fp::add(ps, r);
  // cos r = ((kC3*z + kC2)*z + kC1)*z*z - 0.5*z + 1
  float pc = fp::add(fp::mul(kC3, z), kC2);
  pc = fp::add(fp::mul(pc, z), kC1);
  pc = fp::mul(fp::mul(pc, z), z);
  pc = fp::sub(pc, fp::mul(0.5f, z));
  c = fp::add(pc, 1.0f);
}

// The accurate recipe's sin / cos of a binary64 angle. Beyond the Cody-Waite range (and for inf /
// NaN) the CPU uses glibc's binary64 sin / cos rounded to f32; here CUDA's (within 2 ulp of
// binary64, so the f32 results agree except when the binary64 value lies within 2 ulp of a
// rounding boundary of f32: about 2^-28 of the cases).
RC_HD void accurate_sincos(double theta, float& s, float& c) {
  if (!(fp::abs(theta) <= kReduceLimit)) {
    s = fp::f64_to_f32_rn(fp::sin_f64(theta));
    c = fp::f64_to_f32_rn(fp::cos_f64(theta));
    return;
  }
  const double k = fp::round_even(fp::mul(theta, kTwoOverPi));
  double r = fp::sub(theta, fp::mul(k, kPio2_1));
  r = fp::sub(r, fp::mul(k, kPio2_2));
  r = fp::sub(r, fp::mul(k, kPio2_3));
  float ps, pc;
  poly_sincos(fp::f64_to_f32_rn(r), ps, pc);
  switch (static_cast<int>(static_cast<long long>(k) & 3)) {
    case 0: s = ps; c = pc; break;
    case 1: s = pc; c = -ps; break;
    case 2: s = -ps; c = -pc; break;
    default: s = -pc; c = ps; break;
  }
}

// ---- per-recipe f32 angle and sin / cos --------------------------------------------------------------

// The recipe's f32 position: hf's fl32(p); bf16-positions / f16-positions hold it in bf16 / f16.
template <RC R>
RC_HD float recipe_position_f32(std::int64_t p) {
  const float f = fp::i64_to_f32(p);
  if constexpr (R == RC::bf16_positions) return round_to<DT::bf16>(f);
  else if constexpr (R == RC::f16_positions) return round_to<DT::f16>(f);
  else return f;
}

// sin / cos of an f32 angle as the recipe evaluates them. Only fast-sincos uses the intrinsics.
template <RC R>
RC_HD void recipe_sincos_f32(float theta, float& s, float& c) {
  if constexpr (R == RC::fast_sincos) {
    s = fp::fast_sin_f32(theta);
    c = fp::fast_cos_f32(theta);
  } else {
    s = fp::sin_f32(theta);
    c = fp::cos_f32(theta);
  }
}

}  // namespace ropecheck::kernels::cuda_detail
