// The properties. Each one: statement, derivation, tolerance (collected in props/PROPERTIES.md).
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
#include "properties.hpp"

#include <algorithm>
#include <cstring>
#include <cmath>
#include <limits>
#include <numbers>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include <Eigen/Dense>
#include <rapidcheck.h>

#include "ropecheck/accuracy/error_model.hpp"
#include "ropecheck/props/generators.hpp"
#include "ropecheck/reference/matrix_view.hpp"
#include "ropecheck/reference/presets.hpp"
#include "ropecheck/reference/rope_reference.hpp"
#include "ropecheck/reference/scalar.hpp"
#include "ropecheck/reference/rounding.hpp"
#include "ropecheck/reference/sinusoidal_reference.hpp"
#include "ropecheck/core/spec_json.hpp"

namespace ropecheck::props::detail {
using namespace ropecheck::accuracy;  // the error model is this module's vocabulary
namespace {

constexpr double kU64 = 0x1p-53;

// ---------------------------------------------------------------- helpers

double ratio(double diff, double tol) {
  if (std::isnan(diff) || std::isnan(tol)) return std::numeric_limits<double>::quiet_NaN();
  if (diff == 0) return 0;
  if (tol <= 0) return std::numeric_limits<double>::infinity();
  return diff / tol;
}

std::string num(double v) {
  std::ostringstream os;
  os.precision(6);
  os << v;
  return os.str();
}

// The exact frequencies and attention factor (MPFR, 128 bits, rounded once to binary64).
struct RopeExact {
  std::vector<double> w;
  double att = 1;
  int P = 0, D = 0, block = 0;
};

RopeExact rope_exact_uncached(const RopeSpec& r) {
  RopeExact e;
  ScopedPrecision prec(kMinWorkingBits);
  const RopeFrequencies<Real> f = rope_frequencies<Real>(r);
  for (const Real& v : f.inv_freq) e.w.push_back(to_f64(v));
  e.att = to_f64(f.attention_factor);
  e.P = rope_pairs(r);
  e.D = r.head_dim;
  e.block = rope_block_channels(r);
  return e;
}

// Cached by the spec's JSON (a property case asks for the same spec several times).
RopeExact rope_exact(const RopeSpec& r) {
  EncodingSpec s;
  s.family = Family::rope;
  s.rope = r;
  const std::string key = spec_to_json(s).dump();
  thread_local std::unordered_map<std::string, RopeExact> cache;
  if (const auto it = cache.find(key); it != cache.end()) return it->second;
  if (cache.size() > 512) cache.clear();
  return cache.emplace(key, rope_exact_uncached(r)).first->second;
}

std::int64_t stream_position(const RopeSpec& r, const Position& p, int j) {
  const int s = mrope_stream(r, j);
  return s == 0 ? p.t : (s == 1 ? p.h : p.w);
}

struct Bounds {
  ClassBound rot, pass, table;
};
Bounds bounds_of(AccuracyClass c, DType dt) {
  return {class_bound(c, dt, Quantity::rotated), class_bound(c, dt, Quantity::passthrough),
          class_bound(c, dt, Quantity::table)};
}
Bounds bounds_of(const Target& t) { return bounds_of(t.info().accuracy, t.info().dtype); }
const Bounds& fp64_bounds() {
  static const Bounds b = bounds_of(AccuracyClass::fp64_angle, DType::f64);
  return b;
}

// E_c for one head vector x at one position.
std::vector<double> rope_bounds(const Bounds& b, const RopeSpec& r, const RopeExact& e, const Position& pos,
                                std::span<const double> x) {
  std::vector<double> E(static_cast<std::size_t>(e.D));
  for (int j = 0; j < e.P; ++j) {
    const auto [ia, ib] = pair_channels(r, j);
    const double M = e.att * (std::fabs(x[static_cast<std::size_t>(ia)]) + std::fabs(x[static_cast<std::size_t>(ib)]));
    const std::int64_t sp = stream_position(r, pos, j);
    const PairAngle angle = pair_angle(static_cast<double>(sp), e.w[static_cast<std::size_t>(j)]);
    if (Ctx* ctx = current_ctx()) ctx->note_bound(b.rot, angle, sp);  // saturated bounds are not tested
    const double bound = b.rot.allowed(angle, M);
    E[static_cast<std::size_t>(ia)] = bound;
    E[static_cast<std::size_t>(ib)] = bound;
  }
  for (int c = e.block; c < e.D; ++c) E[static_cast<std::size_t>(c)] = b.pass.allowed({0, 0}, std::fabs(x[static_cast<std::size_t>(c)]));
  return E;
}

// A binary64 RoPE row (an fp64-angle computation; its error is within fp64_bounds()).
std::vector<double> rope_f64(const RopeSpec& r, const RopeExact& e, const Position& pos, std::span<const double> x) {
  std::vector<double> y(x.begin(), x.end());
  for (int j = 0; j < e.P; ++j) {
    const auto [ia, ib] = pair_channels(r, j);
    const double th = static_cast<double>(stream_position(r, pos, j)) * e.w[static_cast<std::size_t>(j)];
    const double c = std::cos(th), s = std::sin(th);
    const double a = x[static_cast<std::size_t>(ia)], bb = x[static_cast<std::size_t>(ib)];
    y[static_cast<std::size_t>(ia)] = e.att * (a * c - bb * s);
    y[static_cast<std::size_t>(ib)] = e.att * (bb * c + a * s);
  }
  return y;
}

// E0_c: the element bounds without the angle term (rope_bounds at angle 0: k_const M + floor). The
// angle term of the error model is the phase error of the target's angle θ̂ (ERROR_MODEL.md sections
// 2-3): the output is att R(θ̂) x plus errors bounded by E0. A quantity that every rotation leaves
// unchanged (a pair's norm) is therefore off by at most the E0 of its elements, at any position
// (ERROR_MODEL.md section 14).
std::vector<double> rope_bounds_angle_free(const Bounds& b, const RopeSpec& r, const RopeExact& e,
                                          std::span<const double> x) {
  return rope_bounds(b, r, e, Position::uniform(0), x);
}

// Sinusoidal: exact frequencies, column map, bounds, binary64 rows.
struct SinExact {
  std::vector<double> w;
  std::vector<SinusoidalColumn> cols;
  int d = 0;
};
SinExact sin_exact(const SinusoidalSpec& s) {
  SinExact e;
  ScopedPrecision prec(kMinWorkingBits);
  for (const Real& v : sinusoidal_frequencies<Real>(s)) e.w.push_back(to_f64(v));
  e.d = s.d_model;
  for (int c = 0; c < s.d_model; ++c) e.cols.push_back(sinusoidal_column(s, c));
  return e;
}
double col_freq(const SinExact& e, int c) {
  const SinusoidalColumn& col = e.cols[static_cast<std::size_t>(c)];
  return col.kind == SinusoidalKind::zero ? 0.0 : e.w[static_cast<std::size_t>(col.frequency)];
}
std::vector<double> sin_bounds(const Bounds& b, const SinusoidalSpec& s, const SinExact& e, std::int64_t t) {
  std::vector<double> E(static_cast<std::size_t>(e.d));
  const double p = static_cast<double>(t + s.position_offset);
  Ctx* ctx = current_ctx();
  for (int c = 0; c < e.d; ++c) {
    const PairAngle angle = pair_angle(p, col_freq(e, c));
    if (ctx) ctx->note_bound(b.table, angle, t);  // saturated bounds are not tested
    E[static_cast<std::size_t>(c)] = b.table.allowed(angle, 1.0);
  }
  return E;
}
std::vector<double> sin_f64(const SinusoidalSpec& s, const SinExact& e, std::int64_t t) {
  std::vector<double> row(static_cast<std::size_t>(e.d));
  const double p = static_cast<double>(t + s.position_offset);
  for (int c = 0; c < e.d; ++c) {
    const SinusoidalColumn& col = e.cols[static_cast<std::size_t>(c)];
    const double th = p * col_freq(e, c);
    row[static_cast<std::size_t>(c)] = col.kind == SinusoidalKind::zero ? 0.0 : (col.kind == SinusoidalKind::sine ? std::sin(th) : std::cos(th));
  }
  return row;
}
bool sine_cosine_paired(const SinExact& e) {
  std::vector<int> nsin(e.w.size(), 0), ncos(e.w.size(), 0);
  for (const auto& c : e.cols) {
    if (c.kind == SinusoidalKind::sine) ++nsin[static_cast<std::size_t>(c.frequency)];
    if (c.kind == SinusoidalKind::cosine) ++ncos[static_cast<std::size_t>(c.frequency)];
  }
  for (std::size_t i = 0; i < e.w.size(); ++i)
    if (nsin[i] != 1 || ncos[i] != 1) return false;
  return true;
}

// Target calls; nullopt when the target does not implement the spec.
//
// Every RoPE call goes to the target as input "q" or "k" (Target::rope_apply_input; drawn when the
// property does not name one) and with the property's heads placed among other heads of different
// data: 0 or 1 head before them and 0 or 1 after (drawn, so a counterexample shrinks to the fewest).
// Only the property's own heads are returned. A kernel whose q or k path reads or writes another
// head's row (a head stride off by one) then fails whichever property is running, not only those that
// happen to call it with several heads.
enum class Input { q, k, any };

std::optional<std::vector<double>> call_rope_raw(Ctx& ctx, const EncodingSpec& spec, std::string_view input,
                                                 const std::vector<Position>& pos, int heads, const std::vector<double>& x) {
  if (x.size() != pos.size() * static_cast<std::size_t>(heads) * static_cast<std::size_t>(spec.rope.head_dim))
    throw std::logic_error("props: internal error: input size does not match tokens x heads x head_dim");
  std::vector<double> out(x.size(), std::numeric_limits<double>::quiet_NaN());
  if (!ctx.target.rope_apply_input(input, spec, pos, heads, x, out)) return ctx.decline(), std::nullopt;
  return out;
}

std::optional<std::vector<double>> call_rope(Ctx& ctx, const EncodingSpec& spec, const std::vector<Position>& pos,
                                             int heads, const std::vector<double>& x, Input which = Input::any) {
  const std::string_view input =
      which == Input::q ? "q" : (which == Input::k ? "k" : (*rc::gen::element(true, false) ? "q" : "k"));
  const int before = *rc::gen::inRange(0, 2), after = *rc::gen::inRange(0, 2);
  if (before + after == 0) return call_rope_raw(ctx, spec, input, pos, heads, x);
  const auto D = static_cast<std::size_t>(spec.rope.head_dim);
  const auto H = static_cast<std::size_t>(heads), Hall = H + static_cast<std::size_t>(before + after);
  // One vector per neighbour slot (the same at every token: what matters is that it differs from the
  // property's heads). Not shrunk: a counterexample is about the property's own data, and shrinking
  // hundreds of neighbour values would cost minutes.
  std::vector<std::vector<double>> other;
  for (int i = 0; i < before + after; ++i) other.push_back(*rc::gen::noShrink(gen::bf16_vector(spec.rope.head_dim)));
  std::vector<double> xs(pos.size() * Hall * D);
  for (std::size_t t = 0; t < pos.size(); ++t)
    for (std::size_t h = 0; h < Hall; ++h) {
      double* dst = xs.data() + (t * Hall + h) * D;
      if (h < static_cast<std::size_t>(before))
        std::copy(other[h].begin(), other[h].end(), dst);
      else if (h < static_cast<std::size_t>(before) + H)
        std::copy_n(x.begin() + static_cast<std::ptrdiff_t>((t * H + h - static_cast<std::size_t>(before)) * D), D, dst);
      else
        std::copy(other[h - H].begin(), other[h - H].end(), dst);
    }
  const auto ys = call_rope_raw(ctx, spec, input, pos, static_cast<int>(Hall), xs);
  if (!ys) return std::nullopt;
  std::vector<double> y(x.size());
  for (std::size_t t = 0; t < pos.size(); ++t)
    std::copy_n(ys->begin() + static_cast<std::ptrdiff_t>((t * Hall + static_cast<std::size_t>(before)) * D), H * D,
                y.begin() + static_cast<std::ptrdiff_t>(t * H * D));
  return y;
}
std::optional<std::vector<double>> call_sin(Ctx& ctx, const EncodingSpec& spec, const std::vector<std::int64_t>& pos) {
  std::vector<double> out(pos.size() * static_cast<std::size_t>(spec.sinusoidal.d_model), std::numeric_limits<double>::quiet_NaN());
  if (!ctx.target.sinusoidal(spec, pos, out)) return ctx.decline(), std::nullopt;
  return out;
}

std::span<const double> row(const std::vector<double>& v, std::size_t i, std::size_t n) {
  return std::span<const double>(v).subspan(i * n, n);
}

// Tolerance of a dot product of two target outputs (see the header comment).
double dot_tolerance(std::span<const double> y, std::span<const double> Ey, std::span<const double> z,
                     std::span<const double> Ez, double exact_magnitude) {
  double t = 0, abs_sum = 0;
  for (std::size_t c = 0; c < y.size(); ++c) {
    t += Ey[c] * std::fabs(z[c]) + (std::fabs(y[c]) + Ey[c]) * Ez[c];
    abs_sum += std::fabs(y[c] * z[c]);
  }
  return t + 2.0 * static_cast<double>(y.size() + 2) * kU64 * abs_sum + 2 * kU64 * std::fabs(exact_magnitude);
}
double dot(std::span<const double> a, std::span<const double> b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// The spec a rope property runs on: the fixed one, or a generated one. nullopt: not applicable.
std::optional<EncodingSpec> rope_spec_for(Ctx& ctx) {
  if (ctx.fixed) {
    if (ctx.fixed->family != Family::rope) return std::nullopt;
    return *ctx.fixed;
  }
  return *gen::rope_spec();
}
std::optional<EncodingSpec> sinusoidal_spec_for(Ctx& ctx, bool even_pairs) {
  if (ctx.fixed) {
    if (ctx.fixed->family != Family::sinusoidal) return std::nullopt;
    return *ctx.fixed;
  }
  return *gen::sinusoidal_spec(even_pairs);
}

std::int64_t max_pos(const Ctx& ctx) { return ctx.max_position > 0 ? ctx.max_position : gen::kDefaultMaxPosition; }

// A short readable vector: all of it up to 8 values, else its nonzero entries as channel=value.
std::string vec_brief(const std::vector<double>& v) {
  std::string s = "[";
  if (v.size() <= 8) {
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i) s += ',';
      s += num(v[i]);
    }
    return s + "]";
  }
  int shown = 0;
  for (std::size_t i = 0; i < v.size() && shown < 8; ++i) {
    if (v[i] == 0) continue;
    if (shown++) s += ',';
    s += std::to_string(i);
    s += '=';
    s += num(v[i]);
  }
  s += shown == 0 ? "all 0" : (shown == 8 ? ",... (others 0 or not shown)" : " (others 0)");
  return s + "]";
}

// Rounds v to what the target may take as input: kept as is for binary64 targets of the angle
// classes, f32 for f32 outputs, bf16 for table classes and 16-bit outputs (the rounding is known
// exactly and accounted for by the caller).
double to_input(const Target& t, double v) {
  const bool narrow = t.info().accuracy == AccuracyClass::bf16_table || t.info().accuracy == AccuracyClass::f16_table ||
                      t.info().dtype == DType::bf16 || t.info().dtype == DType::f16;
  if (!narrow && t.info().dtype == DType::f64) return v;
  const float f = static_cast<float>(v);
  if (!narrow) return f;
  std::uint32_t bits;
  std::memcpy(&bits, &f, 4);
  bits = (bits + 0x7FFFu + ((bits >> 16) & 1u)) & 0xFFFF0000u;  // RNE to bf16 (finite inputs)
  float r;
  std::memcpy(&r, &bits, 4);
  return r;
}

// ---------------------------------------------------------------- relative shift
// Statement: <f(q,m), f(k,n)> = att^2 q_rot^T R(n-m) k_rot + q_pass^T k_pass (depends on n - m only),
// and shifting both positions by s changes nothing.
// Tolerance: each logit is compared with the exact value L* (MPFR: att <q, f*(k, n-m)> on the rotated
// block, plus the pass-through dot) within dot_tolerance(y, E^y, z, E^z); the shifted pair likewise;
// the two target logits against each other within the sum of both tolerances.
void prop_relative_shift(Ctx& ctx) {
  const auto spec = rope_spec_for(ctx);
  if (!spec) return ctx.skip();
  const RopeSpec& r = spec->rope;
  const std::int64_t mx = max_pos(ctx);
  const std::int64_t m = *gen::position(mx), n = *gen::position(mx);
  const std::int64_t s = *rc::gen::inRange<std::int64_t>(0, mx - std::max(m, n) + 1);
  const auto q = *gen::bf16_vector(r.head_dim);
  const auto k = *gen::bf16_vector(r.head_dim);
  std::vector<double> q2(q), k2(k);
  q2.insert(q2.end(), q.begin(), q.end());
  k2.insert(k2.end(), k.begin(), k.end());
  const auto y = call_rope(ctx, *spec, {Position::uniform(m), Position::uniform(m + s)}, 1, q2, Input::q);
  const auto z = call_rope(ctx, *spec, {Position::uniform(n), Position::uniform(n + s)}, 1, k2, Input::k);
  if (!y || !z) return ctx.skip();
  const RopeExact e = rope_exact(r);
  const Bounds b = bounds_of(ctx.target);
  const auto D = static_cast<std::size_t>(r.head_dim);
  double exact = 0;
  {
    ScopedPrecision prec(working_precision_bits(53, rope_max_abs_angle(r, std::nullopt, std::abs(n - m))));
    const RopeFrequencies<Real> f = rope_frequencies<Real>(r);
    std::vector<Real> kr(k.begin(), k.end());
    const std::vector<Real> g = rope_apply<Real>(r, f, Position::uniform(n - m), kr);
    Real L = 0, Lp = 0;
    for (int c = 0; c < e.block; ++c) L += Real(q[static_cast<std::size_t>(c)]) * g[static_cast<std::size_t>(c)];
    for (int c = e.block; c < e.D; ++c) Lp += Real(q[static_cast<std::size_t>(c)]) * g[static_cast<std::size_t>(c)];
    exact = to_f64(f.attention_factor * L + Lp);
  }
  double tol[2], val[2];
  for (std::size_t i = 0; i < 2; ++i) {
    const std::int64_t sh = i == 0 ? 0 : s;
    const auto Ey = rope_bounds(b, r, e, Position::uniform(m + sh), q);
    const auto Ez = rope_bounds(b, r, e, Position::uniform(n + sh), k);
    val[i] = dot(row(*y, i, D), row(*z, i, D));
    tol[i] = dot_tolerance(row(*y, i, D), Ey, row(*z, i, D), Ez, exact);
  }
  const std::string where = describe_spec(*spec) + "; head_dim " + std::to_string(r.head_dim) + "; q " + vec_brief(q) +
                            ", k " + vec_brief(k) + "; m " + std::to_string(m) + ", n " + std::to_string(n) + ", shift " +
                            std::to_string(s);
  ctx.check(ratio(std::fabs(val[0] - exact), tol[0]),
            where + ": <f(q,m),f(k,n)> = " + num(val[0]) + ", exact q^T R(n-m) k = " + num(exact), std::max(m, n), *spec);
  ctx.check(ratio(std::fabs(val[1] - exact), tol[1]),
            where + ": <f(q,m+s),f(k,n+s)> = " + num(val[1]) + ", exact " + num(exact), std::max(m, n) + s, *spec);
  ctx.check(ratio(std::fabs(val[0] - val[1]), tol[0] + tol[1]),
            where + ": logit " + num(val[0]) + " changes to " + num(val[1]) + " under the shift", std::max(m, n) + s, *spec);
}

// ---------------------------------------------------------------- attention-logit view
// Statement: the score matrix S_ij = <f(q_i, p0 + i), f(k_j, p0 + j)> of an 8-token sequence does
// not change when every position is shifted by s (what AnchorAttention measures in bf16).
// Tolerance: entry by entry, dot_tolerance of the unshifted plus that of the shifted entry.
void prop_attention_shift(Ctx& ctx) {
  const auto spec = rope_spec_for(ctx);
  if (!spec) return ctx.skip();
  const RopeSpec& r = spec->rope;
  constexpr int T = 8;
  const std::int64_t mx = max_pos(ctx);
  const std::int64_t p0 = std::min(*gen::position(mx), mx - T);
  const std::int64_t s = std::min(*gen::position(mx), mx - T - p0);
  const auto D = static_cast<std::size_t>(r.head_dim);
  const auto Q = *gen::bf16_vector(T * r.head_dim);
  const auto K = *gen::bf16_vector(T * r.head_dim);
  std::vector<Position> pos, pos_s;
  for (int i = 0; i < T; ++i) {
    pos.push_back(Position::uniform(p0 + i));
    pos_s.push_back(Position::uniform(p0 + s + i));
  }
  const auto y = call_rope(ctx, *spec, pos, 1, Q, Input::q), z = call_rope(ctx, *spec, pos, 1, K, Input::k);
  const auto ys = call_rope(ctx, *spec, pos_s, 1, Q, Input::q), zs = call_rope(ctx, *spec, pos_s, 1, K, Input::k);
  if (!y || !z || !ys || !zs) return ctx.skip();
  const RopeExact e = rope_exact(r);
  const Bounds b = bounds_of(ctx.target);
  std::vector<std::vector<double>> Ey, Ez, Eys, Ezs;
  for (std::size_t i = 0; i < T; ++i) {
    Ey.push_back(rope_bounds(b, r, e, pos[i], row(Q, i, D)));
    Ez.push_back(rope_bounds(b, r, e, pos[i], row(K, i, D)));
    Eys.push_back(rope_bounds(b, r, e, pos_s[i], row(Q, i, D)));
    Ezs.push_back(rope_bounds(b, r, e, pos_s[i], row(K, i, D)));
  }
  double worst = 0, wd = 0;
  std::size_t wi = 0, wj = 0;
  for (std::size_t i = 0; i < T; ++i)
    for (std::size_t j = 0; j < T; ++j) {
      const double S = dot(row(*y, i, D), row(*z, j, D)), Ss = dot(row(*ys, i, D), row(*zs, j, D));
      const double tol = dot_tolerance(row(*y, i, D), Ey[i], row(*z, j, D), Ez[j], 0) +
                         dot_tolerance(row(*ys, i, D), Eys[i], row(*zs, j, D), Ezs[j], 0);
      const double mg = ratio(std::fabs(S - Ss), tol);
      if (!(mg <= worst)) worst = mg, wi = i, wj = j, wd = S - Ss;
    }
  ctx.check(worst,
            describe_spec(*spec) + "; head_dim " + std::to_string(r.head_dim) + "; 8 tokens at " + std::to_string(p0) +
                "..; shift " + std::to_string(s) + ": score[" + std::to_string(wi) + "][" + std::to_string(wj) +
                "] changes by " + num(wd),
            p0 + s, *spec);
}

// ---------------------------------------------------------------- norms
// Statement: ||(y_a, y_b)|| = att ||(x_a, x_b)|| for every pair; pass-through channels unchanged.
// Tolerance: angle-free (ERROR_MODEL.md section 14): the output is att R(θ̂) x plus errors bounded by the
// class bound without its angle term E0, and a rotation by any θ̂ keeps the norm, so the pair's norm is
// off by at most E0_a + E0_b (triangle inequality); the check's own arithmetic (squares, sqrt, att) adds
// <= 4 u64 M. (pair_norm_margin, below; the same check as attention_factor.) Unlike the per-element
// bound it does not grow with the position: a norm 10% off is caught at 2^20 and beyond.
std::pair<double, std::string> pair_norm_margin(const Target& target, const RopeSpec& r, const std::vector<double>& x,
                                                const std::vector<double>& y);
void prop_norm(Ctx& ctx) {
  const auto spec = rope_spec_for(ctx);
  if (!spec) return ctx.skip();
  const RopeSpec& r = spec->rope;
  const std::int64_t m = *gen::position(max_pos(ctx));
  const auto x = *gen::bf16_vector(r.head_dim);
  const auto y = call_rope(ctx, *spec, {Position::uniform(m)}, 1, x);
  if (!y) return ctx.skip();
  const auto [worst, what] = pair_norm_margin(ctx.target, r, x, *y);
  ctx.check(worst, describe_spec(*spec) + "; head_dim " + std::to_string(r.head_dim) + "; x " + vec_brief(x) + "; m " +
                       std::to_string(m) + ": " + what,
            m, *spec);
}

// ---------------------------------------------------------------- composition and inverse
// Statement: f(f(x, a), b) = att f(x, a + b) on the rotated block (R(a) R(b) = R(a + b)), the
// pass-through channels unchanged; with negative positions, f(f(x, a), -a) = att^2 x (R(-a) undoes R(a)).
// The second call's input v is the first output rounded to f32 (bf16 for table classes / 16-bit
// outputs): the target's input contract. Derivation: f*(v, b) = att R(b) v, v = att R(a) x + e_y + r
// (r the rounding, known exactly), so g - att h = e_g + att R(b)(e_y + r) - att e_h and per pair
//   ||.|| <= (E^g_a + E^g_b) + att (E^y_a + E^y_b + |r_a| + |r_b|) + att (E^h_a + E^h_b) + 2 u64 att |h|.
void composition_case(Ctx& ctx, bool inverse) {
  const auto spec = rope_spec_for(ctx);
  if (!spec) return ctx.skip();
  const RopeSpec& r = spec->rope;
  const std::int64_t mx = max_pos(ctx);
  const std::int64_t a = *gen::position(mx);
  const std::int64_t bpos = inverse ? -a : *rc::gen::inRange<std::int64_t>(0, mx - a + 1);
  const auto x = *gen::bf16_vector(r.head_dim);
  const auto y = call_rope(ctx, *spec, {Position::uniform(a)}, 1, x);
  if (!y) return ctx.skip();
  std::vector<double> v(y->size()), rr(y->size());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = to_input(ctx.target, (*y)[i]), rr[i] = v[i] - (*y)[i];
  const auto g = call_rope(ctx, *spec, {Position::uniform(bpos)}, 1, v);
  const auto h = call_rope(ctx, *spec, {Position::uniform(a + bpos)}, 1, x);
  if (!g || !h) return ctx.skip();
  const RopeExact e = rope_exact(r);
  const Bounds b = bounds_of(ctx.target);
  const auto Ey = rope_bounds(b, r, e, Position::uniform(a), x);
  const auto Eg = rope_bounds(b, r, e, Position::uniform(bpos), v);
  const auto Eh = rope_bounds(b, r, e, Position::uniform(a + bpos), x);
  double worst = 0;
  std::string what;
  for (int j = 0; j < e.P; ++j) {
    const auto [ia, ib] = pair_channels(r, j);
    const auto p = static_cast<std::size_t>(ia), q = static_cast<std::size_t>(ib);
    const double d = std::hypot((*g)[p] - e.att * (*h)[p], (*g)[q] - e.att * (*h)[q]);
    const double tol = Eg[p] + Eg[q] + e.att * (Ey[p] + Ey[q] + std::fabs(rr[p]) + std::fabs(rr[q])) +
                       e.att * (Eh[p] + Eh[q]) + 4 * kU64 * e.att * (std::fabs((*h)[p]) + std::fabs((*h)[q]));
    const double mg = ratio(d, tol);
    if (!(mg <= worst)) worst = mg, what = "pair " + std::to_string(j) + " differs by " + num(d);
  }
  for (int c = e.block; c < e.D; ++c) {
    const auto cc = static_cast<std::size_t>(c);
    const double mg = ratio(std::fabs((*g)[cc] - (*h)[cc]), Eg[cc] + std::fabs(rr[cc]) + Ey[cc] + Eh[cc]);
    if (!(mg <= worst)) worst = mg, what = "pass-through channel " + std::to_string(c);
  }
  ctx.check(worst,
            describe_spec(*spec) + "; head_dim " + std::to_string(r.head_dim) + "; x " + vec_brief(x) + "; " +
                (inverse ? "f(f(x," + std::to_string(a) + ")," + std::to_string(bpos) + ") vs att^2 x"
                         : "f(f(x," + std::to_string(a) + ")," + std::to_string(bpos) + ") vs att f(x," +
                               std::to_string(a + bpos) + ")") +
                ": " + what,
            a + std::max<std::int64_t>(bpos, 0), *spec);
}
void prop_composition(Ctx& ctx) { composition_case(ctx, false); }
void prop_inverse(Ctx& ctx) {
  if (!ctx.target.info().negative_positions) return ctx.decline(), ctx.skip();  // a capability it lacks
  composition_case(ctx, true);
}

// ---------------------------------------------------------------- matrix view of the target
// Statement: the target's own matrix C(m) (columns f(e_i, m), rows of the rotated block divided by
// att) is orthogonal, det C = 1, and f(x, m) = C(m) x (the elementwise view equals the matrix view).
// Tolerance: column i has error vector bounded by Ê_i (the element bounds of input e_i, divided by
// att on the block): |(C^T C - I)_ij| <= ||Ê_i|| + ||Ê_j|| + ||Ê_i|| ||Ê_j|| + 2 (D + 2) u64 sum |C_ki C_kj|;
// det(R + E) = det(I + R^T E) with ||R^T E||_2 <= ||E||_F: |det C - 1| <= (1 + ||Ê||_F)^D - 1 + 16 D u64;
// |f(x)_k - (C x)_k| <= E^x_k + sum_i |x_i| E^C_ki s_k + 2 (D + 2) u64 sum_i |C_ki x_i| s_k (s_k = att or 1).
void prop_matrix_orthogonal(Ctx& ctx) {
  const auto spec = rope_spec_for(ctx);
  if (!spec) return ctx.skip();
  const RopeSpec& r = spec->rope;
  const std::int64_t m = *gen::position(max_pos(ctx));
  const int D = r.head_dim;
  const auto Du = static_cast<std::size_t>(D);
  std::vector<double> I(Du * Du, 0.0);
  for (std::size_t i = 0; i < Du; ++i) I[i * Du + i] = 1.0;
  const auto x = *gen::bf16_vector(D);
  const auto cols = call_rope(ctx, *spec, {Position::uniform(m)}, D, I);
  const auto y = call_rope(ctx, *spec, {Position::uniform(m)}, 1, x);
  if (!cols || !y) return ctx.skip();
  const RopeExact e = rope_exact(r);
  const Bounds b = bounds_of(ctx.target);
  Eigen::MatrixXd C(D, D), EC(D, D);
  std::vector<double> scale(Du);
  for (std::size_t k = 0; k < Du; ++k) scale[k] = static_cast<int>(k) < e.block ? e.att : 1.0;
  for (std::size_t i = 0; i < Du; ++i) {
    const auto Ei = rope_bounds(b, r, e, Position::uniform(m), row(I, i, Du));
    for (std::size_t k = 0; k < Du; ++k) {
      C(static_cast<Eigen::Index>(k), static_cast<Eigen::Index>(i)) = (*cols)[i * Du + k] / scale[k];
      EC(static_cast<Eigen::Index>(k), static_cast<Eigen::Index>(i)) = Ei[k] / scale[k];
    }
  }
  const std::string where = describe_spec(*spec) + "; head_dim " + std::to_string(D) + "; m " + std::to_string(m);
  // C^T C = I
  const Eigen::MatrixXd G = C.transpose() * C;
  const Eigen::MatrixXd Gabs = C.cwiseAbs().transpose() * C.cwiseAbs();
  Eigen::VectorXd en(D);
  for (Eigen::Index i = 0; i < D; ++i) en(i) = EC.col(i).norm();
  double worst = 0;
  std::string what;
  for (Eigen::Index i = 0; i < D; ++i)
    for (Eigen::Index j = 0; j < D; ++j) {
      const double tol = en(i) + en(j) + en(i) * en(j) + 2.0 * (D + 2) * kU64 * Gabs(i, j) + 4 * kU64;
      const double mg = ratio(std::fabs(G(i, j) - (i == j ? 1.0 : 0.0)), tol);
      if (!(mg <= worst)) worst = mg, what = "(C^T C)[" + std::to_string(i) + "][" + std::to_string(j) + "] = " + num(G(i, j));
    }
  ctx.check(worst, where + ": " + what, m, *spec);
  // det C = 1
  const double ef = EC.norm();
  const double det = C.partialPivLu().determinant();
  const double det_tol = std::expm1(D * std::log1p(ef)) + 16.0 * D * kU64;
  ctx.check(ratio(std::fabs(det - 1), det_tol), where + ": det C(m) = " + num(det), m, *spec);
  // f(x) = C x
  const auto Ex = rope_bounds(b, r, e, Position::uniform(m), x);
  worst = 0;
  for (std::size_t k = 0; k < Du; ++k) {
    double cx = 0, abs_sum = 0, et = 0;
    for (std::size_t i = 0; i < Du; ++i) {
      const double cki = C(static_cast<Eigen::Index>(k), static_cast<Eigen::Index>(i));
      cx += cki * x[i];
      abs_sum += std::fabs(cki * x[i]);
      et += std::fabs(x[i]) * EC(static_cast<Eigen::Index>(k), static_cast<Eigen::Index>(i));
    }
    const double tol = Ex[k] + scale[k] * (et + 2.0 * (D + 2) * kU64 * abs_sum);
    const double mg = ratio(std::fabs((*y)[k] - scale[k] * cx), tol);
    if (!(mg <= worst)) worst = mg, what = "channel " + std::to_string(k) + ": f(x) = " + num((*y)[k]) + ", C x = " + num(scale[k] * cx);
  }
  ctx.check(worst, where + "; x " + vec_brief(x) + ": " + what, m, *spec);
}

// ---------------------------------------------------------------- sinusoidal shift map
// Statement: PE(t + k) = A_k PE(t) with the exact A_k (independent of t: two different t), and the
// target's rows have (sin, cos) pairs of length 1 (what A_k's orthogonality asks of them).
// Tolerance: (A_k PE(t))_c is a 2-term combination with coefficients |cos|, |sin| <= 1:
// |PE(t+k)_c - (A_k PE(t))_c| <= E_c(t+k) + sum_i |A_ci| E_i(t) + 4 u64 sum_i |A_ci PE_i(t)|
// (A_k's entries are rounded once to binary64).
void prop_sinusoidal_shift(Ctx& ctx) {
  const auto spec = sinusoidal_spec_for(ctx, true);
  if (!spec) return ctx.skip();
  const SinusoidalSpec& s = spec->sinusoidal;
  const SinExact e = sin_exact(s);
  if (!sine_cosine_paired(e)) return ctx.skip();  // odd Vaswani width: no t-independent map exists
  const std::int64_t mx = max_pos(ctx);
  const std::int64_t t1 = *gen::position(mx), t2 = *gen::position(mx);
  const std::int64_t k = *rc::gen::inRange<std::int64_t>(0, mx - std::max(t1, t2) + 1);
  const auto pe = call_sin(ctx, *spec, {t1, t1 + k, t2, t2 + k});
  if (!pe) return ctx.skip();
  // A_k (reference/matrix_view.hpp, sinusoidal_shift_map) built from its exact entries cos(k w_i),
  // sin(k w_i), each rounded once to binary64.
  Eigen::MatrixXd A = Eigen::MatrixXd::Zero(e.d, e.d);
  {
    ScopedPrecision prec(working_precision_bits(53, sinusoidal_max_abs_angle(s, k)));
    const std::vector<Real> w = sinusoidal_frequencies<Real>(s);
    std::vector<int> sc(w.size(), -1), cc(w.size(), -1);
    for (int c = 0; c < e.d; ++c) {
      const SinusoidalColumn& col = e.cols[static_cast<std::size_t>(c)];
      if (col.kind == SinusoidalKind::zero) A(c, c) = 1;
      if (col.kind == SinusoidalKind::sine) sc[static_cast<std::size_t>(col.frequency)] = c;
      if (col.kind == SinusoidalKind::cosine) cc[static_cast<std::size_t>(col.frequency)] = c;
    }
    const Real kk = from_int<Real>(k);
    for (std::size_t i = 0; i < w.size(); ++i) {
      const double ck = to_f64(cos(kk * w[i])), sk = to_f64(sin(kk * w[i]));
      A(sc[i], sc[i]) = ck;
      A(sc[i], cc[i]) = sk;
      A(cc[i], cc[i]) = ck;
      A(cc[i], sc[i]) = -sk;
    }
  }
  const Bounds b = bounds_of(ctx.target);
  const auto d = static_cast<std::size_t>(e.d);
  const std::string where = describe_spec(*spec) + "; d_model " + std::to_string(e.d) + "; k " + std::to_string(k);
  for (std::size_t pass = 0; pass < 2; ++pass) {
    const std::int64_t t = pass == 0 ? t1 : t2;
    const auto Et = sin_bounds(b, s, e, t), Etk = sin_bounds(b, s, e, t + k);
    const auto pt = row(*pe, 2 * pass, d), ptk = row(*pe, 2 * pass + 1, d);
    double worst = 0;
    std::string what;
    for (std::size_t c = 0; c < d; ++c) {
      double v = 0, et = 0, abs_sum = 0;
      for (std::size_t i = 0; i < d; ++i) {
        const double aci = A(static_cast<Eigen::Index>(c), static_cast<Eigen::Index>(i));
        v += aci * pt[i];
        et += std::fabs(aci) * Et[i];
        abs_sum += std::fabs(aci * pt[i]);
      }
      const double mg = ratio(std::fabs(ptk[c] - v), Etk[c] + et + 4 * kU64 * abs_sum);
      if (!(mg <= worst)) worst = mg, what = "column " + std::to_string(c) + ": PE(t+k) = " + num(ptk[c]) + ", A_k PE(t) = " + num(v);
    }
    ctx.check(worst, where + "; t " + std::to_string(t) + ": " + what, t + k, *spec);
  }
  // A_k is orthogonal, so the map preserves each (sin, cos) pair's length; what that requires of the
  // target is that every such pair of its rows has length 1. (A check of A_k^T A_k = I itself would test
  // this function's own MPFR matrix, never the target: audit-2 L1.) Tolerance: the pair's error vector
  // has 2-norm <= E_sin + E_cos; the check's squares and sqrt add 4 u64.
  double worst_len = 0;
  std::string what_len;
  std::int64_t len_pos = t1;
  for (std::size_t r = 0; r < 4; ++r) {
    const std::int64_t t = r == 0 ? t1 : (r == 1 ? t1 + k : (r == 2 ? t2 : t2 + k));
    const auto Et = sin_bounds(b, s, e, t);
    const auto pr = row(*pe, r, d);
    std::vector<int> sc(e.w.size(), -1), cc(e.w.size(), -1);
    for (int c = 0; c < e.d; ++c) {
      const SinusoidalColumn& col = e.cols[static_cast<std::size_t>(c)];
      if (col.kind == SinusoidalKind::sine) sc[static_cast<std::size_t>(col.frequency)] = c;
      if (col.kind == SinusoidalKind::cosine) cc[static_cast<std::size_t>(col.frequency)] = c;
    }
    for (std::size_t i = 0; i < e.w.size(); ++i) {
      const auto a = static_cast<std::size_t>(sc[i]), c = static_cast<std::size_t>(cc[i]);
      const double mg = ratio(std::fabs(std::hypot(pr[a], pr[c]) - 1.0), Et[a] + Et[c] + 4 * kU64);
      if (!(mg <= worst_len))
        worst_len = mg, len_pos = t,
        what_len = "t " + std::to_string(t) + ", frequency " + std::to_string(i) + ": |(sin, cos)| = " + num(std::hypot(pr[a], pr[c]));
    }
  }
  ctx.check(worst_len, where + ": a (sin, cos) pair of the target's rows is not of length 1 (A_k orthogonal): " + what_len,
            len_pos, *spec);
}

// ---------------------------------------------------------------- uniqueness
// Statement: E(t) != E(t') for t != t' in a window of W = 16 positions (stride 1, 2 or 7) wherever
// the error model says the exact rows are distinguishable; the smallest separation and the first
// colliding pair (identical rows) are reported.
// Derivation: per coordinate c, the exact separation d*_c = |E*_c(t) - E*_c(t')| satisfies
// d*_c <= d_c + E_c(t) + E_c(t') (d_c the target's separation). d*_c is bounded below with binary64
// rows r: d*_c >= |r_c(t) - r_c(t')| - F_c(t) - F_c(t') (F the fp64-angle bound). Margin per pair:
// max_c (lower d*_c - d_c) / (E_c(t) + E_c(t')); a collision (d = 0) where some coordinate's exact rows
// differ by more than both bounds fails: a correct target of class X never merges such rows.
void prop_uniqueness(Ctx& ctx) {
  const bool rope = ctx.fixed ? ctx.fixed->family == Family::rope : *rc::gen::element(true, true, false);
  const EncodingSpec spec = ctx.fixed ? *ctx.fixed : (rope ? *gen::rope_spec() : *gen::sinusoidal_spec(false));
  constexpr int W = 16;
  const std::int64_t stride = *rc::gen::element<std::int64_t>(1, 2, 7);
  const std::int64_t mx = max_pos(ctx);
  const std::int64_t p0 = std::min(*gen::position(mx), std::max<std::int64_t>(0, mx - stride * (W - 1)));
  std::vector<std::int64_t> ts;
  for (int i = 0; i < W; ++i) ts.push_back(p0 + stride * i);
  std::vector<std::vector<double>> rows, ref, E, F;
  const Bounds b = bounds_of(ctx.target);
  std::size_t n = 0;
  std::string where;
  if (rope) {
    const RopeSpec& r = spec.rope;
    const auto x = *gen::bf16_vector(r.head_dim);
    std::vector<Position> pos;
    std::vector<double> xs;
    for (auto t : ts) pos.push_back(Position::uniform(t)), xs.insert(xs.end(), x.begin(), x.end());
    const auto y = call_rope(ctx, spec, pos, 1, xs);
    if (!y) return ctx.skip();
    const RopeExact e = rope_exact(r);
    n = static_cast<std::size_t>(r.head_dim);
    for (std::size_t i = 0; i < ts.size(); ++i) {
      const auto row_i = row(*y, i, n);
      rows.emplace_back(row_i.begin(), row_i.end());
      ref.push_back(rope_f64(r, e, pos[i], x));
      E.push_back(rope_bounds(b, r, e, pos[i], x));
      F.push_back(rope_bounds(fp64_bounds(), r, e, pos[i], x));
    }
    where = describe_spec(spec) + "; head_dim " + std::to_string(r.head_dim) + "; x " + vec_brief(x);
  } else {
    const SinusoidalSpec& s = spec.sinusoidal;
    const auto pe = call_sin(ctx, spec, ts);
    if (!pe) return ctx.skip();
    const SinExact e = sin_exact(s);
    n = static_cast<std::size_t>(s.d_model);
    for (std::size_t i = 0; i < ts.size(); ++i) {
      const auto row_i = row(*pe, i, n);
      rows.emplace_back(row_i.begin(), row_i.end());
      ref.push_back(sin_f64(s, e, ts[i]));
      E.push_back(sin_bounds(b, s, e, ts[i]));
      F.push_back(sin_bounds(fp64_bounds(), s, e, ts[i]));
    }
    where = describe_spec(spec) + "; d_model " + std::to_string(s.d_model);
  }
  double worst = 0;
  std::string what;
  std::int64_t worst_pos = p0;
  for (std::size_t i = 0; i < ts.size(); ++i)
    for (std::size_t j = i + 1; j < ts.size(); ++j) {
      double sep = 0, mg = 0;
      bool distinct = false;  // the exact rows provably differ
      for (std::size_t c = 0; c < n; ++c) {
        const double d = std::fabs(rows[i][c] - rows[j][c]);
        sep = std::max(sep, d);
        const double lower = std::fabs(ref[i][c] - ref[j][c]) - F[i][c] - F[j][c] - 2 * kU64 * (std::fabs(ref[i][c]) + std::fabs(ref[j][c]));
        distinct |= lower > 0;
        const double m = ratio(std::max(0.0, lower - d), E[i][c] + E[j][c]);
        if (!(m <= mg)) mg = m;
      }
      if (!distinct) continue;  // (x = 0, or rows equal in exact arithmetic: nothing to separate)
      if (ctx.counting && (ctx.min_separation < 0 || sep < ctx.min_separation)) ctx.min_separation = sep;
      if (sep == 0 && ctx.counting && (!ctx.first_collision || ts[j] < ctx.first_collision->second))
        ctx.first_collision = std::make_pair(ts[i], ts[j]);
      if (!(mg <= worst))
        worst = mg, worst_pos = ts[j],
        what = "rows at " + std::to_string(ts[i]) + " and " + std::to_string(ts[j]) +
               (sep == 0 ? " are identical" : " are " + num(sep) + " apart") + " but the exact rows are distinguishable";
    }
  ctx.check(worst, where + "; window " + std::to_string(p0) + " + " + std::to_string(stride) + "i: " + what, worst_pos, spec);
}

// ---------------------------------------------------------------- RoFormer long-range decay
// Statement: the RoFormer relative upper bound R(r) = (1/P) sum_{j=1}^{P} |S_j(r)|,
// S_j = sum_{k<j} e^{i r w_k}, computed from the target's outputs (x = 1 on the first channel of
// every pair: y = att (cos, sin)) matches the exact curve (which never exceeds its start R(0) = (P+1)/2;
// the curve itself oscillates, so no monotonicity is asserted).
// Tolerance: |e^{i r w_k} estimate - exact| <= d_k = (E_a,k + E_b,k) / att (+ 2 u64), so
// | |Ŝ_j| - |S_j| | <= sum_{k<j} d_k and |R̂ - R| <= (1/P) sum_j sum_{k<j} d_k + 2 (P + 4)^2 u64.
std::vector<double> unit_pairs_input(const RopeSpec& r) {
  std::vector<double> x(static_cast<std::size_t>(r.head_dim), 0.0);
  for (int j = 0; j < rope_pairs(r); ++j) x[static_cast<std::size_t>(pair_channels(r, j).first)] = 1.0;
  return x;
}
void prop_roformer_decay(Ctx& ctx) {
  const auto spec = rope_spec_for(ctx);
  if (!spec) return ctx.skip();
  const RopeSpec& r = spec->rope;
  const std::int64_t dist = *gen::position(max_pos(ctx));
  const auto x = unit_pairs_input(r);
  const auto y = call_rope(ctx, *spec, {Position::uniform(dist)}, 1, x);
  if (!y) return ctx.skip();
  const RopeExact e = rope_exact(r);
  const auto E = rope_bounds(bounds_of(ctx.target), r, e, Position::uniform(dist), x);
  std::vector<double> ce(static_cast<std::size_t>(e.P)), se(ce.size());
  {
    ScopedPrecision prec(working_precision_bits(53, rope_max_abs_angle(r, std::nullopt, dist)));
    std::vector<Real> c, s;
    rope_cos_sin<Real>(r, rope_frequencies<Real>(r), Position::uniform(dist), c, s);
    for (std::size_t j = 0; j < ce.size(); ++j) ce[j] = to_f64(c[j]), se[j] = to_f64(s[j]);
  }
  double re = 0, im = 0, rex = 0, imx = 0, R = 0, Rx = 0, acc = 0, tol_sum = 0;
  for (int j = 0; j < e.P; ++j) {
    const auto [ia, ib] = pair_channels(r, j);
    re += (*y)[static_cast<std::size_t>(ia)] / e.att;
    im += (*y)[static_cast<std::size_t>(ib)] / e.att;
    rex += ce[static_cast<std::size_t>(j)];
    imx += se[static_cast<std::size_t>(j)];
    acc += (E[static_cast<std::size_t>(ia)] + E[static_cast<std::size_t>(ib)]) / e.att + 2 * kU64;
    tol_sum += acc;
    R += std::hypot(re, im);
    Rx += std::hypot(rex, imx);
  }
  const double P = e.P;
  R /= P;
  Rx /= P;
  const double tol = tol_sum / P + 2 * (P + 4) * (P + 4) * kU64;
  const std::string where = describe_spec(*spec) + "; pairs " + std::to_string(e.P) + "; distance " + std::to_string(dist);
  // (No separate R <= R(0) check: the exact curve never exceeds R(0) = (P+1)/2, since |S_j| <= j, so
  // R <= R(0) + tol follows from the check below by the triangle inequality and could never fail on its
  // own: audit-2 L1.)
  ctx.check(ratio(std::fabs(R - Rx), tol), where + ": relative upper bound " + num(R) + ", exact " + num(Rx), dist, *spec);
}

// ---------------------------------------------------------------- sinusoidal dot product
// Statement: PE(t).PE(t+k) = C(k) = sum_i cos(k w_i): independent of t (two t), even in k
// (PE(t).PE(t-k)), and C(0) = d/2 (the number of frequencies).
// Tolerance: dot_tolerance of the two rows (table bounds E, M = 1) + 2 u64 |C(k)|.
void prop_sinusoidal_dot(Ctx& ctx) {
  const auto spec = sinusoidal_spec_for(ctx, true);
  if (!spec) return ctx.skip();
  const SinusoidalSpec& s = spec->sinusoidal;
  const SinExact e = sin_exact(s);
  if (!sine_cosine_paired(e)) return ctx.skip();
  const std::int64_t mx = max_pos(ctx);
  const std::int64_t t1 = *gen::position(mx), t2 = *gen::position(mx);
  const std::int64_t k = *rc::gen::inRange<std::int64_t>(0, mx - std::max(t1, t2) + 1);
  std::vector<std::int64_t> ts = {t1, t1 + k, t2, t2 + k};
  const bool back = t1 >= k;
  if (back) ts.push_back(t1 - k);
  const auto pe = call_sin(ctx, *spec, ts);
  if (!pe) return ctx.skip();
  double Ck = 0;
  {
    ScopedPrecision prec(working_precision_bits(53, sinusoidal_max_abs_angle(s, k)));
    Real sum = 0;
    for (const Real& w : sinusoidal_frequencies<Real>(s)) sum += cos(Real(static_cast<long long>(k)) * w);
    Ck = to_f64(sum);
  }
  const double C0 = static_cast<double>(e.w.size());
  const Bounds b = bounds_of(ctx.target);
  const auto d = static_cast<std::size_t>(e.d);
  const std::string where = describe_spec(*spec) + "; d_model " + std::to_string(e.d) + "; k " + std::to_string(k);
  auto one = [&](std::size_t i, std::size_t j, double exact, const std::string& label) {
    const auto Ei = sin_bounds(b, s, e, ts[i]), Ej = sin_bounds(b, s, e, ts[j]);
    const double v = dot(row(*pe, i, d), row(*pe, j, d));
    ctx.check(ratio(std::fabs(v - exact), dot_tolerance(row(*pe, i, d), Ei, row(*pe, j, d), Ej, exact)),
              where + ": " + label + " = " + num(v) + ", exact " + num(exact), std::max(ts[i], ts[j]), *spec);
  };
  one(0, 1, Ck, "PE(" + std::to_string(t1) + ").PE(t+k)");
  one(2, 3, Ck, "PE(" + std::to_string(t2) + ").PE(t+k)");
  one(0, 0, C0, "PE(t).PE(t)");
  if (back) one(0, 4, Ck, "PE(" + std::to_string(t1) + ").PE(t-k)");
}

// ---------------------------------------------------------------- base bounds context length
// Statement: B(m) = sum_j cos(m w_j) from the target (x = 1 on the first channel of every pair:
// y_a = att cos) equals the exact sum; the first m with B(m) < 0 is reported per spec.
// Tolerance: sum_j E_a,j / att + 2 (P + 2) u64 P.
void prop_cosine_sum(Ctx& ctx) {
  const auto spec = rope_spec_for(ctx);
  if (!spec) return ctx.skip();
  const RopeSpec& r = spec->rope;
  const std::int64_t m = *gen::position(max_pos(ctx));
  const auto x = unit_pairs_input(r);
  const auto y = call_rope(ctx, *spec, {Position::uniform(m)}, 1, x);
  if (!y) return ctx.skip();
  const RopeExact e = rope_exact(r);
  const auto E = rope_bounds(bounds_of(ctx.target), r, e, Position::uniform(m), x);
  double B = 0, tol = 0, Bx = 0;
  for (int j = 0; j < e.P; ++j) {
    const auto a = static_cast<std::size_t>(pair_channels(r, j).first);
    B += (*y)[a] / e.att;
    tol += E[a] / e.att + 2 * kU64;
  }
  {
    ScopedPrecision prec(working_precision_bits(53, rope_max_abs_angle(r, std::nullopt, m)));
    std::vector<Real> c, s;
    rope_cos_sin<Real>(r, rope_frequencies<Real>(r), Position::uniform(m), c, s);
    Real sum = 0;
    for (const Real& v : c) sum += v;
    Bx = to_f64(sum);
  }
  tol += 2.0 * (e.P + 2) * kU64 * e.P;
  ctx.check(ratio(std::fabs(B - Bx), tol),
            describe_spec(*spec) + "; pairs " + std::to_string(e.P) + "; m " + std::to_string(m) + ": sum cos = " + num(B) +
                ", exact " + num(Bx),
            m, *spec);
}

// ---------------------------------------------------------------- heads
// Statement: a head's output depends only on its own input and position, not on the other heads of
// the call, their number, its place among them, or whether it is passed as q or as k: the same
// vectors (two tokens) rotated as head i1 of h1 heads (input "q") and as head i2 of h2 heads (input
// "k", other neighbours) agree.
// Tolerance: both are within E_c of the same exact value (the class bound at that token's position):
// 2 E_c per channel.
void prop_head_independence(Ctx& ctx) {
  const auto spec = rope_spec_for(ctx);
  if (!spec) return ctx.skip();
  const RopeSpec& r = spec->rope;
  const auto D = static_cast<std::size_t>(r.head_dim);
  const std::int64_t mx = max_pos(ctx);
  const std::vector<Position> pos = {Position::uniform(*gen::position(mx)), Position::uniform(*gen::position(mx))};
  const int h1 = *rc::gen::inRange(2, 5), h2 = *rc::gen::inRange(1, 5);
  const int i1 = *rc::gen::inRange(0, h1), i2 = *rc::gen::inRange(0, h2);
  // The watched head at tokens 0 and 1. Not shrunk (the failing channel is named; shrinking 2 D values
  // through calls of up to 8 heads costs a minute at head_dim 256).
  const auto x = *rc::gen::noShrink(gen::bf16_vector(2 * r.head_dim));
  auto embed = [&](int H, int i) {
    std::vector<double> xs = *rc::gen::noShrink(gen::bf16_vector(2 * H * r.head_dim));  // neighbours: not shrunk
    for (std::size_t t = 0; t < 2; ++t)
      std::copy_n(x.begin() + static_cast<std::ptrdiff_t>(t * D), D,
                  xs.begin() + static_cast<std::ptrdiff_t>((t * static_cast<std::size_t>(H) + static_cast<std::size_t>(i)) * D));
    return xs;
  };
  const auto xa = embed(h1, i1), xb = embed(h2, i2);
  const auto ya = call_rope_raw(ctx, *spec, "q", pos, h1, xa), yb = call_rope_raw(ctx, *spec, "k", pos, h2, xb);
  if (!ya || !yb) return ctx.skip();
  const RopeExact e = rope_exact(r);
  const Bounds b = bounds_of(ctx.target);
  double worst = 0;
  std::string what;
  std::int64_t wpos = pos[0].t;
  for (std::size_t t = 0; t < 2; ++t) {
    const auto E = rope_bounds(b, r, e, pos[t], row(x, t, D));
    const std::size_t oa = (t * static_cast<std::size_t>(h1) + static_cast<std::size_t>(i1)) * D;
    const std::size_t ob = (t * static_cast<std::size_t>(h2) + static_cast<std::size_t>(i2)) * D;
    for (std::size_t c = 0; c < D; ++c) {
      const double mg = ratio(std::fabs((*ya)[oa + c] - (*yb)[ob + c]), 2 * E[c]);
      if (!(mg <= worst))
        worst = mg, wpos = pos[t].t,
        what = "token " + std::to_string(t) + " (position " + std::to_string(pos[t].t) + "), channel " + std::to_string(c) +
               ": " + num((*ya)[oa + c]) + " as q head " + std::to_string(i1) + " of " + std::to_string(h1) + ", " +
               num((*yb)[ob + c]) + " as k head " + std::to_string(i2) + " of " + std::to_string(h2);
    }
  }
  ctx.check(worst, describe_spec(*spec) + "; head_dim " + std::to_string(r.head_dim) + "; x " + vec_brief(x) + ": " + what,
            wpos, *spec);
}

// ---------------------------------------------------------------- pair norms (shared by norm and attention_factor)
// ||(y_a, y_b)|| = att ||(x_a, x_b)|| per pair, pass-through channels unchanged, with the angle-free
// tolerance E0_a + E0_b + 4 u64 M per pair (the check's own squares, sqrt and att product) and E0_c
// per pass-through channel. Returns the worst margin and what it was.
std::pair<double, std::string> pair_norm_margin(const Target& target, const RopeSpec& r, const std::vector<double>& x,
                                                const std::vector<double>& y) {
  const RopeExact e = rope_exact(r);
  const auto E0 = rope_bounds_angle_free(bounds_of(target), r, e, x);
  double worst = 0;
  std::string what;
  for (int j = 0; j < e.P; ++j) {
    const auto [ia, ib] = pair_channels(r, j);
    const auto a = static_cast<std::size_t>(ia), bb = static_cast<std::size_t>(ib);
    const double ny = std::hypot(y[a], y[bb]), nx = e.att * std::hypot(x[a], x[bb]);
    const double M = e.att * (std::fabs(x[a]) + std::fabs(x[bb]));
    const double mg = ratio(std::fabs(ny - nx), E0[a] + E0[bb] + 4 * kU64 * M);
    if (!(mg <= worst))
      worst = mg, what = "pair " + std::to_string(j) + ": |f(x,m)| = " + num(ny) + ", att |x| = " + num(nx) + " (att " +
                         num(e.att) + ", ratio |f(x,m)| / |x| = " + num(nx > 0 ? ny / (nx / e.att) : 0.0) + ")";
  }
  for (int c = e.block; c < e.D; ++c) {
    const auto cc = static_cast<std::size_t>(c);
    const double mg = ratio(std::fabs(y[cc] - x[cc]), E0[cc]);
    if (!(mg <= worst)) worst = mg, what = "pass-through channel " + std::to_string(c) + " changed";
  }
  return {worst, what};
}

// ---------------------------------------------------------------- attention factor
// Statement: on a spec whose attention factor att is not 1, every rotated pair's norm is att times the
// input pair's: ||(y_a, y_b)|| = att ||(x_a, x_b)||. The spec itself when its att != 1 (YaRN without
// mscale_all_dim = mscale, LongRoPE); else its YaRN variant (factor 8, original length
// max_position_embeddings (4096 if unset), no mscale keys: att = 0.1 ln 8 + 1 = 1.2079). A kernel that
// drops the factor is off by 1/att - 1 = -17%, one that applies it twice by att - 1 = +21%, at every
// position and on every preset.
// Tolerance: angle-free (a phase error does not change a norm; ERROR_MODEL.md section 14):
// E0_a + E0_b + 4 u64 M per pair.
std::optional<EncodingSpec> with_attention_factor(const EncodingSpec& spec) {
  if (rope_exact(spec.rope).att != 1.0) return spec;
  if (spec.rope.scaling.type == ScalingType::proportional) return std::nullopt;
  EncodingSpec y = spec;
  y.rope.scaling = RopeScaling{};
  y.rope.scaling.type = ScalingType::yarn;
  y.rope.scaling.factor = 8.0;
  y.rope.scaling.original_max_position_embeddings =
      y.rope.max_position_embeddings > 0 ? y.rope.max_position_embeddings : 4096;
  y.name += "+yarn8";
  try {
    validate(y);
  } catch (const SpecError&) {
    return std::nullopt;
  }
  if (rope_exact(y.rope).att == 1.0) return std::nullopt;
  return y;
}
void prop_attention_factor(Ctx& ctx) {
  const auto spec0 = rope_spec_for(ctx);
  if (!spec0) return ctx.skip();
  const auto spec = with_attention_factor(*spec0);
  if (!spec) return ctx.skip();
  const RopeSpec& r = spec->rope;
  const std::int64_t m = *gen::position(max_pos(ctx));
  // Not shrunk: the failing pair and its ratio |f(x)| / |x| are named (shrinking 256 values costs seconds).
  const auto x = *rc::gen::noShrink(gen::bf16_vector(r.head_dim));
  const auto y = call_rope(ctx, *spec, {Position::uniform(m)}, 1, x);
  if (!y) return ctx.skip();
  const auto [worst, what] = pair_norm_margin(ctx.target, r, x, *y);
  ctx.check(worst, describe_spec(*spec) + "; head_dim " + std::to_string(r.head_dim) + "; x " + vec_brief(x) + "; m " +
                       std::to_string(m) + ": " + what,
            m, *spec);
}

// ---------------------------------------------------------------- store rounding
// Statement: a result stored in a narrow dtype is the exact value's neighbour that rounding to nearest
// gives, wherever the class's error before the store is small against the dtype's spacing. The target
// computes y_pre with |y_pre - y*| <= E_pre (its class bound for a binary64 result: every term but the
// store's u_dt; rope_bounds with class_bound(class, f64)) and stores RN(y_pre), within half a spacing of
// y_pre: |stored - y*| <= E_pre + ulp_dt(|y*| + E_pre) / 2 (+ 2 u64 |y*| for the exact value's own
// binary64 rounding). A truncating store is off by up to a whole spacing and fails wherever y* lies in
// the upper half of its interval.
// Discrimination: an element counts where E_pre < ulp_dt(|y*|) / 4; a case with no such element is
// skipped (f32 / f64 outputs of the fp32-angle class, table classes: their own rounding before the store
// is as large as the store's, so the class does not allow the check; the exact class is checked to
// 0.5 ulp by every property).
void prop_store_rounding(Ctx& ctx) {
  const AccuracyClass cls = ctx.target.info().accuracy;
  const DType dt = ctx.target.info().dtype;
  if (cls == AccuracyClass::exact) return ctx.skip();
  const auto spec = rope_spec_for(ctx);
  if (!spec) return ctx.skip();
  const RopeSpec& r = spec->rope;
  const std::int64_t m = *gen::position(max_pos(ctx));
  const auto x = *rc::gen::noShrink(gen::bf16_vector(r.head_dim));  // not shrunk: the failing channel is named
  const auto y = call_rope(ctx, *spec, {Position::uniform(m)}, 1, x);
  if (!y) return ctx.skip();
  const RopeExact e = rope_exact(r);
  const auto Epre = rope_bounds(bounds_of(cls, DType::f64), r, e, Position::uniform(m), x);
  std::vector<double> exact, nearest;
  {
    ScopedPrecision prec(working_precision_bits(53, rope_max_abs_angle(r, std::nullopt, m)));
    const RopeFrequencies<Real> f = rope_frequencies<Real>(r);
    const std::vector<Real> xr(x.begin(), x.end());
    for (const Real& v : rope_apply<Real>(r, f, Position::uniform(m), xr))
      exact.push_back(to_f64(v)), nearest.push_back(round_to_double(v, dt));
  }
  double worst = 0;
  int counted = 0;
  std::string what;
  for (std::size_t c = 0; c < x.size(); ++c) {
    const double ye = exact[c], ae = std::fabs(ye);
    const double half = ulp(ae + Epre[c], dt) / 2;
    if (Epre[c] < ulp(ae, dt) / 4) ++counted;
    const double mg = ratio(std::fabs((*y)[c] - ye), Epre[c] + half + 2 * kU64 * ae);
    if (!(mg <= worst))
      worst = mg, what = "channel " + std::to_string(c) + " stored " + num((*y)[c]) + ", exact " + num(ye) +
                         ", nearest " + std::string(to_string(dt)) + " " + num(nearest[c]) +
                         " (spacing " + num(ulp(ae, dt)) + ")";
  }
  if (counted == 0) return ctx.skip();
  ctx.check(worst, describe_spec(*spec) + "; head_dim " + std::to_string(r.head_dim) + "; x " + vec_brief(x) + "; m " +
                       std::to_string(m) + "; output " + std::string(to_string(dt)) + ": " + what,
            m, *spec);
}

// ---------------------------------------------------------------- layout equivalence
// Statement: f_half(P x) = P f_interleaved(x), P the interleaved -> half-split channel permutation
// (the target run with both layouts of the same spec).
// Tolerance: angle-free, E0^half_k + E0^inter_{P^-1 k} (E0: the class bound without its angle term,
// ERROR_MODEL.md section 14). Both runs compute the same exact values (same pairs, same M), and a target
// forms a pair's angle θ̂ from its position and frequency alone, not from where the pair's channels
// sit: both runs rotate by the same θ̂, so their difference is made of the angle-free errors only.
EncodingSpec with_layout(EncodingSpec s, RopeLayout l) {
  s.rope.layout = l;
  return s;
}
void prop_layout_equivalence(Ctx& ctx) {
  const auto spec = rope_spec_for(ctx);
  if (!spec) return ctx.skip();
  const EncodingSpec sh = with_layout(*spec, RopeLayout::half_split), si = with_layout(*spec, RopeLayout::interleaved);
  const RopeSpec& r = spec->rope;
  const std::int64_t m = *gen::position(max_pos(ctx));
  const auto xi = *gen::bf16_vector(r.head_dim);
  const int block = rope_block_channels(r), half = block / 2;
  std::vector<int> perm(static_cast<std::size_t>(r.head_dim));  // interleaved channel i -> half-split channel
  for (int i = 0; i < r.head_dim; ++i) perm[static_cast<std::size_t>(i)] = i < block ? (i % 2) * half + i / 2 : i;
  std::vector<double> xh(xi.size());
  for (std::size_t i = 0; i < xi.size(); ++i) xh[static_cast<std::size_t>(perm[i])] = xi[i];
  const auto yh = call_rope(ctx, sh, {Position::uniform(m)}, 1, xh);
  const auto yi = call_rope(ctx, si, {Position::uniform(m)}, 1, xi);
  if (!yh || !yi) return ctx.skip();
  const RopeExact e = rope_exact(r);
  const Bounds b = bounds_of(ctx.target);
  const auto Eh = rope_bounds_angle_free(b, sh.rope, e, xh);
  const auto Ei = rope_bounds_angle_free(b, si.rope, e, xi);
  double worst = 0;
  std::string what;
  for (std::size_t i = 0; i < xi.size(); ++i) {
    const auto k = static_cast<std::size_t>(perm[i]);
    const double mg = ratio(std::fabs((*yh)[k] - (*yi)[i]), Eh[k] + Ei[i]);
    if (!(mg <= worst)) worst = mg, what = "interleaved channel " + std::to_string(i) + " = " + num((*yi)[i]) + ", half-split channel " + std::to_string(k) + " = " + num((*yh)[k]);
  }
  ctx.check(worst, describe_spec(*spec) + "; head_dim " + std::to_string(r.head_dim) + "; x " + vec_brief(xi) + "; m " + std::to_string(m) + ": " + what, m, *spec);
}

// ---------------------------------------------------------------- multimodal with equal streams
// Statement: multimodal RoPE at (p, p, p) equals 1-D RoPE at p (any sections, chunked or interleaved).
// Tolerance: the same exact value, and the same angle θ̂ = p w_j for every pair in both runs (the same
// position and frequency; the sections only choose which stream's position, all equal here): angle-free,
// 2 E0 per channel (ERROR_MODEL.md section 14).
// The spec itself when it is multimodal, else the spec with generated sections (chunked or
// interleaved); nullopt when those do not validate.
std::optional<EncodingSpec> with_mrope(const EncodingSpec& spec) {
  if (spec.rope.mrope != MropeMode::none) return spec;
  EncodingSpec mm = spec;
  const int P = rope_pairs(mm.rope);
  const int t = *rc::gen::inRange(0, P + 1);
  const int h = *rc::gen::inRange(0, P - t + 1);
  mm.rope.mrope = *rc::gen::element(MropeMode::chunked, MropeMode::interleaved);
  mm.rope.mrope_section = {t, h, P - t - h};
  try {
    validate(mm);
  } catch (const SpecError&) {
    return std::nullopt;
  }
  return mm;
}

void prop_mrope_equal_streams(Ctx& ctx) {
  const auto spec = rope_spec_for(ctx);
  if (!spec) return ctx.skip();
  const auto mm_opt = with_mrope(*spec);
  if (!mm_opt) return ctx.skip();
  const EncodingSpec& mm = *mm_opt;
  EncodingSpec plain = *spec;
  plain.rope.mrope = MropeMode::none;
  plain.rope.mrope_section = {0, 0, 0};
  const RopeSpec& r = plain.rope;
  const std::int64_t m = *gen::position(max_pos(ctx));
  const auto x = *gen::bf16_vector(r.head_dim);
  const auto y1 = call_rope(ctx, mm, {Position::uniform(m)}, 1, x);
  const auto y2 = call_rope(ctx, plain, {Position::uniform(m)}, 1, x);
  if (!y1 || !y2) return ctx.skip();
  const RopeExact e = rope_exact(r);
  const auto E = rope_bounds_angle_free(bounds_of(ctx.target), r, e, x);
  double worst = 0;
  std::size_t wc = 0;
  for (std::size_t c = 0; c < x.size(); ++c) {
    const double mg = ratio(std::fabs((*y1)[c] - (*y2)[c]), 2 * E[c]);
    if (!(mg <= worst)) worst = mg, wc = c;
  }
  const auto& sec = mm.rope.mrope_section;
  ctx.check(worst,
            describe_spec(mm) + "; head_dim " + std::to_string(r.head_dim) + "; sections [" + std::to_string(sec[0]) + "," +
                std::to_string(sec[1]) + "," + std::to_string(sec[2]) + "]; x " + vec_brief(x) + "; m " + std::to_string(m) +
                ": channel " + std::to_string(wc) + " = " + num((*y1)[wc]) + " with mrope, " + num((*y2)[wc]) + " without",
            m, mm);
}

// ---------------------------------------------------------------- multimodal streams
// Statement: with distinct t/h/w positions, every channel equals the exact reference (MPFR), each
// pair rotated by the position of the stream its section assigns (Qwen2-VL chunked, Qwen3-VL
// interleaved sections). This is what mrope_equal_streams cannot see: a swap of sections.
// Tolerance: the target's class bound E_c at each pair's own stream position and frequency (the
// checker's per-element verdict); the exact value is rounded to binary64 once (<= 2^-53 |y|,
// far inside E_c for every class but exact, where the target's own value is that rounding).
void prop_mrope_streams(Ctx& ctx) {
  const auto spec = rope_spec_for(ctx);
  if (!spec) return ctx.skip();
  const auto mm_opt = with_mrope(*spec);
  if (!mm_opt) return ctx.skip();
  const EncodingSpec& mm = *mm_opt;
  const RopeSpec& r = mm.rope;
  const std::int64_t mx = max_pos(ctx);
  const Position pos{*gen::position(mx), *gen::position(mx), *gen::position(mx)};
  const auto x = *gen::bf16_vector(r.head_dim);
  const auto y = call_rope(ctx, mm, {pos}, 1, x);
  if (!y) return ctx.skip();
  const RopeExact e = rope_exact(r);
  const auto E = rope_bounds(bounds_of(ctx.target), r, e, pos, x);
  const std::int64_t pmax = std::max({pos.t, pos.h, pos.w});
  std::vector<double> exact;
  {
    ScopedPrecision prec(working_precision_bits(53, rope_max_abs_angle(r, std::nullopt, pmax)));
    const RopeFrequencies<Real> f = rope_frequencies<Real>(r);
    const std::vector<Real> xr(x.begin(), x.end());
    for (const Real& v : rope_apply<Real>(r, f, pos, xr)) exact.push_back(to_f64(v));
  }
  double worst = 0;
  std::size_t wc = 0;
  for (std::size_t c = 0; c < x.size(); ++c) {
    const double mg = ratio(std::fabs((*y)[c] - exact[c]), E[c]);
    if (!(mg <= worst)) worst = mg, wc = c;
  }
  const auto& sec = r.mrope_section;
  ctx.check(worst,
            describe_spec(mm) + "; head_dim " + std::to_string(r.head_dim) + "; sections [" + std::to_string(sec[0]) + "," +
                std::to_string(sec[1]) + "," + std::to_string(sec[2]) + "]; x " + vec_brief(x) + "; t/h/w " +
                std::to_string(pos.t) + "/" + std::to_string(pos.h) + "/" + std::to_string(pos.w) + ": channel " +
                std::to_string(wc) + " = " + num((*y)[wc]) + ", exact " + num(exact[wc]),
            pmax, mm);
}

// ---------------------------------------------------------------- linear scaling
// Statement: linear scaling by an integer factor F at position F q equals no scaling at q (the
// angles are equal exactly: (w / F)(F q) = w q).
// Tolerance: E^linear(F q) + E^none(q) (each its own class bound at its own position and frequency).
// For F a power of two and F q < 2^24, angle-free: E0^linear + E0^none (ERROR_MODEL.md section 14). A
// target scales its frequency by 1/F (w / F, or 1 / (F w^-1)) and converts F q to its working format:
// with F = 2^k both are exact (scaling by a power of two commutes with rounding; F q < 2^24 is exact in
// f32), so its angle fl(fl(w)/F * F q) is bit for bit its angle fl(fl(w) * q) at q and only the angle-free
// errors differ. For other F the two angles round differently and the full bounds apply.
void prop_linear_scaling(Ctx& ctx) {
  const auto spec = rope_spec_for(ctx);
  if (!spec) return ctx.skip();
  EncodingSpec plain = *spec;
  if (plain.rope.scaling.type == ScalingType::proportional) return ctx.skip();
  plain.rope.scaling = RopeScaling{};
  EncodingSpec lin = plain;
  lin.rope.scaling.type = ScalingType::linear;
  const double given = spec->rope.scaling.type == ScalingType::linear ? *spec->rope.scaling.factor : 0.0;
  const std::int64_t F = given >= 2 && given == std::floor(given) && given < 1024 ? static_cast<std::int64_t>(given)
                                                                                   : *rc::gen::element<std::int64_t>(2, 4, 8, 3, 16);
  lin.rope.scaling.factor = static_cast<double>(F);
  const std::int64_t q = *gen::position(max_pos(ctx) / F);
  const auto x = *gen::bf16_vector(plain.rope.head_dim);
  const auto y1 = call_rope(ctx, lin, {Position::uniform(F * q)}, 1, x);
  const auto y2 = call_rope(ctx, plain, {Position::uniform(q)}, 1, x);
  if (!y1 || !y2) return ctx.skip();
  const Bounds b = bounds_of(ctx.target);
  const bool same_angle = (F & (F - 1)) == 0 && F * q < (std::int64_t{1} << 24);
  const auto E1 = same_angle ? rope_bounds_angle_free(b, lin.rope, rope_exact(lin.rope), x)
                             : rope_bounds(b, lin.rope, rope_exact(lin.rope), Position::uniform(F * q), x);
  const auto E2 = same_angle ? rope_bounds_angle_free(b, plain.rope, rope_exact(plain.rope), x)
                             : rope_bounds(b, plain.rope, rope_exact(plain.rope), Position::uniform(q), x);
  double worst = 0;
  std::size_t wc = 0;
  for (std::size_t c = 0; c < x.size(); ++c) {
    const double mg = ratio(std::fabs((*y1)[c] - (*y2)[c]), E1[c] + E2[c]);
    if (!(mg <= worst)) worst = mg, wc = c;
  }
  ctx.check(worst,
            describe_spec(lin) + "; head_dim " + std::to_string(plain.rope.head_dim) + "; x " + vec_brief(x) + "; factor " +
                std::to_string(F) + ", positions " + std::to_string(F * q) + " vs " + std::to_string(q) + ": channel " +
                std::to_string(wc) + " = " + num((*y1)[wc]) + " vs " + num((*y2)[wc]),
            F * q, lin);
}

// ---------------------------------------------------------------- YaRN frequencies
// Statement: every YaRN frequency lies between the interpolated one (w / factor) and the original
// w, measured from the target: w_j = atan2(y_b, y_a) at position 1 with x = 1 on the first channel of
// each pair (w_j <= 1 < pi, so atan2 returns it).
// Tolerance: the pair's chord error is <= eps = (E_a + E_b) / att, so the angle is off by
// <= 2 asin(eps / 2) <= (pi / 2) eps (eps <= 2); + 4 u64 for atan2 and the division.
void prop_yarn_frequencies(Ctx& ctx) {
  const auto spec0 = rope_spec_for(ctx);
  if (!spec0) return ctx.skip();
  EncodingSpec spec = *spec0;
  if (spec.rope.scaling.type != ScalingType::yarn) {
    if (ctx.fixed) {  // derive a YaRN variant of the fixed spec
      spec.rope.scaling = RopeScaling{};
      spec.rope.scaling.type = ScalingType::yarn;
      spec.rope.scaling.factor = 8.0;
      spec.rope.scaling.original_max_position_embeddings =
          spec.rope.max_position_embeddings > 0 ? spec.rope.max_position_embeddings : 4096;
      spec.name += "+yarn8";
    } else {
      EncodingSpec g;
      do g = *gen::rope_spec();  // (the generator makes YaRN specs 1 time in 14)
      while (g.rope.scaling.type != ScalingType::yarn && *rc::gen::element(true, true, true, false));
      if (g.rope.scaling.type != ScalingType::yarn) return ctx.skip();
      spec = g;
    }
  }
  const RopeSpec& r = spec.rope;
  EncodingSpec plain = spec;
  plain.rope.scaling = RopeScaling{};
  const RopeExact e = rope_exact(r), e0 = rope_exact(plain.rope);
  const double F = effective_factor(r);
  const auto x = unit_pairs_input(r);
  const auto y = call_rope(ctx, spec, {Position::uniform(1)}, 1, x);
  if (!y) return ctx.skip();
  const auto E = rope_bounds(bounds_of(ctx.target), r, e, Position::uniform(1), x);
  double worst = 0;
  std::string what;
  for (int j = 0; j < e.P; ++j) {
    const auto [ia, ib] = pair_channels(r, j);
    const auto a = static_cast<std::size_t>(ia), b = static_cast<std::size_t>(ib);
    const double w = std::atan2((*y)[b], (*y)[a]);
    const double eps = (E[a] + E[b]) / e.att;
    const double tol = std::numbers::pi / 2 * std::min(eps, 2.0) + 4 * kU64;
    const double hi = e0.w[static_cast<std::size_t>(j)], lo = hi / F;
    const double excess = std::max(w - hi, lo - w);
    const double mg = ratio(std::max(0.0, excess), tol);
    if (!(mg <= worst)) worst = mg, what = "pair " + std::to_string(j) + ": frequency " + num(w) + " outside [" + num(lo) + ", " + num(hi) + "]";
  }
  ctx.check(worst, describe_spec(spec) + "; pairs " + std::to_string(e.P) + ": " + what, 1, spec);
}

// ---------------------------------------------------------------- partial rotary
// Statement: channels past the rotary block are bit-identical to the input (x is bf16, so it is
// representable in every output dtype: the correctly rounded copy is x itself).
// Tolerance: none (identity); margin 0 when identical, 2 otherwise.
void prop_partial_passthrough(Ctx& ctx) {
  const auto spec0 = rope_spec_for(ctx);
  if (!spec0) return ctx.skip();
  EncodingSpec spec = *spec0;
  RopeSpec& r = spec.rope;
  if (r.scaling.type == ScalingType::proportional) return ctx.skip();  // every channel is in the block
  if (r.rotary_dim == r.head_dim) {
    if (r.head_dim < 4) return ctx.skip();
    const int rot = 2 * *rc::gen::inRange(1, r.head_dim / 2);
    if (r.scaling.type == ScalingType::longrope) {
      r.scaling.short_factor.resize(static_cast<std::size_t>(rot / 2));
      r.scaling.long_factor.resize(static_cast<std::size_t>(rot / 2));
    }
    if (r.scaling.type == ScalingType::dynamic && rot <= 2) return ctx.skip();
    r.rotary_dim = rot;
    if (r.mrope != MropeMode::none) r.mrope_section = {rot / 2, 0, 0};
    spec.name += "+partial";
    try {
      validate(spec);
    } catch (const SpecError&) {
      return ctx.skip();
    }
  }
  const std::int64_t m = *gen::position(max_pos(ctx));
  const auto x = *gen::bf16_vector(r.head_dim);
  const auto y = call_rope(ctx, spec, {Position::uniform(m)}, 1, x);
  if (!y) return ctx.skip();
  int bad = -1;
  for (int c = rope_block_channels(r); c < r.head_dim && bad < 0; ++c)
    if (std::memcmp(&(*y)[static_cast<std::size_t>(c)], &x[static_cast<std::size_t>(c)], sizeof(double)) != 0 &&
        !((*y)[static_cast<std::size_t>(c)] == 0 && x[static_cast<std::size_t>(c)] == 0))
      bad = c;
  ctx.check(bad < 0 ? 0.0 : 2.0,
            describe_spec(spec) + "; head_dim " + std::to_string(r.head_dim) + ", rotary_dim " + std::to_string(r.rotary_dim) +
                "; m " + std::to_string(m) + ": pass-through channel " + std::to_string(bad) + " = " +
                (bad < 0 ? "" : num((*y)[static_cast<std::size_t>(bad)]) + ", input " + num(x[static_cast<std::size_t>(bad)])),
            m, spec);
}

}  // namespace

