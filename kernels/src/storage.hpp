// Internal to kernels/src (portable translation units only, never simd_avx512.cpp): reading and
// writing the four storage dtypes element by element, with one rounding to nearest even.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernel_detail.hpp"
#include "ropecheck/kernels/scalar_recipes.hpp"
#include "ropecheck/core/dtype.hpp"

namespace ropecheck::kernels::detail {

constexpr Fmt fmt_of(DType t) {
  switch (t) {
    case DType::f64: return Fmt::f64;
    case DType::f32: return Fmt::f32;
    case DType::f16: return Fmt::f16;
    case DType::bf16: return Fmt::bf16;
  }
  return Fmt::f32;
}

constexpr std::int64_t dtype_size(DType t) { return t == DType::f64 ? 8 : (t == DType::f32 ? 4 : 2); }

// d rounded once (to nearest even) to t, returned as a float (t = f32, f16 or bf16). For f16 / bf16
// the value is first rounded to f32 with round-to-odd, which has 13 / 16 more bits than the target
// and so makes the second rounding correct (Boldo and Melquiond's double rounding with round-to-odd).
inline float round_double_to_float(double d, DType t) {
  if (t == DType::f32 || t == DType::f64) return static_cast<float>(d);
  float f = static_cast<float>(d);
  if (std::isfinite(f) && static_cast<double>(f) != d) {
    if (std::fabs(static_cast<double>(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);  // toward zero
    std::uint32_t u = 0;
    std::memcpy(&u, &f, sizeof u);
    u |= 1u;  // odd: the sticky bit
    std::memcpy(&f, &u, sizeof f);
  } else if (std::isinf(f) && std::isfinite(d)) {
    f = std::copysign(0x1.fffffep127f, static_cast<float>(d));  // round-to-odd never overflows
  }
  return round_to_dtype(f, t);
}

template <DType T>
inline float load_as_float(const void* base, std::int64_t i) {
  if constexpr (T == DType::f32) {
    float v;
    std::memcpy(&v, static_cast<const unsigned char*>(base) + i * 4, 4);
    return v;
  } else if constexpr (T == DType::f64) {
    double v;
    std::memcpy(&v, static_cast<const unsigned char*>(base) + i * 8, 8);
    return static_cast<float>(v);
  } else {
    std::uint16_t b;
    std::memcpy(&b, static_cast<const unsigned char*>(base) + i * 2, 2);
    return T == DType::bf16 ? bf16_bits_to_f32(b) : f16_bits_to_f32(b);
  }
}

template <DType T>
inline double load_as_double(const void* base, std::int64_t i) {
  if constexpr (T == DType::f64) {
    double v;
    std::memcpy(&v, static_cast<const unsigned char*>(base) + i * 8, 8);
    return v;
  } else {
    return static_cast<double>(load_as_float<T>(base, i));  // exact
  }
}

// Stores an f32 value rounded once to T (f64: exactly).
template <DType T>
inline void store_float(void* base, std::int64_t i, float v) {
  auto* p = static_cast<unsigned char*>(base);
  if constexpr (T == DType::f32) {
    std::memcpy(p + i * 4, &v, 4);
  } else if constexpr (T == DType::f64) {
    const auto d = static_cast<double>(v);
    std::memcpy(p + i * 8, &d, 8);
  } else {
    const std::uint16_t b = T == DType::bf16 ? f32_to_bf16_bits(v) : f32_to_f16_bits(v);
    std::memcpy(p + i * 2, &b, 2);
  }
}

// Stores a binary64 value rounded once to T.
template <DType T>
inline void store_double(void* base, std::int64_t i, double v) {
  if constexpr (T == DType::f64) {
    std::memcpy(static_cast<unsigned char*>(base) + i * 8, &v, 8);
  } else {
    store_float<T>(base, i, round_double_to_float(v, T));
  }
}

// Element i of `in` (dtype In) to element o of `out` (dtype Out), one rounding.
template <DType In, DType Out>
inline void store_converted(const void* in, std::int64_t i, void* out, std::int64_t o) {
  if constexpr (In == DType::f64)
    store_double<Out>(out, o, load_as_double<In>(in, i));
  else
    store_float<Out>(out, o, load_as_float<In>(in, i));
}

}  // namespace ropecheck::kernels::detail
