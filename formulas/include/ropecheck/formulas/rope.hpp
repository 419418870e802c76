// Exact RoPE mathematics, templated on the scalar type.
//
// With T = Real (MPFR) at the precision chosen by working_precision_bits this is the oracle:
// every variant computed as its mathematics says (variants.md sections 0-1, 3.5), never
// emulating float32 rounding (that belongs to the kernels' precision recipes). Constants
// written as decimals in framework code (0.1 in get_mscale, 0.001 in YaRN) are the exact
// rationals 1/10 and 1/1000 here.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "ropecheck/formulas/scalar_math.hpp"
#include "ropecheck/core/spec.hpp"

namespace ropecheck {

template <class T>
struct RopeFrequencies {
  std::vector<T> inv_freq;  // per pair j, after scaling
  T attention_factor = T(1);
  bool long_factors = false;  // longrope: the long list was selected
};

template <class T>
struct YarnRange {
  T low, high;  // after truncation and clamping; ramp runs from low to high
};

namespace detail {
template <class T>
T base_power(double base, int numerator, int denominator) {
  using std::pow;
  // base^(-numerator/denominator)
  return pow(T(base), -T(numerator) / T(denominator));
}
}  // namespace detail

// HF get_mscale(s, m) = 0.1 * m * ln(s) + 1 for s > 1, else 1.
template <class T>
T yarn_get_mscale(const T& scale, const T& m) {
  using std::log;
  if (scale <= T(1)) return T(1);
  return m * log(scale) / T(10) + T(1);
}

template <class T>
YarnRange<T> yarn_correction_range(const RopeSpec& r) {
  using std::ceil;
  using std::floor;
  using std::log;
  const RopeScaling& s = r.scaling;
  const T dim = T(r.rotary_dim);
  const T L = from_int<T>(effective_original_max_positions(r));
  const T two_pi = 2 * pi_value<T>();
  const T ln_base = log(T(r.base));
  auto corr_dim = [&](double rotations) { return dim * log(L / (T(rotations) * two_pi)) / (2 * ln_base); };
  T low = corr_dim(s.beta_fast);
  T high = corr_dim(s.beta_slow);
  if (s.truncate) {
    low = floor(low);
    high = ceil(high);
  }
  if (low < T(0)) low = T(0);
  if (high > dim - 1) high = dim - 1;  // transformers clamps with dim - 1, not dim/2 - 1
  if (low == high) high += T(1) / T(1000);
  return {low, high};
}

template <class T>
T yarn_attention_factor(const RopeSpec& r) {
  const RopeScaling& s = r.scaling;
  if (s.attention_factor) return T(*s.attention_factor);
  const T f = T(effective_factor(r));
  // Python truthiness: both present and non-zero.
  if (s.mscale && s.mscale_all_dim && *s.mscale != 0 && *s.mscale_all_dim != 0)
    return yarn_get_mscale(f, T(*s.mscale)) / yarn_get_mscale(f, T(*s.mscale_all_dim));
  return yarn_get_mscale(f, T(1));
}

// `long_factors`: the long list is in use (a sequence length above L_orig). short_mscale /
// long_mscale (PhiMoE) go with the list they are named after, as in HF PhimoeRotaryEmbedding and
// vLLM Phi3LongRoPEScaledRotaryEmbedding; absent, the attention factor is explicit or derived.
template <class T>
T longrope_attention_factor(const RopeSpec& r, bool long_factors = false) {
  using std::log;
  using std::sqrt;
  const RopeScaling& s = r.scaling;
  if (const std::optional<double>& m = long_factors ? s.long_mscale : s.short_mscale) return T(*m);
  if (s.attention_factor) return T(*s.attention_factor);
  const T f = T(effective_factor(r));
  if (f <= T(1)) return T(1);
  return sqrt(T(1) + log(f) / log(from_int<T>(effective_original_max_positions(r))));
}

// llama3 band of a default inverse frequency: 0 kept, 1 smoothed, 2 divided by factor.
template <class T>
int llama3_band(const RopeSpec& r, const T& inv) {
  const RopeScaling& s = r.scaling;
  const T L = from_int<T>(*s.original_max_position_embeddings);
  const T wavelen = 2 * pi_value<T>() / inv;
  const T low_wl = L / T(s.low_freq_factor);
  const T high_wl = L / T(s.high_freq_factor);
  if (wavelen < high_wl) return 0;
  if (wavelen > low_wl) return 2;
  return 1;  // high_wl <= wavelen <= low_wl: both ends inclusive
}

// Inverse frequencies and attention factor of a RoPE spec. `seq_len` is the sequence length
// seen at run time (dynamic NTK, longrope's short/long switch); nullopt = none given.
template <class T>
RopeFrequencies<T> rope_frequencies(const RopeSpec& r, std::optional<std::int64_t> seq_len = std::nullopt) {
  using std::log;
  using std::pow;
  const RopeScaling& s = r.scaling;
  const int P = rope_pairs(r);
  const int R = r.rotary_dim;
  RopeFrequencies<T> out;
  out.inv_freq.reserve(static_cast<std::size_t>(P));
  auto default_inv = [&](int j) { return detail::base_power<T>(r.base, 2 * j, R); };

  switch (s.type) {
    case ScalingType::none:
      for (int j = 0; j < P; ++j) out.inv_freq.push_back(default_inv(j));
      break;
    case ScalingType::linear: {
      const T f = T(*s.factor);
      for (int j = 0; j < P; ++j) out.inv_freq.push_back(default_inv(j) / f);
      break;
    }
    case ScalingType::dynamic: {
      const T L = from_int<T>(r.max_position_embeddings);
      const T seq = from_int<T>(std::max<std::int64_t>(seq_len.value_or(0), r.max_position_embeddings));
      const T f = T(*s.factor);
      const T new_base = T(r.base) * pow(f * seq / L - (f - 1), T(R) / T(R - 2));
      for (int j = 0; j < P; ++j) out.inv_freq.push_back(pow(new_base, -T(2 * j) / T(R)));
      break;
    }
    case ScalingType::yarn: {
      const T f = T(effective_factor(r));
      const YarnRange<T> range = yarn_correction_range<T>(r);
      for (int j = 0; j < P; ++j) {
        T ramp = (T(j) - range.low) / (range.high - range.low);
        ramp = ramp < T(0) ? T(0) : (ramp > T(1) ? T(1) : ramp);
        const T inv = default_inv(j);
        // ramp 0: original frequency (extrapolation); ramp 1: frequency / factor (interpolation).
        out.inv_freq.push_back(inv / f * ramp + inv * (T(1) - ramp));
      }
      out.attention_factor = yarn_attention_factor<T>(r);
      break;
    }
    case ScalingType::llama3: {
      const T f = T(*s.factor);
      const T L = from_int<T>(*s.original_max_position_embeddings);
      for (int j = 0; j < P; ++j) {
        const T inv = default_inv(j);
        const int band = llama3_band(r, inv);
        if (band == 0) {
          out.inv_freq.push_back(inv);
        } else if (band == 2 || s.high_freq_factor == s.low_freq_factor) {
          out.inv_freq.push_back(inv / f);
        } else {
          const T wavelen = 2 * pi_value<T>() / inv;
          const T smooth = (L / wavelen - T(s.low_freq_factor)) / (T(s.high_freq_factor) - T(s.low_freq_factor));
          out.inv_freq.push_back((T(1) - smooth) * inv / f + smooth * inv);
        }
      }
      break;
    }
    case ScalingType::longrope: {
      out.long_factors = seq_len && *seq_len > effective_original_max_positions(r);
      const std::vector<double>& ext = out.long_factors ? s.long_factor : s.short_factor;
      for (int j = 0; j < P; ++j)
        out.inv_freq.push_back(T(1) / (T(ext[static_cast<std::size_t>(j)]) * pow(T(r.base), T(2 * j) / T(R))));
      out.attention_factor = longrope_attention_factor<T>(r, out.long_factors);
      break;
    }
    case ScalingType::proportional: {
      // Exponent denominator is the full head_dim; pairs past rotary_dim/2 do not rotate.
      const T f = T(s.factor.value_or(1.0));
      for (int j = 0; j < P; ++j)
        out.inv_freq.push_back(j < R / 2 ? detail::base_power<T>(r.base, 2 * j, r.head_dim) / f : T(0));
      break;
    }
  }
  return out;
}

// Counts of pairs kept / smoothed / divided by llama3 scaling.
template <class T>
std::array<int, 3> llama3_band_counts(const RopeSpec& r) {
  std::array<int, 3> counts{0, 0, 0};
  for (int j = 0; j < rope_pairs(r); ++j)
    ++counts[static_cast<std::size_t>(llama3_band(r, detail::base_power<T>(r.base, 2 * j, r.rotary_dim)))];
  return counts;
}

// Angle of pair j at a position (the stream multimodal RoPE assigns to j).
template <class T>
T rope_angle(const RopeSpec& r, const RopeFrequencies<T>& f, const Position& pos, int j) {
  const int stream = mrope_stream(r, j);
  const std::int64_t p = stream == 0 ? pos.t : (stream == 1 ? pos.h : pos.w);
  return from_int<T>(p) * f.inv_freq[static_cast<std::size_t>(j)];
}

// Plain cos and sin of every pair's angle (no attention factor).
template <class T>
void rope_cos_sin(const RopeSpec& r, const RopeFrequencies<T>& f, const Position& pos, std::vector<T>& cos_out,
                  std::vector<T>& sin_out) {
  using std::cos;
  using std::sin;
  const int P = rope_pairs(r);
  cos_out.resize(static_cast<std::size_t>(P));
  sin_out.resize(static_cast<std::size_t>(P));
  for (int j = 0; j < P; ++j) {
    const T a = rope_angle(r, f, pos, j);
    cos_out[static_cast<std::size_t>(j)] = cos(a);
    sin_out[static_cast<std::size_t>(j)] = sin(a);
  }
}

// Rotates one head vector x (head_dim values): pair (a, b) -> att * (a cos - b sin, b cos + a sin);
// pass-through channels are copied unscaled (as Hugging Face concatenates x[R:] back).
template <class T>
std::vector<T> rope_apply(const RopeSpec& r, const RopeFrequencies<T>& f, const Position& pos, std::span<const T> x) {
  std::vector<T> c, s;
  rope_cos_sin(r, f, pos, c, s);
  std::vector<T> out(x.begin(), x.end());
  for (int j = 0; j < rope_pairs(r); ++j) {
    const auto [ia, ib] = pair_channels(r, j);
    const T& a = x[static_cast<std::size_t>(ia)];
    const T& b = x[static_cast<std::size_t>(ib)];
    const T& cj = c[static_cast<std::size_t>(j)];
    const T& sj = s[static_cast<std::size_t>(j)];
    out[static_cast<std::size_t>(ia)] = f.attention_factor * (a * cj - b * sj);
    out[static_cast<std::size_t>(ib)] = f.attention_factor * (b * cj + a * sj);
  }
  return out;
}

// Largest |angle| over positions with |p| <= max_abs_position (for choosing the precision).
inline double rope_max_abs_angle(const RopeSpec& r, std::optional<std::int64_t> seq_len, std::int64_t max_abs_position) {
  const RopeFrequencies<double> f = rope_frequencies<double>(r, seq_len);
  double m = 0;
  for (double v : f.inv_freq) m = std::max(m, std::fabs(v));
  return m * 1.0001 * static_cast<double>(max_abs_position < 0 ? -max_abs_position : max_abs_position);
}

}  // namespace ropecheck