// ---------------------------------------------------------------- Ctx, table, reports

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
  };
  return defs;
}

// ---------------------------------------------------------------- deterministic reports

std::vector<std::string> collision_scan(Target& target, const EncodingSpec& spec, std::int64_t max_position) {
  const std::int64_t last = std::min<std::int64_t>(max_position > 0 ? max_position : gen::kDefaultMaxPosition, 2047);
  std::unordered_map<std::string, std::int64_t> seen;
  const std::size_t n = spec.family == Family::rope ? static_cast<std::size_t>(spec.rope.head_dim)
                                                    : static_cast<std::size_t>(spec.sinusoidal.d_model);
  std::vector<double> x;
  if (spec.family == Family::rope) {
    x.assign(n, 0.0);
    for (std::size_t i = 0; i < n; ++i) x[i] = 1.0 + static_cast<double>(i % 7) / 8;  // bf16-exact, every pair nonzero
  }
  for (std::int64_t start = 0; start <= last; start += 256) {
    const std::int64_t end = std::min(last + 1, start + 256);
    std::vector<double> out(static_cast<std::size_t>(end - start) * n);
    bool ok;
    if (spec.family == Family::rope) {
      std::vector<Position> pos;
      std::vector<double> xs;
      for (std::int64_t t = start; t < end; ++t) pos.push_back(Position::uniform(t)), xs.insert(xs.end(), x.begin(), x.end());
      ok = target.rope_apply(spec, pos, 1, xs, out);
    } else {
      std::vector<std::int64_t> pos;
      for (std::int64_t t = start; t < end; ++t) pos.push_back(t);
      ok = target.sinusoidal(spec, pos, out);
    }
    if (!ok) return {"collision scan: the target does not implement this spec"};
    for (std::int64_t t = start; t < end; ++t) {
      std::string key(reinterpret_cast<const char*>(&out[static_cast<std::size_t>(t - start) * n]), n * sizeof(double));
      const auto [it, inserted] = seen.emplace(std::move(key), t);
      if (!inserted)
        return {"first colliding pair over positions 0.." + std::to_string(last) + ": " + std::to_string(it->second) +
                " and " + std::to_string(t) + " (identical rows)"};
    }
  }
  return {"no colliding rows over positions 0.." + std::to_string(last)};
}

