// Exact sinusoidal (absolute) position encodings, templated on the scalar type (variants.md section 4).
#pragma once

#include <cmath>
#include <vector>

#include "ropecheck/formulas/scalar_math.hpp"
#include "ropecheck/core/spec.hpp"

namespace ropecheck {

enum class SinusoidalKind { sine, cosine, zero };

struct SinusoidalColumn {
  SinusoidalKind kind;
  int frequency;  // index i into sinusoidal_frequencies (unused for zero)
};

// What column c of PE holds, following the framework that defines each layout (SPEC_FORMAT.md).
inline SinusoidalColumn sinusoidal_column(const SinusoidalSpec& s, int c) {
  const int d = s.d_model;
  if (s.frequencies == SinusoidalFrequencies::half_dim_minus_one) {
    const int n = d / 2;
    if (c >= 2 * n) return {SinusoidalKind::zero, 0};  // tensor2tensor / fairseq pad odd widths
    if (s.layout == SinusoidalLayout::interleaved)
      return {c % 2 == 0 ? SinusoidalKind::sine : SinusoidalKind::cosine, c / 2};
    return c < n ? SinusoidalColumn{SinusoidalKind::sine, c} : SinusoidalColumn{SinusoidalKind::cosine, c - n};
  }
  if (s.layout == SinusoidalLayout::interleaved)  // DistilBERT: odd widths end with a sine
    return {c % 2 == 0 ? SinusoidalKind::sine : SinusoidalKind::cosine, c / 2};
  const int n_sin = (d + 1) / 2;  // Marian: the first ceil(d/2) columns are sines
  return c < n_sin ? SinusoidalColumn{SinusoidalKind::sine, c} : SinusoidalColumn{SinusoidalKind::cosine, c - n_sin};
}

// w_i = base^(-2i/d) (Vaswani) or base^(-i/max(d/2 - 1, 1)) (tensor2tensor, fairseq).
template <class T>
std::vector<T> sinusoidal_frequencies(const SinusoidalSpec& s) {
  using std::pow;
  const int n = sinusoidal_frequency_count(s);
  std::vector<T> w;
  w.reserve(static_cast<std::size_t>(n));
  const int denom = s.frequencies == SinusoidalFrequencies::vaswani ? s.d_model : std::max(s.d_model / 2 - 1, 1);
  const int mult = s.frequencies == SinusoidalFrequencies::vaswani ? 2 : 1;
  for (int i = 0; i < n; ++i) w.push_back(pow(T(s.base), -T(mult * i) / T(denom)));
  return w;
}

// PE(position): d_model values; the angle uses position + position_offset.
template <class T>
std::vector<T> sinusoidal_row(const SinusoidalSpec& s, const std::vector<T>& w, std::int64_t position) {
  using std::cos;
  using std::sin;
  const T p = from_int<T>(position + s.position_offset);
  std::vector<T> row(static_cast<std::size_t>(s.d_model));
  for (int c = 0; c < s.d_model; ++c) {
    const SinusoidalColumn col = sinusoidal_column(s, c);
    T& out = row[static_cast<std::size_t>(c)];
    if (col.kind == SinusoidalKind::zero)
      out = T(0);
    else if (col.kind == SinusoidalKind::sine)
      out = sin(p * w[static_cast<std::size_t>(col.frequency)]);
    else
      out = cos(p * w[static_cast<std::size_t>(col.frequency)]);
  }
  return row;
}

inline double sinusoidal_max_abs_angle(const SinusoidalSpec& s, std::int64_t max_abs_position) {
  const std::int64_t p = (max_abs_position < 0 ? -max_abs_position : max_abs_position) +
                         (s.position_offset < 0 ? -s.position_offset : s.position_offset);
  return 1.0001 * static_cast<double>(p);  // the largest frequency is w_0 = 1
}

}  // namespace ropecheck
