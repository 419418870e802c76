// The hf-fp32 scalar recipe (scalar_recipes.hpp). Every step is written as the framework does it
// and every float operation rounds to binary32 (compiled with -ffp-contract=off: no FMA).
#include "ropecheck/kernels/scalar_recipes.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <stdexcept>
#include <string>

#include "ropecheck/formulas/rope.hpp"
#include "ropecheck/formulas/sinusoidal.hpp"

namespace ropecheck::kernels {

namespace {

std::uint32_t float_bits(float f) {
  std::uint32_t u = 0;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
float bits_float(std::uint32_t u) {
  float f = 0;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

std::size_t idx(std::int64_t v) { return static_cast<std::size_t>(v); }

void require(bool ok, const char* what) {
  if (!ok) throw std::invalid_argument(std::string("ropecheck::kernels: ") + what);
}

}  // namespace

// ---- storage formats ------------------------------------------------------------------------------

std::uint16_t f32_to_bf16_bits(float v) {
  std::uint32_t u = float_bits(v);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  u += 0x7FFFu + ((u >> 16) & 1u);  // PyTorch c10::round_to_nearest_even
  return static_cast<std::uint16_t>(u >> 16);
}

float bf16_bits_to_f32(std::uint16_t b) { return bits_float(static_cast<std::uint32_t>(b) << 16); }

std::uint16_t f32_to_f16_bits(float v) {
  const std::uint32_t u = float_bits(v);
  const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t a = u & 0x7FFFFFFFu;
  if (a >= 0x7F800000u) return static_cast<std::uint16_t>(sign | (a > 0x7F800000u ? 0x7E00u : 0x7C00u));
  if (a >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // >= 65520: infinity
  if (a >= 0x38800000u) {                                                   // normal binary16
    const std::uint32_t r = a + 0x0FFFu + ((a >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | ((r - 0x38000000u) >> 13));
  }
  // Below 2^-14: a multiple of 2^-24; |v| * 2^24 is exact in f32, nearbyint rounds to nearest even.
  const float units = std::nearbyint(std::fabs(v) * 16777216.0f);
  return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(units));
}

float f16_bits_to_f32(std::uint16_t b) {
  const std::uint32_t sign = static_cast<std::uint32_t>(b & 0x8000u) << 16;
  const std::uint32_t e = (b >> 10) & 0x1Fu, m = b & 0x3FFu;
  if (e == 0x1F) return bits_float(sign | 0x7F800000u | (m << 13));
  if (e == 0) {  // zero or subnormal: m * 2^-24, exact in f32
    const float mag = static_cast<float>(m) * 0x1p-24f;
    return sign ? -mag : mag;
  }
  return bits_float(sign | ((e + 112u) << 23) | (m << 13));
}

float round_to_dtype(float v, DType t) {
  switch (t) {
    case DType::bf16: return bf16_bits_to_f32(f32_to_bf16_bits(v));
    case DType::f16: return f16_bits_to_f32(f32_to_f16_bits(v));
    case DType::f32:
    case DType::f64: return v;
  }
  return v;
}

// ---- frequencies ------------------------------------------------------------------------------------

float hf_exponent(int j, int dim) { return static_cast<float>(2 * j) / static_cast<float>(dim); }

float hf_default_inv_freq(double base, int j, int dim) {
  return 1.0f / std::pow(static_cast<float>(base), hf_exponent(j, dim));
}

RopeFrequenciesF32 hf_rope_frequencies_f32(const RopeSpec& r, std::optional<std::int64_t> seq_len) {
  const RopeScaling& s = r.scaling;
  const int P = rope_pairs(r), R = r.rotary_dim;
  RopeFrequenciesF32 out;
  std::vector<float>& inv = out.inv_freq;
  inv.resize(static_cast<std::size_t>(P));
  switch (s.type) {
    case ScalingType::none:
      for (int j = 0; j < P; ++j) inv[idx(j)] = hf_default_inv_freq(r.base, j, R);
      break;
    case ScalingType::linear: {
      const auto f = static_cast<float>(*s.factor);
      for (int j = 0; j < P; ++j) inv[idx(j)] = hf_default_inv_freq(r.base, j, R) / f;
      break;
    }
    case ScalingType::dynamic: {
      // Python floats (the init path): the new base in double, then the usual f32 power.
      const double L = static_cast<double>(r.max_position_embeddings), f = *s.factor;
      const double seq = static_cast<double>(std::max<std::int64_t>(seq_len.value_or(0), r.max_position_embeddings));
      const double base = r.base * std::pow(f * seq / L - (f - 1), static_cast<double>(R) / (R - 2));
      for (int j = 0; j < P; ++j) inv[idx(j)] = hf_default_inv_freq(base, j, R);
      break;
    }
    case ScalingType::yarn: {
      const auto f = static_cast<float>(effective_factor(r));
      const YarnRange<double> range = yarn_correction_range<double>(r);  // Python floats
      const auto lo = static_cast<float>(range.low);
      const auto span = static_cast<float>(range.high - range.low);
      for (int j = 0; j < P; ++j) {
        const float pos_freq = std::pow(static_cast<float>(r.base), hf_exponent(j, R));
        const float extrap = 1.0f / pos_freq;
        const float interp = 1.0f / (f * pos_freq);
        const float ramp = std::min(1.0f, std::max(0.0f, (static_cast<float>(j) - lo) / span));
        const float extrap_factor = 1.0f - ramp;
        inv[idx(j)] = interp * (1.0f - extrap_factor) + extrap * extrap_factor;
      }
      out.attention_factor = static_cast<float>(yarn_attention_factor<double>(r));
      break;
    }
    case ScalingType::llama3: {
      const auto f = static_cast<float>(*s.factor);
      const auto L = static_cast<double>(*s.original_max_position_embeddings);
      const auto low_wl = static_cast<float>(L / s.low_freq_factor);
      const auto high_wl = static_cast<float>(L / s.high_freq_factor);
      const auto two_pi = static_cast<float>(2 * std::numbers::pi);
      for (int j = 0; j < P; ++j) {
        const float base_inv = hf_default_inv_freq(r.base, j, R);
        const float wavelen = two_pi / base_inv;
        const float llama = wavelen > low_wl ? base_inv / f : base_inv;
        const float smooth = (static_cast<float>(L) / wavelen - static_cast<float>(s.low_freq_factor)) /
                             static_cast<float>(s.high_freq_factor - s.low_freq_factor);
        const float smoothed = (1.0f - smooth) * llama / f + smooth * llama;
        const bool medium = !(wavelen < high_wl) && !(wavelen > low_wl);  // both edges inclusive
        inv[idx(j)] = medium ? smoothed : llama;
      }
      break;
    }
    case ScalingType::longrope: {
      out.long_factors = seq_len && *seq_len > effective_original_max_positions(r);
      const std::vector<double>& ext = out.long_factors ? s.long_factor : s.short_factor;
      for (int j = 0; j < P; ++j)
        inv[idx(j)] = 1.0f / (static_cast<float>(ext[idx(j)]) * std::pow(static_cast<float>(r.base), hf_exponent(j, R)));
      out.attention_factor = static_cast<float>(longrope_attention_factor<double>(r, out.long_factors));
      break;
    }
    case ScalingType::proportional: {
      const auto f = static_cast<float>(s.factor.value_or(1.0));
      for (int j = 0; j < P; ++j) inv[idx(j)] = j < R / 2 ? hf_default_inv_freq(r.base, j, r.head_dim) / f : 0.0f;
      break;
    }
  }
  return out;
}

std::vector<float> hf_sinusoidal_frequencies_f32(const SinusoidalSpec& s) {
  const int n = sinusoidal_frequency_count(s);
  const bool vaswani = s.frequencies == SinusoidalFrequencies::vaswani;
  const int denom = vaswani ? s.d_model : std::max(s.d_model / 2 - 1, 1);
  // div_term = exp(arange(0, d, 2) * -(math.log(base) / d))  /  exp(arange(half) * -(log(base) / (half - 1)))
  const auto scale = static_cast<float>(-std::log(s.base) / denom);
  std::vector<float> w(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) w[idx(i)] = std::exp(static_cast<float>(vaswani ? 2 * i : i) * scale);
  return w;
}

// ---- kernels -----------------------------------------------------------------------------------------

void hf_fp32_rope_apply(const RopeSpec& r, const RopeFrequenciesF32& freq, std::span<const Position> positions,
                        int heads, std::span<const float> x, std::span<float> out, DType out_dtype) {
  const int P = rope_pairs(r), D = r.head_dim;
  const std::size_t T = positions.size();
  require(out_dtype != DType::f64, "a float32 kernel has no f64 output");
  require(heads >= 0 && freq.inv_freq.size() == idx(P), "frequencies do not match the spec");
  const std::size_t row_len = idx(D), rows = T * idx(heads);
  require(x.size() == rows * row_len && out.size() == x.size(), "x / out size is not tokens * heads * head_dim");
  const float att = freq.attention_factor;
  std::vector<float> c(idx(P)), s(idx(P));
  std::vector<float> row(row_len);
  for (std::size_t t = 0; t < T; ++t) {
    for (int j = 0; j < P; ++j) {
      const float theta = static_cast<float>(stream_position(r, positions[t], j)) * freq.inv_freq[idx(j)];
      c[idx(j)] = std::cos(theta) * att;  // emb.cos() * attention_scaling (a product by 1 is exact)
      s[idx(j)] = std::sin(theta) * att;
    }
    for (std::size_t h = 0; h < idx(heads); ++h) {
      const std::size_t base = (t * idx(heads) + h) * row_len;
      std::copy_n(x.begin() + static_cast<std::ptrdiff_t>(base), row_len, row.begin());  // out may alias x
      for (int ch = 0; ch < D; ++ch)  // pass-through channels: past the block, or around an MLA slice
        if (!is_rotary_channel(r, ch)) out[base + idx(ch)] = round_to_dtype(row[idx(ch)], out_dtype);
      for (int j = 0; j < P; ++j) {
        const auto [ca, cb] = pair_channels(r, j);
        const std::size_t ia = idx(ca), ib = idx(cb);
        const float a = row[ia], b = row[ib], cj = c[idx(j)], sj = s[idx(j)];
        const float ac = a * cj, nbs = -b * sj, bc = b * cj, as = a * sj;  // q * cos + rotate_half(q) * sin
        out[base + ia] = round_to_dtype(ac + nbs, out_dtype);
        out[base + ib] = round_to_dtype(bc + as, out_dtype);
      }
    }
  }
}

void hf_fp32_rope_cos_sin(const RopeSpec& r, const RopeFrequenciesF32& freq, std::span<const Position> positions,
                          std::span<float> cos_out, std::span<float> sin_out, DType out_dtype) {
  const int P = rope_pairs(r);
  require(out_dtype != DType::f64, "a float32 kernel has no f64 output");
  require(freq.inv_freq.size() == idx(P), "frequencies do not match the spec");
  require(cos_out.size() == positions.size() * idx(P) && sin_out.size() == cos_out.size(),
          "cos / sin size is not tokens * pairs");
  for (std::size_t t = 0; t < positions.size(); ++t)
    for (int j = 0; j < P; ++j) {
      const float theta = static_cast<float>(stream_position(r, positions[t], j)) * freq.inv_freq[idx(j)];
      cos_out[t * idx(P) + idx(j)] = round_to_dtype(std::cos(theta), out_dtype);
      sin_out[t * idx(P) + idx(j)] = round_to_dtype(std::sin(theta), out_dtype);
    }
}

void hf_fp32_sinusoidal(const SinusoidalSpec& s, std::span<const float> w, std::span<const std::int64_t> positions,
                        std::span<float> out, DType out_dtype) {
  require(out_dtype != DType::f64, "a float32 kernel has no f64 output");
  require(w.size() == idx(sinusoidal_frequency_count(s)), "frequencies do not match the spec");
  const std::size_t d = idx(s.d_model);
  require(out.size() == positions.size() * d, "out size is not tokens * d_model");
  for (std::size_t t = 0; t < positions.size(); ++t) {
    const auto p = static_cast<float>(positions[t] + s.position_offset);
    for (std::size_t col = 0; col < d; ++col) {
      const SinusoidalColumn c = sinusoidal_column(s, static_cast<int>(col));
      float v = 0.0f;
      if (c.kind != SinusoidalKind::zero) {
        const float theta = p * w[idx(c.frequency)];
        v = c.kind == SinusoidalKind::sine ? std::sin(theta) : std::cos(theta);
      }
      out[t * d + col] = round_to_dtype(v, out_dtype);
    }
  }
}

}  // namespace ropecheck::kernels
