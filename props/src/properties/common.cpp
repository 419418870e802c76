// The helpers every property uses: exact values, class bounds, target calls, readable vectors.
#include <sstream>
#include <unordered_map>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <stdexcept>

#include <rapidcheck.h>

#include "common.hpp"
#include "ropecheck/core/spec_json.hpp"
#include "ropecheck/props/generators.hpp"
#include "ropecheck/reference/presets.hpp"
#include "ropecheck/formulas/rope.hpp"
#include "ropecheck/reference/rounding.hpp"
#include "ropecheck/reference/scalar.hpp"
#include "ropecheck/formulas/sinusoidal.hpp"

namespace ropecheck::props::detail {

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


namespace {

RopeExact rope_exact_uncached(const RopeSpec& r) {
  RopeExact e;
  ScopedPrecision prec(kMinWorkingBits);
  const RopeFrequencies<Real> f = rope_frequencies<Real>(r);
  for (const Real& v : f.inv_freq) e.w.push_back(to_f64(v));
  e.att = to_f64(f.attention_factor);
  e.P = rope_pairs(r);
  e.D = r.head_dim;
  e.block = rope_block_channels(r);
  e.geometry = std::make_shared<const accuracy::RopeGeometry>(r, e.w, e.att);
  return e;
}

}  // namespace

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
  const accuracy::RopeGeometry& geo = *e.geometry;
  for (int j = 0; j < e.P; ++j) {
    const auto [ia, ib] = pair_channels(r, j);
    const double M = geo.magnitude(x, ia);
    const std::int64_t sp = geo.position(pos, j);
    const PairAngle angle = geo.angle(sp, j);
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
std::optional<std::vector<double>> call_rope_raw(Ctx& ctx, const EncodingSpec& spec, std::string_view input,
                                                 const std::vector<Position>& pos, int heads, const std::vector<double>& x) {
  if (x.size() != pos.size() * static_cast<std::size_t>(heads) * static_cast<std::size_t>(spec.rope.head_dim))
    throw std::logic_error("props: internal error: input size does not match tokens x heads x head_dim");
  std::vector<double> out(x.size(), std::numeric_limits<double>::quiet_NaN());
  if (!ctx.target.rope_apply_input(input, spec, pos, heads, x, out)) return ctx.decline(), std::nullopt;
  return out;
}

std::optional<std::vector<double>> call_rope(Ctx& ctx, const EncodingSpec& spec, const std::vector<Position>& pos,
                                             int heads, const std::vector<double>& x, Input which) {
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
  const bool narrow = table_dtype(t.info().accuracy).has_value() || t.info().dtype == DType::bf16 ||
                      t.info().dtype == DType::f16;
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

std::vector<double> unit_pairs_input(const RopeSpec& r) {
  std::vector<double> x(static_cast<std::size_t>(r.head_dim), 0.0);
  for (int j = 0; j < rope_pairs(r); ++j) x[static_cast<std::size_t>(pair_channels(r, j).first)] = 1.0;
  return x;
}

std::optional<RopeCase> RopeCase::open(Ctx& ctx) {
  auto spec = rope_spec_for(ctx);
  if (!spec) return ctx.skip(), std::nullopt;
  return RopeCase(ctx, std::move(*spec));
}
const RopeExact& RopeCase::exact() {
  if (!exact_) exact_ = rope_exact(spec_.rope);
  return *exact_;
}
const Bounds& RopeCase::bounds() {
  if (!bounds_) bounds_ = bounds_of(ctx_->target);
  return *bounds_;
}
std::string RopeCase::where() const {
  return describe_spec(spec_) + "; head_dim " + std::to_string(spec_.rope.head_dim);
}

}  // namespace ropecheck::props::detail
