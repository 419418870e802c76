// The one description of a position encoding that flows through the whole suite.
//
// An EncodingSpec is either a rotary encoding (RoPE, any scaling, either layout,
// partial or multimodal) or a sinusoidal absolute encoding. It holds parameters
// only; the mathematics lives in formulas/rope.hpp / formulas/sinusoidal.hpp.
// Numbers are binary64 values (the value nearest the JSON decimal); the reference
// treats them as exact.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ropecheck/core/input_error.hpp"

namespace ropecheck {

// Thrown for any invalid or incomplete spec; the message names the key and value. An InputError
// (Python: ropecheck.SpecError, a subclass of ropecheck.InputError).
class SpecError : public InputError {
 public:
  using InputError::InputError;
};

enum class Family { rope, sinusoidal };

// Which channels form frequency pair j (variants.md section 0).
enum class RopeLayout {
  half_split,   // "NeoX": (j, j + P)
  interleaved,  // "GPT-J": (2j, 2j + 1)
};

enum class ScalingType { none, linear, dynamic, yarn, llama3, longrope, proportional };

// Multimodal RoPE: which of the three position streams (t, h, w) drives pair j.
enum class MropeMode {
  none,         // one position stream
  chunked,      // Qwen2-VL / Qwen2.5-VL: contiguous sections [t | h | w]
  interleaved,  // Qwen3-VL: t h w t h w ... within the sections
};

// The key the rotation takes (SPEC_FORMAT.md, "MLA").
enum class KeyLayout {
  per_head,  // k has q's shape: [heads, head_dim]
  k_pe,      // DeepSeek MLA: one rotary_dim-wide key per token (k_pe), no head axis, shared by every head
};

enum class SinusoidalLayout {
  interleaved,   // Vaswani: PE[2i] = sin, PE[2i+1] = cos
  concatenated,  // [sin | cos] (tensor2tensor, fairseq, Marian, GPT-NeoX)
};

enum class SinusoidalFrequencies {
  vaswani,             // w_i = base^(-2i/d)
  half_dim_minus_one,  // tensor2tensor / fairseq: w_i = base^(-i/max(d/2 - 1, 1))
};

struct RopeScaling {
  ScalingType type = ScalingType::none;
  // linear/dynamic/llama3: required. yarn/longrope: derived as
  // max_position_embeddings / original_max_position_embeddings when absent.
  // proportional: 1 when absent.
  std::optional<double> factor;
  // yarn, longrope, llama3. Defaults to max_position_embeddings for yarn/longrope.
  std::optional<std::int64_t> original_max_position_embeddings;
  // yarn, longrope: explicit value wins over the derived one.
  std::optional<double> attention_factor;
  // yarn
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  std::optional<double> mscale;
  std::optional<double> mscale_all_dim;
  bool truncate = true;
  // llama3
  double low_freq_factor = 0.0;
  double high_freq_factor = 0.0;
  // longrope (one entry per frequency pair)
  std::vector<double> short_factor;
  std::vector<double> long_factor;
  // longrope (Phi-3.5-MoE): the attention factor that goes with the short / long factors, chosen by
  // the sequence length as the factor lists are; wins over attention_factor and the derived value.
  std::optional<double> short_mscale;
  std::optional<double> long_mscale;
};

// The Q/K RMSNorm stage applied to each head before the rotation (Qwen3 q_norm / k_norm, Gemma 3):
// y_i = x_i / sqrt(mean_h(x^2) + eps) * w'_i over each head's head_dim channels, the mean over head_dim,
// w' one weight per channel shared by all heads. transformers' Qwen3RMSNorm multiplies by w,
// Gemma3RMSNorm by (1 + w) (its weights are stored zero-centred): weight_form says which.
enum class NormWeightForm {
  w,           // Qwen3, Llama-style RMSNorm
  one_plus_w,  // Gemma 3
};

struct RmsNormStage {
  double eps = 1e-6;  // > 0
  NormWeightForm weight_form = NormWeightForm::w;
  // head_dim stored weights w (before the form is applied), each exactly a bf16 value; empty: the weights
  // are golden inputs, generated from the seed (golden/GOLDEN_FORMAT.md) and filled in before any use.
  std::vector<double> weight;
};

struct RopeSpec {
  int head_dim = 0;
  // Channels rotated. Prefix-partial for every type except proportional, where it
  // is 2 * rope_angles spread over both halves of the head (variants.md 1.7).
  int rotary_dim = 0;
  double base = 10000.0;
  RopeLayout layout = RopeLayout::half_split;
  std::int64_t max_position_embeddings = 0;  // 0 = unknown
  RopeScaling scaling;
  MropeMode mrope = MropeMode::none;
  std::array<int, 3> mrope_section{0, 0, 0};
  // Absent: no norm (every spec before the stage existed). Present for q, for k, or both.
  std::optional<RmsNormStage> q_norm, k_norm;
  // First rotated channel: the rotary block is channels [rotary_offset, rotary_offset + rotary_dim);
  // the rest of the head passes through (DeepSeek MLA: q = [q_nope (128) | q_pe (64)], offset 128).
  int rotary_offset = 0;
  KeyLayout key_layout = KeyLayout::per_head;
};

struct SinusoidalSpec {
  int d_model = 0;
  double base = 10000.0;
  SinusoidalLayout layout = SinusoidalLayout::interleaved;
  SinusoidalFrequencies frequencies = SinusoidalFrequencies::vaswani;
  // Added to every position before the angle is taken (fairseq: padding_idx + 1).
  std::int64_t position_offset = 0;
};

struct EncodingSpec {
  std::string name;
  Family family = Family::rope;
  RopeSpec rope;            // valid when family == rope
  SinusoidalSpec sinusoidal;  // valid when family == sinusoidal
  std::string source;       // where the numbers come from
  std::string notes;        // caveats, unconfirmed numbers
};

// Positions are integers with |p| <= kMaxPosition: exact in binary64 and far past
// f32's 2^24. The reference is exact for all of them (precision grows with |p|).
inline constexpr std::int64_t kMaxPosition = std::int64_t{1} << 53;

// One token's position: three streams for multimodal RoPE, all equal otherwise.
struct Position {
  std::int64_t t = 0, h = 0, w = 0;
  static constexpr Position uniform(std::int64_t p) { return {p, p, p}; }
  friend bool operator==(const Position&, const Position&) = default;
};

// Throws SpecError naming the offending key and value.
void validate(const EncodingSpec& spec);

// Number of frequency pairs the rotation acts on. Proportional RoPE acts on all
// head_dim / 2 pairs (the unrotated ones have frequency zero).
int rope_pairs(const RopeSpec& rope);
// Channels covered by the rotation block (the rest pass through unchanged).
int rope_block_channels(const RopeSpec& rope);
// Effective scaling factor after the defaults/derivations described above.
double effective_factor(const RopeSpec& rope);
// Effective original_max_position_embeddings (yarn/longrope/llama3).
std::int64_t effective_original_max_positions(const RopeSpec& rope);

// Which position stream (0 = t, 1 = h, 2 = w) drives frequency pair j.
int mrope_stream(const RopeSpec& rope, int pair);
// The position that drives pair j: the token's t, h or w stream (t for plain RoPE).
inline std::int64_t stream_position(const RopeSpec& rope, const Position& p, int pair) {
  const int stream = rope.mrope == MropeMode::none ? 0 : mrope_stream(rope, pair);
  return stream == 0 ? p.t : (stream == 1 ? p.h : p.w);
}
// The channels pair j rotates: (j, j + P) half-split or (2j, 2j + 1) interleaved, where P = rope_pairs(),
// shifted by rotary_offset; channels outside [rotary_offset, rotary_offset + rope_block_channels()) pass
// through.
inline std::pair<int, int> pair_channels(const RopeSpec& rope, int j) {
  const int o = rope.rotary_offset;
  if (rope.layout == RopeLayout::interleaved) return {o + 2 * j, o + 2 * j + 1};
  return {o + j, o + j + rope_pairs(rope)};
}
// Whether channel c of a head lies in the rotary block (the others pass through).
inline bool is_rotary_channel(const RopeSpec& rope, int c) {
  return c >= rope.rotary_offset && c < rope.rotary_offset + rope_block_channels(rope);
}
// The rotation the key takes: the spec itself, or for a k_pe key (no head axis) the rotary block alone,
// a head of rotary_dim channels at offset 0 with the same frequencies.
RopeSpec key_rope(const RopeSpec& rope);
// The MLA layout (a rotary slice at an offset, or a k_pe key) that only some consumers handle yet.
inline bool is_mla_layout(const RopeSpec& rope) {
  return rope.rotary_offset != 0 || rope.key_layout != KeyLayout::per_head;
}

// The norm stage of input "q" or "k" (nullptr when that input has none).
const RmsNormStage* norm_stage(const RopeSpec& rope, std::string_view input);
inline bool has_qk_norm(const RopeSpec& rope) { return rope.q_norm.has_value() || rope.k_norm.has_value(); }
// The factor channel c is multiplied by: w[c] or 1 + w[c] (exact in binary64: validate() requires it
// to carry at most kNormFactorBits significant bits, so its product with an f32 input is exact).
double norm_weight_factor(const RmsNormStage& norm, int channel);
inline constexpr int kNormFactorBits = 29;

// Number of frequencies of a sinusoidal spec and of sin / cos columns.
int sinusoidal_frequency_count(const SinusoidalSpec& s);

std::string_view to_string(Family);
std::string_view to_string(RopeLayout);
std::string_view to_string(ScalingType);
std::string_view to_string(MropeMode);
std::string_view to_string(KeyLayout);
std::string_view to_string(SinusoidalLayout);
std::string_view to_string(SinusoidalFrequencies);
std::string_view to_string(NormWeightForm);

}  // namespace ropecheck
