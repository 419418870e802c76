// What every property file shares (private to props/): the error-model helpers, the target calls,
// and RopeCase, the prologue of a RoPE property. The properties are listed in property_defs()
// (properties.cpp); their derivations stand beside each one and in props/PROPERTIES.md.
//
// Notation used in every derivation below (accuracy/ERROR_MODEL.md):
//   E_c     the error model's bound for output element c of the target: for a rotated channel of
//           pair j at position p, E = class_bound(class, dtype, rotated).allowed(pair_angle(p, w_j), M)
//           with M = att (|x_a| + |x_b|); a pass-through channel E = allowed({0, 0}, |x_c|); a
//           cos / sin / pe value E = allowed(pair_angle(p, w), 1). A correct target of its class has
//           |y_c - y*_c| <= E_c for every element (y* the exact value).
//   u64     2^-53: the checks themselves run in binary64; their own rounding is bounded by the
//           standard gamma_n = n u64 / (1 - n u64) <= 2 n u64 for an n-term sum of products.
//   dot(y, z) for target outputs y ~ y*, z ~ z*: |<y, z> - <y*, z*>|
//           <= sum_c E^y_c |z_c| + (|y_c| + E^y_c) E^z_c      (|y*_c| <= |y_c| + E^y_c)
//   fp64 rows: where an "exact" row would cost MPFR per element, it is computed in binary64 from the
//           correctly rounded frequencies: that computation is an fp64-angle computation, so its own
//           error is bounded by class_bound(fp64-angle, f64) (ERROR_MODEL.md section 11).
// A sub-check's margin is |difference| / tolerance; a case fails when a margin exceeds 1.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../properties.hpp"
#include "ropecheck/accuracy/element_geometry.hpp"
#include "ropecheck/accuracy/error_model.hpp"
#include "ropecheck/core/spec.hpp"
#include "ropecheck/formulas/sinusoidal.hpp"

namespace ropecheck::props::detail {

using namespace ropecheck::accuracy;  // the error model is this module's vocabulary

inline constexpr double kU64 = 0x1p-53;

// diff / tol as a margin: 0 for no difference, infinite for a positive difference against a zero
// tolerance, NaN when either is NaN.
double ratio(double diff, double tol);
// A number as counterexamples print it (6 significant digits).
std::string num(double v);

// The exact frequencies and attention factor (MPFR, 128 bits, rounded once to binary64), and the
// element geometry the error model reads them through (accuracy/element_geometry.hpp).
struct RopeExact {
  std::vector<double> w;
  double att = 1;
  int P = 0, D = 0, block = 0;
  std::shared_ptr<const accuracy::RopeGeometry> geometry;
};
// Cached by the spec's JSON (a property case asks for the same spec several times).
RopeExact rope_exact(const RopeSpec& r);

struct Bounds {
  ClassBound rot, pass, table;
};
Bounds bounds_of(AccuracyClass c, DType dt);
Bounds bounds_of(const Target& t);
const Bounds& fp64_bounds();

// E_c for one head vector x at one position.
std::vector<double> rope_bounds(const Bounds& b, const RopeSpec& r, const RopeExact& e, const Position& pos,
                                std::span<const double> x);
// A binary64 RoPE row (an fp64-angle computation; its error is within fp64_bounds()).
std::vector<double> rope_f64(const RopeSpec& r, const RopeExact& e, const Position& pos, std::span<const double> x);
// E0_c: the element bounds without the angle term (common.cpp says why a rotation-invariant quantity
// needs only these).
std::vector<double> rope_bounds_angle_free(const Bounds& b, const RopeSpec& r, const RopeExact& e,
                                          std::span<const double> x);

// Sinusoidal: exact frequencies, column map, bounds, binary64 rows.
struct SinExact {
  std::vector<double> w;
  std::vector<SinusoidalColumn> cols;
  int d = 0;
};
SinExact sin_exact(const SinusoidalSpec& s);
double col_freq(const SinExact& e, int c);
std::vector<double> sin_bounds(const Bounds& b, const SinusoidalSpec& s, const SinExact& e, std::int64_t t);
std::vector<double> sin_f64(const SinusoidalSpec& s, const SinExact& e, std::int64_t t);
bool sine_cosine_paired(const SinExact& e);

// Target calls; nullopt when the target does not implement the spec (common.cpp says how the heads
// of a call are placed).
enum class Input { q, k, any };
std::optional<std::vector<double>> call_rope_raw(Ctx& ctx, const EncodingSpec& spec, std::string_view input,
                                                 const std::vector<Position>& pos, int heads, const std::vector<double>& x);
std::optional<std::vector<double>> call_rope(Ctx& ctx, const EncodingSpec& spec, const std::vector<Position>& pos,
                                             int heads, const std::vector<double>& x, Input which = Input::any);
std::optional<std::vector<double>> call_sin(Ctx& ctx, const EncodingSpec& spec, const std::vector<std::int64_t>& pos);

std::span<const double> row(const std::vector<double>& v, std::size_t i, std::size_t n);
// Tolerance of a dot product of two target outputs (see the notation above).
double dot_tolerance(std::span<const double> y, std::span<const double> Ey, std::span<const double> z,
                     std::span<const double> Ez, double exact_magnitude);
double dot(std::span<const double> a, std::span<const double> b);

// The spec a property runs on: the fixed one, or a generated one. nullopt: not applicable.
std::optional<EncodingSpec> rope_spec_for(Ctx& ctx);
std::optional<EncodingSpec> sinusoidal_spec_for(Ctx& ctx, bool even_pairs);

std::int64_t max_pos(const Ctx& ctx);
// A short readable vector: all of it up to 8 values, else its nonzero entries as channel=value.
std::string vec_brief(const std::vector<double>& v);
// Rounds v to what the target may take as input (common.cpp says which format).
double to_input(const Target& t, double v);

// Pair norms (norm and attention_factor): the worst margin of ||(y_a, y_b)|| = att ||(x_a, x_b)||
// and what it was.
std::pair<double, std::string> pair_norm_margin(const Target& target, const RopeSpec& r, const std::vector<double>& x,
                                                const std::vector<double>& y);
// x = 1 on the first channel of each pair, 0 elsewhere.
std::vector<double> unit_pairs_input(const RopeSpec& r);

// The prologue every RoPE property repeats: the spec it runs on (rope_spec_for, or one it derived),
// its calls to the target, the exact frequencies and the target's class bounds (computed on first
// use), and the opening of its counterexample. A call the target declines returns nullopt: the
// property then skips the case (skip()).
class RopeCase {
 public:
  // The fixed spec or a generated one; nullopt, with the case counted as skipped, when the fixed
  // spec is not a RoPE spec.
  static std::optional<RopeCase> open(Ctx& ctx);
  // A spec the property derived from the one it runs on (a YaRN variant, ...).
  RopeCase(Ctx& ctx, EncodingSpec spec) : ctx_(&ctx), spec_(std::move(spec)) {}

