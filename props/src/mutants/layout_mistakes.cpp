// Layout mistakes, in copies of the hf-fp32 apply loops that run every step with the bug's knob:
// interleaved pairs on a half-split spec, partial rotary on the wrong channels, k read from the next head.
#include "mutation.hpp"

#include <algorithm>
#include <tuple>

#include "ropecheck/formulas/sinusoidal.hpp"

namespace ropecheck::props::mutation {

// The hf-fp32 apply loop with the bug's knob turned (Bug-free paths equal kernels::hf_fp32_rope_apply).
void mutant_rope_apply(Bug bug, std::string_view input, const RopeSpec& r, std::span<const Position> positions,
                       int heads, std::span<const float> x, std::span<float> out, DType dt) {
  const k::RopeFrequenciesF32 freq = mutant_frequencies(bug, r);
  const int P = rope_pairs(r), D = r.head_dim;
  const std::size_t row_len = idx(D);
  const bool interleaved = (r.layout == RopeLayout::interleaved) != (bug == Bug::wrong_pairing);
  const std::size_t offset = bug == Bug::partial_wrong_channels ? idx(D - 2 * P) : 0;  // last 2P channels
  std::vector<float> c(idx(P)), s(idx(P)), row(row_len);
  const std::int64_t slip = mutant_position_slip(bug, input);
  for (std::size_t t = 0; t < positions.size(); ++t) {
    for (int j = 0; j < P; ++j) {
      const float theta =
          mutant_position(bug, mutant_stream_position(bug, r, positions[t], j) + slip) * freq.inv_freq[idx(j)];
      std::tie(c[idx(j)], s[idx(j)]) = mutant_table(bug, theta, freq.attention_factor);
    }
    for (std::size_t h = 0; h < idx(heads); ++h) {
      const std::size_t base = (t * idx(heads) + h) * row_len;
      // k_head_offset: the k path reads head h + 1's row (its head offset off by one head, wrapping
      // inside the token); writes go to the right row.
      const std::size_t src_h = bug == Bug::k_head_offset && input == "k" ? (h + 1) % idx(heads) : h;
      const std::size_t src = (t * idx(heads) + src_h) * row_len;
      std::copy_n(x.begin() + static_cast<std::ptrdiff_t>(src), row_len, row.begin());
      for (std::size_t ch = 0; ch < row_len; ++ch) out[base + ch] = mutant_store(bug, row[ch], dt);
      for (int j = 0; j < P; ++j) {
        const std::size_t ia = offset + (interleaved ? 2 * idx(j) : idx(j));
        const std::size_t ib = offset + (interleaved ? 2 * idx(j) + 1 : idx(j) + idx(P));
        const float a = row[ia], b = row[ib], cj = c[idx(j)], sj = s[idx(j)];
        const float ac = a * cj, nbs = -b * sj, bc = b * cj, as = a * sj;
        out[base + ia] = mutant_store(bug, ac + nbs, dt);
        out[base + ib] = mutant_store(bug, bc + as, dt);
      }
    }
  }
}

void mutant_sinusoidal(Bug bug, const SinusoidalSpec& spec, std::span<const std::int64_t> positions,
                       std::span<float> out, DType dt) {
  SinusoidalSpec s = spec;
  if (bug == Bug::wrong_base) s.base = spec.base == 10000.0 ? 500000.0 : 10000.0;
  std::vector<float> w = k::hf_sinusoidal_frequencies_f32(s);
  if (bug == Bug::bf16_inv_freq)
    for (float& v : w) v = k::round_to_dtype(v, DType::bf16);
  const std::size_t d = idx(s.d_model);
  for (std::size_t t = 0; t < positions.size(); ++t) {
    const float p = mutant_position(bug, positions[t] + s.position_offset);
    for (std::size_t col = 0; col < d; ++col) {
      const SinusoidalColumn c = sinusoidal_column(s, static_cast<int>(col));
      float v = 0.0f;
      if (c.kind != SinusoidalKind::zero) {
        const auto [cv, sv] = mutant_table(bug, p * w[idx(c.frequency)], 1.0f);
        v = c.kind == SinusoidalKind::sine ? sv : cv;
      }
      out[t * d + col] = mutant_store(bug, v, dt);
    }
  }
}

}  // namespace ropecheck::props::mutation
