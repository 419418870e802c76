// Exact long-range quantities of RoPE / sinusoidal encodings (precision.md 3.2, 3.3, 3.6).
#pragma once

#include <cmath>
#include <complex>
#include <vector>

#include "ropecheck/formulas/scalar_math.hpp"

namespace ropecheck {

// RoFormer's relative upper bound (Su et al. eq. 37, figure 2):
// (1/(d/2)) * sum_{i=1}^{d/2} |S_i|, S_i = sum_{k=0}^{i-1} exp(i r theta_k), theta_k = base^(-2k/d).
template <class T>
T roformer_relative_upper_bound(int d, double base, std::int64_t r) {
  using std::cos;
  using std::pow;
  using std::sin;
  using std::sqrt;
  const int half = d / 2;
  T re = T(0), im = T(0), total = T(0);
  const T rr = from_int<T>(r);
  for (int k = 0; k < half; ++k) {
    const T angle = rr * pow(T(base), -T(2 * k) / T(d));
    re += cos(angle);
    im += sin(angle);
    total += sqrt(re * re + im * im);  // |S_{k+1}|
  }
  return total / T(half);
}

// B(m) = sum_{i<d/2} cos(m * base^(-2i/d)): "base bounds context length" (Men et al.) and
// the sinusoidal dot product PE(t).PE(t+m) (Vaswani frequencies, even d).
template <class T>
T cosine_sum(int d, double base, std::int64_t m) {
  using std::cos;
  using std::pow;
  T sum = T(0);
  const T mm = from_int<T>(m);
  for (int i = 0; i < d / 2; ++i) sum += cos(mm * pow(T(base), -T(2 * i) / T(d)));
  return sum;
}

}  // namespace ropecheck