  const EncodingSpec& spec() const { return spec_; }
  const RopeSpec& rope() const { return spec_.rope; }
  std::int64_t max_pos() const { return detail::max_pos(*ctx_); }
  Ctx& ctx() const { return *ctx_; }

  // The target's output for x (tokens x heads x head_dim) at pos (call_rope).
  std::optional<std::vector<double>> apply(const std::vector<Position>& pos, int heads, const std::vector<double>& x,
                                           Input which = Input::any) {
    return call_rope(*ctx_, spec_, pos, heads, x, which);
  }
  const RopeExact& exact();
  const Bounds& bounds();  // the target's class and output dtype
  // E_c of x at pos under the target's class (rope_bounds).
  std::vector<double> element_bounds(const Position& pos, std::span<const double> x) {
    return rope_bounds(bounds(), spec_.rope, exact(), pos, x);
  }
  // "SPEC (rope ...); head_dim D": how every counterexample of the case starts.
  std::string where() const;
  // A sub-check's margin on this spec (Ctx::check).
  void check(double margin, const std::string& desc, std::int64_t position) { ctx_->check(margin, desc, position, spec_); }
  void skip() { ctx_->skip(); }

 private:
  Ctx* ctx_;
  EncodingSpec spec_;
  std::optional<RopeExact> exact_;
  std::optional<Bounds> bounds_;
};

// Composition on one input path (rotation.cpp): f(f(x, a), b) against att f(x, a + b), the intermediate
// rounded to the target's input format; the worst per-pair margin and what it was; nullopt when the
// target declined a call.
std::optional<std::pair<double, std::string>> composition_margin(RopeCase& cs, const std::vector<double>& x, std::int64_t a,
                                                                std::int64_t b, Input which);

// The properties (rotation.cpp, sinusoidal.cpp, spectrum.cpp, variants.cpp, heads_and_storage.cpp,
// scores.cpp).
void prop_relative_shift(Ctx& ctx);
void prop_attention_shift(Ctx& ctx);
void prop_norm(Ctx& ctx);
void prop_composition(Ctx& ctx);
void prop_inverse(Ctx& ctx);
void prop_matrix_orthogonal(Ctx& ctx);
void prop_sinusoidal_shift(Ctx& ctx);
void prop_sinusoidal_dot(Ctx& ctx);
void prop_uniqueness(Ctx& ctx);
void prop_roformer_decay(Ctx& ctx);
void prop_cosine_sum(Ctx& ctx);
void prop_head_independence(Ctx& ctx);
void prop_attention_factor(Ctx& ctx);
void prop_store_rounding(Ctx& ctx);
void prop_layout_equivalence(Ctx& ctx);
void prop_mrope_equal_streams(Ctx& ctx);
void prop_mrope_streams(Ctx& ctx);
void prop_linear_scaling(Ctx& ctx);
void prop_yarn_frequencies(Ctx& ctx);
void prop_partial_passthrough(Ctx& ctx);
void prop_score_shift(Ctx& ctx);
void prop_score_decay(Ctx& ctx);
void prop_cached_key_rotation(Ctx& ctx);

}  // namespace ropecheck::props::detail
