// Frequency mistakes: a wrong base, inverse frequencies rounded to bf16, YaRN's ramp reversed,
// llama3's band edges exclusive, dynamic NTK applied statically, LongRoPE's long factors too early,
// the attention factor applied twice or never.
#include "mutation.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "ropecheck/formulas/rope.hpp"

namespace ropecheck::props::mutation {

namespace {

k::RopeFrequenciesF32 yarn_ramp_reversed_frequencies(const RopeSpec& r) {
  k::RopeFrequenciesF32 out = k::hf_rope_frequencies_f32(r);
  const int P = rope_pairs(r), R = r.rotary_dim;
  const auto f = static_cast<float>(effective_factor(r));
  const YarnRange<double> range = yarn_correction_range<double>(r);
  const auto lo = static_cast<float>(range.low), span = static_cast<float>(range.high - range.low);
  for (int j = 0; j < P; ++j) {
    const float pos_freq = std::pow(static_cast<float>(r.base), k::hf_exponent(j, R));
    const float extrap = 1.0f / pos_freq, interp = 1.0f / (f * pos_freq);
    const float ramp = std::min(1.0f, std::max(0.0f, (static_cast<float>(j) - lo) / span));
    const float extrap_factor = ramp;  // BUG: should be 1 - ramp (high-frequency pairs interpolated)
    out.inv_freq[idx(j)] = interp * (1.0f - extrap_factor) + extrap * extrap_factor;
  }
  return out;
}

k::RopeFrequenciesF32 llama3_exclusive_frequencies(const RopeSpec& r) {
  k::RopeFrequenciesF32 out = k::hf_rope_frequencies_f32(r);
  const RopeScaling& s = r.scaling;
  const auto f = static_cast<float>(*s.factor);
  const auto L = static_cast<double>(*s.original_max_position_embeddings);
  const auto low_wl = static_cast<float>(L / s.low_freq_factor), high_wl = static_cast<float>(L / s.high_freq_factor);
  const auto two_pi = static_cast<float>(2 * std::numbers::pi);
  for (int j = 0; j < rope_pairs(r); ++j) {
    const float base_inv = k::hf_default_inv_freq(r.base, j, r.rotary_dim);
    const float wavelen = two_pi / base_inv;
    const float llama = wavelen > low_wl ? base_inv / f : base_inv;
    const float smooth = (static_cast<float>(L) / wavelen - static_cast<float>(s.low_freq_factor)) /
                         static_cast<float>(s.high_freq_factor - s.low_freq_factor);
    const float smoothed = (1.0f - smooth) * llama / f + smooth * llama;
    const bool medium = wavelen > high_wl && wavelen < low_wl;  // BUG: both edges exclusive
    out.inv_freq[idx(j)] = medium ? smoothed : llama;
  }
  return out;
}

}  // namespace

k::RopeFrequenciesF32 mutant_frequencies(Bug bug, const RopeSpec& r) {
  switch (bug) {
    case Bug::wrong_base: {
      RopeSpec w = r;
      w.base = r.base == 10000.0 ? 500000.0 : 10000.0;  // the default rope_theta left in place
      return k::hf_rope_frequencies_f32(w);
    }
    case Bug::bf16_inv_freq: {
      k::RopeFrequenciesF32 f = k::hf_rope_frequencies_f32(r);
      for (float& v : f.inv_freq) v = k::round_to_dtype(v, DType::bf16);
      return f;
    }
    case Bug::yarn_ramp_reversed:
      if (r.scaling.type == ScalingType::yarn) return yarn_ramp_reversed_frequencies(r);
      break;
    case Bug::llama3_exclusive_edges:
      if (r.scaling.type == ScalingType::llama3) return llama3_exclusive_frequencies(r);
      break;
    case Bug::dynamic_static_ntk:
      // The base for the whole extended context (factor * L) used at every length.
      if (r.scaling.type == ScalingType::dynamic)
        return k::hf_rope_frequencies_f32(
            r, static_cast<std::int64_t>(std::llround(*r.scaling.factor * static_cast<double>(r.max_position_embeddings))));
      break;
    case Bug::longrope_long_factors:
      // The long factors used inside the original context (a cache built once for the longest length).
      if (r.scaling.type == ScalingType::longrope) return k::hf_rope_frequencies_f32(r, effective_original_max_positions(r) + 1);
      break;
    case Bug::attention_factor_twice: {
      k::RopeFrequenciesF32 f = k::hf_rope_frequencies_f32(r);
      f.attention_factor = f.attention_factor * f.attention_factor;  // folded into cos / sin, then again
      return f;
    }
    case Bug::attention_factor_dropped: {
      k::RopeFrequenciesF32 f = k::hf_rope_frequencies_f32(r);
      f.attention_factor = 1.0f;  // the scaling's mscale never applied
      return f;
    }
    default:
      break;
  }
  return k::hf_rope_frequencies_f32(r);
}

}  // namespace ropecheck::props::mutation
