// Correctly rounded float operations under one name for the device and the host.
//
// On the device they are the _rn intrinsics, which nvcc never contracts into an FMA: every product
// and sum of a recipe rounds once, as on the CPU (built with -ffp-contract=off). On the host (the
// emulation that runs the kernels' code without a GPU, emulation.hpp) they are the plain operators,
// compiled with -ffp-contract=off as well; the vendor functions (sinf / cosf, __sinf / __cosf,
// binary64 sin / cos) become the host libm's, so only their last bits differ from a GPU run.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#define RC_HD __host__ __device__ __forceinline__
// #pragma unroll for the device pass only (the host compiler does not know it).
#ifdef __CUDA_ARCH__
#define RC_UNROLL _Pragma("unroll")
#else
#define RC_UNROLL
#endif

namespace ropecheck::kernels::cuda_detail::fp {

RC_HD float mul(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
RC_HD float add(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
RC_HD float sub(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
RC_HD float div(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
RC_HD double mul(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
RC_HD double add(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
RC_HD double sub(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}

RC_HD std::uint32_t bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
RC_HD float from_bits(std::uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

// Integer to float / double, round to nearest even (exact below 2^24 / 2^53).
RC_HD float i64_to_f32(std::int64_t v) {
#ifdef __CUDA_ARCH__
  return __ll2float_rn(v);
#else
  return static_cast<float>(v);
#endif
}
RC_HD double i64_to_f64(std::int64_t v) {
#ifdef __CUDA_ARCH__
  return __ll2double_rn(v);
#else
  return static_cast<double>(v);
#endif
}

RC_HD float f64_to_f32_rn(double d) {
#ifdef __CUDA_ARCH__
  return __double2float_rn(d);
#else
  return static_cast<float>(d);
#endif
}
// Toward zero: never overflows to infinity.
RC_HD float f64_to_f32_rz(double d) {
#ifdef __CUDA_ARCH__
  return __double2float_rz(d);
#else
  float f = static_cast<float>(d);
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);
  return f;
#endif
}

// Round to the nearest integer, ties to even (the default rounding mode on both sides).
RC_HD float round_even(float v) {
#ifdef __CUDA_ARCH__
  return rintf(v);
#else
  return std::nearbyint(v);
#endif
}
RC_HD double round_even(double v) {
#ifdef __CUDA_ARCH__
  return rint(v);
#else
  return std::nearbyint(v);
#endif
}

RC_HD float abs(float v) { return v < 0.0f ? -v : (v == 0.0f ? 0.0f : v); }
RC_HD double abs(double v) {
#ifdef __CUDA_ARCH__
  return fabs(v);
#else
  return std::fabs(v);
#endif
}
RC_HD bool is_finite(double v) {
#ifdef __CUDA_ARCH__
  return isfinite(v);
#else
  return std::isfinite(v);
#endif
}

// The vendor functions a recipe names.
RC_HD float sin_f32(float x) {
#ifdef __CUDA_ARCH__
  return sinf(x);
#else
  return std::sin(x);
#endif
}
RC_HD float cos_f32(float x) {
#ifdef __CUDA_ARCH__
  return cosf(x);
#else
  return std::cos(x);
#endif
}
// fast-math intrinsics: only the fast-sincos recipe calls these (tests/gpu/check_ptx_fast_math.py).
RC_HD float fast_sin_f32(float x) {
#ifdef __CUDA_ARCH__
  return __sinf(x);
#else
  return std::sin(x);
#endif
}
RC_HD float fast_cos_f32(float x) {
#ifdef __CUDA_ARCH__
  return __cosf(x);
#else
  return std::cos(x);
#endif
}
RC_HD double sin_f64(double x) {
#ifdef __CUDA_ARCH__
  return sin(x);
#else
  return std::sin(x);
#endif
}
RC_HD double cos_f64(double x) {
#ifdef __CUDA_ARCH__
  return cos(x);
#else
  return std::cos(x);
#endif
}

}  // namespace ropecheck::kernels::cuda_detail::fp
