// Scalar helpers of the reference math that work for any scalar type T (double, float, or MPFR's
// Real from scalar.hpp) without including MPFR: the exact formulas (formulas/rope.hpp,
// formulas/sinusoidal.hpp) use only these, so code that runs them in double (the kernels, the
// checker's error model) does not parse Boost.Multiprecision.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ios>
#include <numbers>
#include <string>
#include <type_traits>

namespace ropecheck {

// pi at the precision of T.
template <class T>
T pi_value() {
  if constexpr (std::is_floating_point_v<T>)
    return std::numbers::pi_v<T>;
  else {
    using std::acos;
    return acos(T(-1));
  }
}

// Exact integer -> T (exact for Real at >= 64 bits and for double below 2^53).
template <class T>
T from_int(std::int64_t v) {
  if constexpr (std::is_floating_point_v<T>)
    return static_cast<T>(v);
  else
    return T(static_cast<long long>(v));
}

// Decimal string with `digits` significant digits (scientific notation).
template <class T>
std::string to_decimal(const T& v, int digits) {
  if constexpr (std::is_floating_point_v<T>) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*e", digits - 1, static_cast<double>(v));
    return buf;
  } else {
    return v.str(digits - 1, std::ios_base::scientific);  // Boost counts digits after the point
  }
}

}  // namespace ropecheck
