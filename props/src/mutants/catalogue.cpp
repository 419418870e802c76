// The mutant table: each bug with where real implementations ship it, and the spec and positions
// a user meets it with.
#include "mutation.hpp"

#include <cmath>
#include <numbers>

#include "ropecheck/reference/presets.hpp"

namespace ropecheck::props::mutation {
namespace {

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

}  // namespace

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
      {Bug::k_position_slip, "k-position-slip", "the k path rotates every key at p + 1 (q at p)",
       "decode appends the new key to the cache and rotates it with the cache length after the append; every "
       "score then sees distance n - m + 1, which shift invariance cannot show (both sides slip alike)",
       "llama-3.1-8b", 131072},
  };
  return defs;
}

EncodingSpec mutant_spec(const MutantDef& d) {
  if (d.bug == Bug::llama3_exclusive_edges) return llama3_edge_spec();
  if (d.bug == Bug::dynamic_static_ntk) return dynamic_spec();
  return load_preset(d.preset);
}

}  // namespace ropecheck::props::mutation