std::vector<std::string> cosine_sum_report(const EncodingSpec& spec, std::int64_t max_position) {
  if (spec.family != Family::rope) return {};
  const RopeExact e = rope_exact(spec.rope);
  const std::int64_t last = std::min<std::int64_t>(max_position > 0 ? max_position : gen::kDefaultMaxPosition, std::int64_t{1} << 20);
  // binary64 scan; the sign at the found m is confirmed in MPFR (a binary64 sum near 0 could be wrong).
  for (std::int64_t m = 0; m <= last; ++m) {
    double s = 0;
    for (double w : e.w) s += std::cos(static_cast<double>(m) * w);
    if (s < 0) {
      ScopedPrecision prec(working_precision_bits(53, rope_max_abs_angle(spec.rope, std::nullopt, m)));
      std::vector<Real> c, sn;
      rope_cos_sin<Real>(spec.rope, rope_frequencies<Real>(spec.rope), Position::uniform(m), c, sn);
      Real sum = 0;
      for (const Real& v : c) sum += v;
      if (sum < 0)
        return {"sum_j cos(m theta_j) first turns negative at m = " + std::to_string(m) + " (" + num(to_f64(sum)) + ")"};
    }
  }
  return {"sum_j cos(m theta_j) stays >= 0 for m <= " + std::to_string(last)};
}

std::vector<std::string> roformer_envelope_report(const EncodingSpec& spec) {
  if (spec.family != Family::rope) return {};
  const RopeExact e = rope_exact(spec.rope);
  std::string out = "RoFormer relative upper bound, max per octave [2^k, 2^(k+1)) for k = 0..10 (exact, binary64):";
  for (int k = 0; k <= 10; ++k) {
    double mx = 0;
    for (std::int64_t r = std::int64_t{1} << k; r < (std::int64_t{1} << (k + 1)); ++r) {
      double re = 0, im = 0, tot = 0;
      for (double w : e.w) re += std::cos(static_cast<double>(r) * w), im += std::sin(static_cast<double>(r) * w), tot += std::hypot(re, im);
      mx = std::max(mx, tot / static_cast<double>(e.w.size()));
    }
    out += ' ';
    out += num(mx);
  }
  return {out};
}

}  // namespace ropecheck::props::detail
