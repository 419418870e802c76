// The Q/K RMSNorm stage (core/spec.hpp RmsNormStage, core/SPEC_FORMAT.md "q_norm / k_norm"), templated on
// the scalar: exact in MPFR's Real (the reference's cross-checks), binary64 in double (bounds, tests).
// y_c = x_c * s * f_c, s = 1 / sqrt(mean(x^2) + eps) over the head's head_dim channels.
#pragma once

#include <cmath>
#include <span>

#include "ropecheck/core/spec.hpp"

namespace ropecheck {

// s = 1 / sqrt(mean(x^2) + eps) of one head x (head_dim values).
template <class T>
T rms_norm_scale(std::span<const double> x, double eps) {
  using std::sqrt;
  T sum(0);
  for (double v : x) sum += T(v) * T(v);
  return T(1) / sqrt(sum / T(static_cast<double>(x.size())) + T(eps));
}

// The normalized head: out[c] = x[c] * s * f_c (f_c = w_c or 1 + w_c; weights filled in).
template <class T>
void rms_norm_head(std::span<const double> x, const RmsNormStage& norm, std::span<T> out) {
  const T s = rms_norm_scale<T>(x, norm.eps);
  for (std::size_t c = 0; c < x.size(); ++c)
    out[c] = T(x[c]) * T(norm_weight_factor(norm, static_cast<int>(c))) * s;
}

}  // namespace ropecheck
