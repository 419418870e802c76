// The scalar types the reference runs on, and how the MPFR working precision is chosen.
//
// All reference math is templated on the scalar T: double/float for quick checks and tests,
// `Real` (MPFR through Boost.Multiprecision) for the exact oracle. Boost 1.74 keeps one
// process-wide default precision for the variable-precision mpfr_float, so a computation
// sets it with ScopedPrecision before any Real is created, and threads must share one setting.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>

#include <boost/multiprecision/mpfr.hpp>

#include "ropecheck/formulas/scalar_math.hpp"

namespace ropecheck {

using Real = boost::multiprecision::number<boost::multiprecision::mpfr_float_backend<0>,
                                           boost::multiprecision::et_off>;

// Guard bits on top of target precision + log2(largest angle). MPFR rounds every
// operation correctly, so the few operations before sin/cos lose a handful of bits;
// 64 guard bits make a wrong final rounding require a value within 2^-64 relative of a
// rounding boundary (golden generation proves its roundings separately).
inline constexpr unsigned kGuardBits = 64;
inline constexpr unsigned kMinWorkingBits = 128;

// Working precision for results correct to `target_bits` when angles reach `max_abs_angle`:
// the angle p * inv_freq must keep target_bits after its integer multiples of 2*pi are removed.
inline unsigned working_precision_bits(unsigned target_bits, double max_abs_angle) {
  const double a = std::fabs(max_abs_angle);
  const unsigned angle_bits = a < 1.0 ? 0u : static_cast<unsigned>(std::ceil(std::log2(a + 1.0)));
  const unsigned bits = target_bits + angle_bits + kGuardBits;
  return bits < kMinWorkingBits ? kMinWorkingBits : bits;
}

// Sets the default precision (in bits) of Real for the current scope.
class ScopedPrecision {
 public:
  explicit ScopedPrecision(unsigned bits) : saved_(Real::default_precision()) {
    // Boost counts decimal digits; 0.30103 digits per bit, rounded up, never fewer bits.
    Real::default_precision(static_cast<unsigned>(std::ceil(bits * 0.30103)) + 1);
  }
  ~ScopedPrecision() { Real::default_precision(saved_); }
  ScopedPrecision(const ScopedPrecision&) = delete;
  ScopedPrecision& operator=(const ScopedPrecision&) = delete;

 private:
  unsigned saved_;
};

// Bits actually carried by Real values created now.
inline unsigned current_precision_bits() {
  return static_cast<unsigned>(mpfr_get_prec(Real(0).backend().data()));
}

}  // namespace ropecheck
