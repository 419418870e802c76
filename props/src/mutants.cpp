// The built-in targets (mutants.hpp): the correct scalar hf-fp32 kernel and its mutants.
//
// A mutant runs a copy of the hf-fp32 apply loop (kernels/src/scalar_recipes.cpp) with one knob
// turned; with no knob turned the copy is bit-identical to the kernel (checked by
// test_props_mutants). Compiled with -ffp-contract=off like the kernel: every float op rounds.
#include "ropecheck/props/mutants.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <sstream>
#include <numbers>
#include <stdexcept>
#include <utility>

#include "ropecheck/kernels/scalar_recipes.hpp"
#include "ropecheck/props/registry.hpp"
#include "ropecheck/props/suite.hpp"
#include "ropecheck/reference/presets.hpp"
#include "ropecheck/formulas/rope.hpp"
#include "ropecheck/formulas/sinusoidal.hpp"

namespace ropecheck::props {
using namespace ropecheck::accuracy;  // the error model is this module's vocabulary

namespace {

namespace k = ropecheck::kernels;

std::size_t idx(std::int64_t v) { return static_cast<std::size_t>(v); }

// ---- the adaptor from the Target interface (doubles) to the float kernels ------------------------

// x values are bf16-exact (target.hpp), so the conversion to float is exact.
std::vector<float> to_float(std::span<const double> x) {
  std::vector<float> v(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) v[i] = static_cast<float>(x[i]);
  return v;
}
void to_double(const std::vector<float>& v, std::span<double> out) {
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = static_cast<double>(v[i]);
}
bool shapes_ok(const EncodingSpec& spec, std::size_t tokens, int heads, std::size_t x, std::size_t out) {
  if (spec.family != Family::rope || heads < 0) return false;
  const std::size_t n = tokens * idx(heads) * idx(spec.rope.head_dim);
  return x == n && out == n;
}

std::string dtype_suffix(DType out) {
  switch (out) {
    case DType::f16: return "-f16out";
    case DType::bf16: return "-bf16out";
    default: return "";
  }
}

// ---- the bugs ----------------------------------------------------------------------------------------

enum class Bug {
  wrong_pairing,
  off_by_one_position,
  wrong_base,
  bf16_inv_freq,
  f16_table,
  bf16_positions,
  sin_sign_flipped,
  cos_sin_swapped,
  partial_wrong_channels,
  yarn_ramp_reversed,
  llama3_exclusive_edges,
  crude_sincos,
  attention_factor_twice,
  mrope_sections_swapped,
  dynamic_static_ntk,
  longrope_long_factors,
  k_head_offset,
  attention_factor_dropped,
  bf16_truncating_store,
};

// A crude low-accuracy sin / cos of the kind shipped as "fast math" (precision.md 1.2: CUDA's
// __sinf / __cosf are bounded only on [-pi, pi] and "larger otherwise"; a third-party RoPE kernel
// measured 3e-6 at position 40 growing to 1e-2 at 131071). Emulated on the CPU: the argument is
// reduced in f32 with ONE f32 constant for 2 pi (no Cody-Waite tail, so the reduced argument is off
// by about |x| 2^-24 plus k |fl(2 pi) - 2 pi|, growing with |x|), folded to [-pi/2, pi/2], and
// evaluated with short Taylor polynomials (sin degree 7, cos degree 8): exact at 0, absolute error
// 2.8e-6 at 1 radian, up to 1.6e-4 at pi/2. (A faithful model of the hardware __sinf, error 2^-21.4
// on [-pi, pi], stays inside fp32-angle: ERROR_MODEL.md section 4. This one does not.)
float sin_poly7(float a) {
  const float a2 = a * a;
  return a * (1.0f + a2 * (-1.0f / 6.0f + a2 * (1.0f / 120.0f + a2 * (-1.0f / 5040.0f))));
}
float cos_poly8(float a) {
  const float a2 = a * a;
  return 1.0f + a2 * (-0.5f + a2 * (1.0f / 24.0f + a2 * (-1.0f / 720.0f + a2 * (1.0f / 40320.0f))));
}
std::pair<float, float> crude_sincos(float x) {  // {cos, sin}
  constexpr float kInvTwoPi = 0.159154937f;
  constexpr float kTwoPi = 6.28318548f;  // f32(2 pi), the only reduction constant
  constexpr float kPi = 3.14159274f, kHalfPi = 1.57079637f;
  const float kq = std::nearbyint(x * kInvTwoPi);
  float a = x - kq * kTwoPi;  // in about [-pi, pi]
  float cos_sign = 1.0f;
  if (a > kHalfPi) {  // sin(pi - a) = sin a, cos(pi - a) = -cos a
    a = kPi - a;
    cos_sign = -1.0f;
  } else if (a < -kHalfPi) {
    a = -kPi - a;
    cos_sign = -1.0f;
  }
  return {cos_sign * cos_poly8(a), sin_poly7(a)};
}

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

float mutant_position(Bug bug, std::int64_t p) {
  float f = static_cast<float>(bug == Bug::off_by_one_position ? p + 1 : p);
  if (bug == Bug::bf16_positions) f = k::round_to_dtype(f, DType::bf16);  // position_ids.to(bfloat16)
  return f;
}

std::int64_t mutant_stream_position(Bug bug, const RopeSpec& r, const Position& p, int j) {
  int stream = r.mrope == MropeMode::none ? 0 : mrope_stream(r, j);
  if (bug == Bug::mrope_sections_swapped && stream != 0) stream = 3 - stream;  // h <-> w
  return stream == 0 ? p.t : (stream == 1 ? p.h : p.w);
}

// {cos, sin} of the angle, as the (mutated) kernel evaluates them, attention factor folded in.
std::pair<float, float> mutant_table(Bug bug, float theta, float att) {
  float c = 0, s = 0;
  if (bug == Bug::crude_sincos) {
    std::tie(c, s) = crude_sincos(theta);
  } else {
    c = std::cos(theta);
    s = std::sin(theta);
  }
  if (bug == Bug::sin_sign_flipped) s = -s;
  if (bug == Bug::cos_sin_swapped) std::swap(c, s);
  c = c * att;
  s = s * att;
  if (bug == Bug::f16_table) {  // cos / sin cached in f16, rotation in f32
    c = k::round_to_dtype(c, DType::f16);
    s = k::round_to_dtype(s, DType::f16);
  }
  return {c, s};
}

// The store: rounding to nearest even (k::round_to_dtype), or the bug's truncation of a bf16 result
// (the low 16 bits of the f32 pattern dropped: rounding toward zero).
float mutant_store(Bug bug, float v, DType dt) {
  if (bug != Bug::bf16_truncating_store || dt != DType::bf16 || !std::isfinite(v)) return k::round_to_dtype(v, dt);
  std::uint32_t bits;
  std::memcpy(&bits, &v, 4);
  bits &= 0xFFFF0000u;
  std::memcpy(&v, &bits, 4);
  return v;
}

// The hf-fp32 apply loop with the bug's knob turned (Bug-free paths equal kernels::hf_fp32_rope_apply).
void mutant_rope_apply(Bug bug, std::string_view input, const RopeSpec& r, std::span<const Position> positions,
                       int heads, std::span<const float> x, std::span<float> out, DType dt) {
  const k::RopeFrequenciesF32 freq = mutant_frequencies(bug, r);
  const int P = rope_pairs(r), D = r.head_dim;
  const std::size_t row_len = idx(D);
  const bool interleaved = (r.layout == RopeLayout::interleaved) != (bug == Bug::wrong_pairing);
  const std::size_t offset = bug == Bug::partial_wrong_channels ? idx(D - 2 * P) : 0;  // last 2P channels
  std::vector<float> c(idx(P)), s(idx(P)), row(row_len);
  for (std::size_t t = 0; t < positions.size(); ++t) {
    for (int j = 0; j < P; ++j) {
      const float theta =
          mutant_position(bug, mutant_stream_position(bug, r, positions[t], j)) * freq.inv_freq[idx(j)];
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

// ---- the mutant table ---------------------------------------------------------------------------------

struct MutantDef {
  Bug bug;
  const char* name;
  const char* description;
  const char* where;
  const char* preset;
  std::int64_t max_position;
  const char* known_gap = "";
  DType dtype = DType::f32;
};

// Llama 3.1 8B with low_freq_factor set so that L_orig / low_freq_factor equals, in f32, the f32
// wavelength 2 pi / inv[35] of the first pair of the divided band: the only way the exclusive-edge
// bug shows (see the mutant's `where`).
EncodingSpec llama3_edge_spec() {
  EncodingSpec spec = load_preset("llama-3.1-8b");
  RopeSpec& r = spec.rope;
  const auto two_pi = static_cast<float>(2 * std::numbers::pi);
  const float wavelen = two_pi / k::hf_default_inv_freq(r.base, 35, r.rotary_dim);
  const auto L = static_cast<double>(*r.scaling.original_max_position_embeddings);
  double lff = L / static_cast<double>(wavelen);
  for (int i = 0; i < 64 && static_cast<float>(L / lff) != wavelen; ++i)
    lff = std::nextafter(lff, static_cast<float>(L / lff) > wavelen ? 2.0 : 0.0);
  r.scaling.low_freq_factor = lff;
  spec.name = "llama-3.1-8b-low-edge";
  spec.notes = "llama-3.1-8b with low_freq_factor " + std::to_string(lff) +
               " so that the f32 wavelength of pair 35 lies exactly on the low band edge";
  validate(spec);
  return spec;
}

EncodingSpec dynamic_spec() {
  EncodingSpec spec = load_preset("llama-2-7b");
  spec.rope.scaling.type = ScalingType::dynamic;
  spec.rope.scaling.factor = 2.0;
  spec.name = "llama-2-7b-dynamic-2";
  spec.notes = "llama-2-7b with rope_scaling {type: dynamic, factor: 2.0} (the transformers docs' example)";
  validate(spec);
  return spec;
}

const std::vector<MutantDef>& mutant_defs() {
  static const std::vector<MutantDef> defs = {
      {Bug::wrong_pairing, "wrong-pairing", "interleaved pairs (2j, 2j+1) rotated on a half-split spec",
       "weights exported for one layout run with the other kernel (variants.md 6.9); every position > 0", "llama-2-7b",
       4096},
      {Bug::off_by_one_position, "off-by-one-position", "every position used as p + 1",
       "a cache offset / 1-based position_ids bug; relative offsets survive, absolute angles are wrong", "llama-3-8b",
       8192},
      {Bug::wrong_base, "wrong-base", "base 10000 used instead of the spec's rope_theta (500000 if the spec's is 10000)",
       "rope_theta not read from config.json (Llama 3 with the Llama 2 default)", "llama-3-8b", 8192},
      {Bug::bf16_inv_freq, "bf16-inv-freq", "inverse frequencies rounded to bf16 before the angle",
       "transformers #29496, sglang-jax #1472: the model cast to bf16 with inv_freq as a buffer", "llama-2-7b", 4096},
      {Bug::f16_table, "f16-table", "cos / sin table stored in f16 (rotation in f32)",
       "gpt-neox #1003: the cos/sin cache in fp16; the kernel still claims fp32-angle", "gpt-neox-20b", 2048},
      {Bug::bf16_positions, "bf16-positions", "positions held in bf16 (position_ids.to(bfloat16))",
       "positions above 256 collide (257 -> 256); long-context Llama 3.1", "llama-3.1-8b", 131072},
      {Bug::sin_sign_flipped, "sin-sign-flipped", "rotation by -theta (sin negated)",
       "rotate_half written as cat(x2, -x1); relative invariance survives, the direction is reversed", "llama-2-7b", 4096},
      {Bug::cos_sin_swapped, "cos-sin-swapped", "cos and sin tables swapped",
       "GPT-J caches [sin ; cos] while ChatGLM caches (cos, sin) (variants.md 6.9)", "mistral-7b", 32768},
      {Bug::partial_wrong_channels, "partial-wrong-channels",
       "partial rotary applied to the last rotary_dim channels instead of the first",
       "GPT-NeoX rotary_pct 0.25: q[..., -R:] sliced instead of q[..., :R]", "gpt-neox-20b", 2048},
      {Bug::yarn_ramp_reversed, "yarn-ramp-reversed",
       "YaRN ramp reversed: high-frequency pairs interpolated, low-frequency ones kept",
       "extrapolation factor taken as ramp instead of 1 - ramp (variants.md 6.9); Qwen2.5 with the YaRN recipe",
       "qwen2.5-7b-yarn", 131072},
      {Bug::llama3_exclusive_edges, "llama3-exclusive-edges",
       "llama3 smoothing band with both edges exclusive (wavelen > high_wl && wavelen < low_wl)",
       "The llama3 map is continuous at both edges (smooth = 1 at high_wl, 0 at low_wl), so the edit changes nothing "
       "unless an f32 wavelength equals an edge exactly; at the high edge it still changes nothing (kept = smoothed "
       "with s = 1), at the low edge the pair is left unscaled (inv instead of inv / factor). On published configs no "
       "wavelength 2 pi base^(2j/R) (transcendental) meets L / low_freq_factor (rational): the spec here is "
       "llama-3.1-8b with low_freq_factor chosen to put pair 35 on the low edge",
       "", 131072},
      // Named crude-sincos, not fast-sincos: the kernels' recipe `fast-sincos` (a faithful __sinf / __cosf
      // model) lands in fp32-angle (kernels/RECIPES.md); this one violates it.
      {Bug::crude_sincos, "crude-sincos",
       "crude low-accuracy sin / cos: one-constant f32 reduction mod 2 pi, then degree-7 / degree-8 Taylor polynomials",
       "fast-math sin/cos (precision.md 1.2: kekzl/imp #1325 measured 3e-6 at position 40, 1e-2 at 131071)",
       "llama-2-7b", 4096},
      {Bug::attention_factor_twice, "attention-factor-twice",
       "YaRN attention factor folded into cos / sin and applied again (its square used)",
       "mscale applied in the rotary module and again by the caller; logits scaled by factor^4", "qwen2.5-7b-yarn",
       131072},
      {Bug::mrope_sections_swapped, "mrope-sections-swapped", "multimodal sections h and w swapped",
       "mrope_section read in the wrong order: image height and width positions exchanged (Qwen2-VL)", "qwen2-vl-7b",
       32768},
      {Bug::dynamic_static_ntk, "dynamic-static-ntk",
       "dynamic NTK applied statically: the base for factor * max_position_embeddings used at every length",
       "dynamic scaling with the cache built once for the longest length; short prompts get the stretched base", "",
       4096},
      {Bug::longrope_long_factors, "longrope-long-factors", "LongRoPE long factors used inside the original context",
       "a cache built once at the longest length (the suite resolves LongRoPE without a run-time length: short "
       "factors); Phi-3.5 prompts under 4096 tokens",
       "phi-3.5-mini", 4096},
      {Bug::k_head_offset, "k-head-offset",
       "the k path reads head h + 1's row for head h (head offset off by one head, wrapping inside the token); q is right",
       "separate q / k launches with the k head stride or offset computed from the wrong head count (GQA: "
       "num_key_value_heads vs num_heads); invisible with one head, and to any check that only rotates q",
       "llama-3.1-8b", 131072},
      {Bug::attention_factor_dropped, "attention-factor-dropped",
       "the attention factor (YaRN / LongRoPE mscale) never applied: cos / sin unscaled",
       "a kernel ported from a Llama recipe run on a YaRN / LongRoPE model (gpt-oss, Qwen2.5 YaRN, Phi-3.5 long): "
       "every logit off by att^2; on a preset with att = 1 only its YaRN variant shows it",
       "llama-3.1-8b", 131072},
      {Bug::bf16_truncating_store, "bf16-truncating-store",
       "bf16 results stored by dropping the low 16 bits of the f32 value (round toward zero) instead of rounding to nearest even",
       "a hand-written f32 -> bf16 cast (`u >> 16`) in a custom kernel; bias toward zero of up to one bf16 ulp",
       "gpt-j-6b", 2048, "", DType::bf16},
  };
  return defs;
}

EncodingSpec mutant_spec(const MutantDef& d) {
  if (d.bug == Bug::llama3_exclusive_edges) return llama3_edge_spec();
  if (d.bug == Bug::dynamic_static_ntk) return dynamic_spec();
  return load_preset(d.preset);
}

std::unique_ptr<Target> make_bug_target(const MutantDef& d) {
  TargetInfo info;
  info.name = std::string("mutant:") + d.name;
  info.description = std::string("hf-fp32 with a bug: ") + d.description;
  info.accuracy = AccuracyClass::fp32_angle;
  info.dtype = d.dtype;
  info.negative_positions = true;
  const Bug bug = d.bug;
  const DType dt = d.dtype;
  NamedRopeFunction rope = [bug, dt](std::string_view input, const EncodingSpec& spec, std::span<const Position> positions,
                                     int heads, std::span<const double> x, std::span<double> out) {
    if (!shapes_ok(spec, positions.size(), heads, x.size(), out.size())) return false;
    const std::vector<float> xf = to_float(x);
    std::vector<float> of(xf.size());
    mutant_rope_apply(bug, input, spec.rope, positions, heads, xf, of, dt);
    to_double(of, out);
    return true;
  };
  SinusoidalFunction sinusoidal = [bug, dt](const EncodingSpec& spec, std::span<const std::int64_t> positions,
                                            std::span<double> out) {
    if (spec.family != Family::sinusoidal || out.size() != positions.size() * idx(spec.sinusoidal.d_model))
      return false;
    std::vector<float> of(out.size());
    mutant_sinusoidal(bug, spec.sinusoidal, positions, of, dt);
    to_double(of, out);
    return true;
  };
  return make_named_function_target(std::move(info), std::move(rope), std::move(sinusoidal));
}

}  // namespace

std::vector<MutantInfo> mutants() {
  std::vector<MutantInfo> out;
  for (const MutantDef& d : mutant_defs())
    out.push_back({d.name, d.description, d.where, mutant_spec(d), d.max_position, d.known_gap, d.dtype});
  return out;
}

std::unique_ptr<Target> make_mutant_target(const std::string& name) {
  for (const MutantDef& d : mutant_defs())
    if (name == d.name) return make_bug_target(d);
  return nullptr;
}

std::unique_ptr<Target> make_hf_fp32_target(DType out_dtype) {
  if (out_dtype == DType::f64) throw std::invalid_argument("hf-fp32: a float32 kernel has no f64 output");
  TargetInfo info;
  info.name = "hf-fp32" + dtype_suffix(out_dtype);
  info.description = std::string("scalar CPU kernel, Hugging Face Llama recipe in float32, output ") +
                     std::string(to_string(out_dtype));
  info.accuracy = AccuracyClass::fp32_angle;
  info.dtype = out_dtype;
  info.negative_positions = true;
  RopeFunction rope = [out_dtype](const EncodingSpec& spec, std::span<const Position> positions, int heads,
                                  std::span<const double> x, std::span<double> out) {
    if (!shapes_ok(spec, positions.size(), heads, x.size(), out.size())) return false;
    const k::RopeFrequenciesF32 freq = k::hf_rope_frequencies_f32(spec.rope);  // no run-time length (suite.hpp)
    const std::vector<float> xf = to_float(x);
    std::vector<float> of(xf.size());
    k::hf_fp32_rope_apply(spec.rope, freq, positions, heads, xf, of, out_dtype);
    to_double(of, out);
    return true;
  };
  SinusoidalFunction sinusoidal = [out_dtype](const EncodingSpec& spec, std::span<const std::int64_t> positions,
                                              std::span<double> out) {
    if (spec.family != Family::sinusoidal || out.size() != positions.size() * idx(spec.sinusoidal.d_model))
      return false;
    const std::vector<float> w = k::hf_sinusoidal_frequencies_f32(spec.sinusoidal);
    std::vector<float> of(out.size());
    k::hf_fp32_sinusoidal(spec.sinusoidal, w, positions, of, out_dtype);
    to_double(of, out);
    return true;
  };
  return make_function_target(std::move(info), std::move(rope), std::move(sinusoidal));
}

// ---- the self-test -----------------------------------------------------------------------------------

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

bool SelfTestReport::passed() const {
  return std::all_of(verdicts.begin(), verdicts.end(), [](const MutantVerdict& v) {
    return v.correct_passed && (v.caught || !v.mutant.known_gap.empty());
  });
}

std::string SelfTestReport::table() const {
  std::ostringstream os;
  char line[512];
  os << "mutant -> property that caught it, at position P, margin M (error / bound); seed " << options.seed << ", "
     << options.cases << " cases per property\n";
  std::snprintf(line, sizeof line, "%-24s %-22s %-16s %10s %11s %6s %8s %s\n", "mutant", "spec", "caught by",
                "position P", "margin M", "props", "hf-fp32", "time mutant / hf-fp32");
  os << line;
  for (const MutantVerdict& v : verdicts) {
    const std::string props_col = options.all_properties ? std::to_string(v.properties_failed) + "/" +
                                                               std::to_string(v.properties_run)
                                                         : std::to_string(v.properties_run);
    std::snprintf(line, sizeof line, "%-24s %-22s %-16s %10s %11.4g %6s %8s %6.2f / %.2f s\n", v.mutant.name.c_str(),
                  v.mutant.spec.name.c_str(), v.caught ? v.property.c_str() : "NOT CAUGHT",
                  v.position ? std::to_string(*v.position).c_str() : "-", v.margin, props_col.c_str(),
                  v.correct_passed ? "pass" : "FAIL", v.seconds_mutant, v.seconds_correct);
    os << line;
  }
  os << (options.shrink ? "counterexamples (shrunk):\n" : "counterexamples (as found, not shrunk):\n");
  for (const MutantVerdict& v : verdicts)
    if (v.caught) os << "  " << v.mutant.name << ": " << v.counterexample << "\n";
  for (const MutantVerdict& v : verdicts) {
    if (v.mutant.known_gap.empty()) continue;
    os << "known gap: " << v.mutant.name << ": " << v.mutant.known_gap
       << (v.caught ? " (caught now: remove the known gap)" : "") << "\n";
  }
  for (const MutantVerdict& v : verdicts)
    if (!v.correct_passed) os << "hf-fp32 FAILED on " << v.mutant.spec.name << ":\n" << v.correct_failures;
  return os.str();
}

SelfTestReport run_self_test(const SelfTestOptions& options) {
  SelfTestReport report;
  report.options = options;
  std::vector<MutantInfo> all = mutants();
  for (const std::string& name : options.only)
    if (std::none_of(all.begin(), all.end(), [&](const MutantInfo& m) { return m.name == name; }))
      throw std::invalid_argument("unknown mutant '" + name + "'");
  for (MutantInfo& m : all) {
    if (!options.only.empty() && std::find(options.only.begin(), options.only.end(), m.name) == options.only.end())
      continue;
    MutantVerdict v;
    SuiteOptions so;
    so.cases = options.cases;
    so.seed = options.seed;
    so.max_position = m.max_position;
    so.shrink = options.shrink;
    auto bad = make_mutant_target(m.name);
    const auto t0 = std::chrono::steady_clock::now();
    for (const PropertyInfo& p : list_properties()) {
      so.only = {p.name};
      const SuiteReport rep = run_suite(*bad, &m.spec, so);
      ++v.properties_run;
      for (const PropertyOutcome& o : rep.outcomes) {
        if (o.passed) continue;
        if (v.properties_failed++ == 0) {
          v.caught = true;
          v.property = o.property;
          v.position = o.failing_position;
          v.margin = o.worst_margin;
          v.counterexample = o.counterexample;
          v.reproduce = o.reproduce;
        }
      }
      if (v.caught && !options.all_properties) break;
    }
    v.seconds_mutant = seconds_since(t0);

    so.only.clear();
    auto good = make_hf_fp32_target(m.dtype);
    const auto t1 = std::chrono::steady_clock::now();
    const SuiteReport ok = run_suite(*good, &m.spec, so);
    v.seconds_correct = seconds_since(t1);
    v.correct_passed = ok.passed();
    for (const PropertyOutcome& o : ok.outcomes)
      if (!o.passed)
        v.correct_failures += "  " + o.property + ": " + o.counterexample + "\n    rerun alone: target " + o.reproduce.target +
                              ", seed " + std::to_string(o.reproduce.seed) + ", " + std::to_string(o.reproduce.cases) +
                              " cases, output " + o.reproduce.dtype + "\n";
    v.mutant = std::move(m);
    report.verdicts.push_back(std::move(v));
  }
  return report;
}

void register_builtin_targets() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (DType t : {DType::f32, DType::f16, DType::bf16}) {
      const std::string name = "hf-fp32" + dtype_suffix(t);
      register_target(
          name, [t] { return make_hf_fp32_target(t); },
          "scalar CPU kernel, Hugging Face Llama recipe in float32, output " + std::string(to_string(t)) +
              " (class fp32-angle)");
    }
    for (const MutantDef& d : mutant_defs())
      register_target(
          std::string("mutant:") + d.name, [&d] { return make_bug_target(d); },
          std::string("deliberately broken hf-fp32 (self-test): ") + d.description);
  });
}

}  // namespace ropecheck::props
