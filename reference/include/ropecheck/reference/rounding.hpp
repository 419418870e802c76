// Correct rounding of high-precision (MPFR) values to the storage formats the suite checks
// (core/dtype.hpp names the formats and decodes them).
//
// Every golden value in the suite is computed in MPFR and then rounded ONCE, round-to-nearest
// ties-to-even, straight to the target format. Rounding through an intermediate format (e.g.
// float32, then bf16) is not a correct oracle: double rounding differs from single rounding on
// about 2^-17 of sin/cos values (research/precision.md section 2.4).
//
// Formats follow IEEE 754 semantics: gradual underflow (subnormals), overflow to infinity,
// signed zero, NaN. The MPFR global exponent range is never touched, so all functions are
// thread-safe (given a thread-safe MPFR build, as Debian's is).
#pragma once

#include <cstdint>

#include <boost/multiprecision/mpfr.hpp>
#include <mpfr.h>

#include "ropecheck/core/dtype.hpp"

namespace ropecheck {

// Round x (any precision) once, round-to-nearest ties-to-even, to format t; returns the bit
// pattern in the low storage_bits bits. NaN gives the canonical quiet NaN (0x7FF8000000000000,
// 0x7FC00000, 0x7E00, 0x7FC0); values at or beyond max_finite + ulp(max_finite)/2 give +-inf.
std::uint64_t round_to_bits(mpfr_srcptr x, DType t);
std::uint64_t round_to_bits(const boost::multiprecision::mpfr_float& x, DType t);

// The same rounded value as a double. Exact: every value of the four formats is a binary64
// value. +-inf on overflow, a quiet NaN for NaN, signed zero preserved.
double round_to_double(mpfr_srcptr x, DType t);
double round_to_double(const boost::multiprecision::mpfr_float& x, DType t);

// Convenience wrappers around round_to_bits / round_to_double.
double to_f64(const boost::multiprecision::mpfr_float& x);
float to_f32(const boost::multiprecision::mpfr_float& x);
std::uint16_t to_f16_bits(const boost::multiprecision::mpfr_float& x);
std::uint16_t to_bf16_bits(const boost::multiprecision::mpfr_float& x);

// The same for the reference's scalar (expression templates off; see scalar.hpp): no copy.
using RealNoEt = boost::multiprecision::number<boost::multiprecision::mpfr_float_backend<0>,
                                               boost::multiprecision::et_off>;
inline std::uint64_t round_to_bits(const RealNoEt& x, DType t) { return round_to_bits(x.backend().data(), t); }
inline double round_to_double(const RealNoEt& x, DType t) { return round_to_double(x.backend().data(), t); }
inline double to_f64(const RealNoEt& x) { return round_to_double(x.backend().data(), DType::f64); }
inline float to_f32(const RealNoEt& x) {
  return static_cast<float>(round_to_double(x.backend().data(), DType::f32));
}
inline std::uint16_t to_f16_bits(const RealNoEt& x) {
  return static_cast<std::uint16_t>(round_to_bits(x.backend().data(), DType::f16));
}
inline std::uint16_t to_bf16_bits(const RealNoEt& x) {
  return static_cast<std::uint16_t>(round_to_bits(x.backend().data(), DType::bf16));
}

}  // namespace ropecheck
