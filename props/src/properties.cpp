// The property table (property_defs) and what it runs in: Ctx, the counterexample check, the spec
// description. The properties themselves live in properties/ (common.hpp lists them).
#include "properties.hpp"

#include <cmath>
#include <limits>

#include <rapidcheck.h>

#include "properties/common.hpp"
#include "ropecheck/core/spec_json.hpp"

namespace ropecheck::props::detail {

Ctx*& current_ctx() {
  thread_local Ctx* ctx = nullptr;
  return ctx;
}

void Ctx::check(double margin, const std::string& desc, std::optional<std::int64_t> position, const EncodingSpec& spec) {
  if (!(margin <= worst)) worst = std::isnan(margin) ? std::numeric_limits<double>::infinity() : margin;
  if (!(margin <= 1)) {
    fail_desc = desc + " (margin " + (std::isnan(margin) ? std::string("NaN") : num(margin)) + ")";
    fail_position = position;
    fail_spec_json = spec_to_json(spec).dump();
    RC_FAIL(fail_desc);
  }
}

std::string describe_spec(const EncodingSpec& s) {
  std::string out = s.name.empty() ? std::string("spec") : s.name;
  if (s.family == Family::sinusoidal) {
    const SinusoidalSpec& p = s.sinusoidal;
    return out + " (sinusoidal " + std::string(to_string(p.layout)) + ", " + std::string(to_string(p.frequencies)) +
           ", base " + num(p.base) + ", offset " + std::to_string(p.position_offset) + ")";
  }
  const RopeSpec& r = s.rope;
  out += " (rope " + std::string(to_string(r.layout)) + ", rotary " + std::to_string(r.rotary_dim) + "/" +
         std::to_string(r.head_dim) + ", base " + num(r.base) + ", " + std::string(to_string(r.scaling.type));
  if (r.scaling.factor) out += " x" + num(*r.scaling.factor);
  if (r.mrope != MropeMode::none) out += ", mrope " + std::string(to_string(r.mrope));
  return out + ")";
}

const std::vector<PropertyDef>& property_defs() {
  static const std::vector<PropertyDef> defs = {
      {"relative_shift", "<f(q,m), f(k,n)> equals q^T R(n-m) k (exact) and is unchanged when m and n are shifted by s",
       "dot-product bound: sum_c E^y_c |z_c| + (|y_c| + E^y_c) E^z_c + 2 (D+2) u64 sum |y_c z_c|", prop_relative_shift},
      {"attention_shift", "the 8x8 score matrix of a short sequence is invariant under a shift of all positions",
       "per entry: dot-product bound of the unshifted + the shifted entry", prop_attention_shift},
      {"norm", "|(y_a, y_b)| = att |(x_a, x_b)| for every pair; pass-through channels unchanged",
       "angle-free: E0_a + E0_b + 4 u64 M per pair (E0: the class bound without its angle term)", prop_norm},
      {"attention_factor", "on a spec with attention factor att != 1 (the spec, or its YaRN x8 variant), |(y_a, y_b)| = att |(x_a, x_b)| for every pair",
       "angle-free: E0_a + E0_b + 4 u64 M per pair (E0: the class bound without its angle term)", prop_attention_factor},
      {"head_independence", "a head's output does not depend on the other heads of the call nor on being passed as q or k",
       "2 E_c per channel (both within E_c of the same exact value)", prop_head_independence},
      {"store_rounding", "a narrow (bf16 / f16) result is the round-to-nearest neighbour of the exact value where the class's pre-store error allows telling",
       "E_pre + ulp_dt(|y*| + E_pre)/2 (E_pre: the class bound for a binary64 result); elements with E_pre >= ulp/4 not counted", prop_store_rounding},
      {"composition", "f(f(x,a),b) = att f(x,a+b): R(a) R(b) = R(a+b)",
       "per pair E^g + att (E^y + |rounding of the intermediate|) + att E^h", prop_composition},
      {"inverse", "f(f(x,m),-m) = att^2 x: R(-m) undoes R(m) (targets that accept negative positions)",
       "as composition with b = -a", prop_inverse},
      {"matrix_orthogonal", "the target's own matrix C(m) (columns f(e_i, m)) has C^T C = I, det C = 1, and f(x,m) = C(m) x",
       "column error norms: |C^T C - I|_ij <= |Ê_i| + |Ê_j| + |Ê_i||Ê_j|; |det - 1| <= (1 + |Ê|_F)^D - 1", prop_matrix_orthogonal},
      {"sinusoidal_shift", "PE(t+k) = A_k PE(t) with the same exact A_k for two t; every (sin, cos) pair of the target's rows has length 1",
       "E(t+k)_c + sum_i |A_ci| E(t)_i + 4 u64 sum |A_ci PE_i|; lengths: E_sin + E_cos + 4 u64", prop_sinusoidal_shift},
      {"uniqueness", "rows E(t) of a 16-position window are distinct wherever the exact rows are distinguishable; "
                     "smallest separation and first collision reported",
       "exact separation (binary64 rows minus their fp64-angle bound) <= target separation + E(t) + E(t')", prop_uniqueness},
      {"roformer_decay", "the RoFormer relative upper bound from the target's outputs matches the exact curve (which stays below R(0) = (P+1)/2)",
       "(1/P) sum_j sum_{k<j} (E_a,k + E_b,k)/att", prop_roformer_decay},
      {"sinusoidal_dot", "PE(t).PE(t+k) = sum_i cos(k w_i): independent of t, even in k, d/2 at k = 0",
       "dot-product bound with table bounds (M = 1)", prop_sinusoidal_dot},
      {"cosine_sum", "sum_j cos(m theta_j) from the target equals the exact sum (first m where it turns negative reported)",
       "sum_j E_a,j / att", prop_cosine_sum},
      {"layout_equivalence", "f_half_split(P x) = P f_interleaved(x) under the channel permutation P",
       "angle-free: E0^half + E0^interleaved per channel", prop_layout_equivalence},
      {"mrope_equal_streams", "multimodal RoPE with equal t/h/w positions equals 1-D RoPE", "angle-free: 2 E0 per channel",
       prop_mrope_equal_streams},
      {"mrope_streams", "with distinct t/h/w positions every channel equals the exact reference, each pair driven by its section's stream",
       "E_c per channel at the pair's own stream position (the class bound)", prop_mrope_streams},
      {"linear_scaling", "linear scaling by an integer F at position F q equals no scaling at q",
       "E^linear(Fq) + E^none(q) per channel; angle-free E0 + E0 for F a power of two (same angle bit for bit)", prop_linear_scaling},
      {"yarn_frequencies", "every YaRN frequency lies between the interpolated (w/factor) and the original w",
       "(pi/2) (E_a + E_b)/att per pair (angle from a chord)", prop_yarn_frequencies},
      {"partial_passthrough", "channels past the rotary block are bit-identical to the input", "none (identity)",
       prop_partial_passthrough},
      {"score_shift", "the target's score s = scale <f_q(q,m), f_k(k,n)> is unchanged when m and n are shifted by a long D (up to the position range)",
       "T(m,n) + T(m+D,n+D), T = the class's propagated score bound (ERROR_MODEL 16.3) + 4 u64 scale sum |y_c z_c|", prop_score_shift},
      {"score_decay", "RoFormer's decay bound |s| <= scale (att^2 max_j |h_j+1 - h_j| sum_j |S_j(n-m)| + |q_pass.k_pass|) holds for the exact score and the target's",
       "exact: MPFR slack; target: T (as score_shift) + slack", prop_score_decay},
      {"cached_key_rotation", "a key rotated at m by the k path, cached in the input format and rotated by D, equals att f_k(k, m+D) (D long, or back to -m)",
       "as composition, on the k path", prop_cached_key_rotation},
  };
  return defs;
}

}  // namespace ropecheck::props::detail
