// Parametric hypotheses (internal.hpp fit_hypotheses): the value of one spec parameter that the
// candidate's own outputs imply, found in binary64 and then handed to the exact evaluation like any
// catalogue hypothesis. A rotated row gives, per pair, the angle and gain of the rotation the kernel
// applied (from the input pair and the output pair); a cos / sin row gives the angle. From those:
//   position offset k  the truth's phase error of each pair, unwrapped from the lowest frequency up;
//   base, factor       each pair's frequency, unwrapped from the smallest position up, then the value
//                      whose frequencies fit them best in log space (a grid, then a golden section);
//   attention factor   the median gain;
//   rotary width       every even width tried.
// A value is kept only when it screens: the hypothesis computed in binary64 puts every element of the
// fitting rows inside the class bound (elements whose bound is saturated do not count, and must be at
// most half). It is rounded to the fewest significant digits that still screen. A family whose spec
// value screens already, or that nothing screens, gives no hypothesis.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numbers>
#include <set>

#include <fmt/format.h>

#include "../check_internal.hpp"
#include "../output_geometry.hpp"
#include "internal.hpp"
#include "ropecheck/formulas/rope.hpp"

namespace ropecheck::checker::diagnose_detail {
namespace {

constexpr double kTwoPi = 2 * std::numbers::pi;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr std::size_t kMaxFailingTokens = 24;
constexpr std::size_t kMaxChainTokens = 40;
constexpr double kChainRatio = 8;  // each position of the unwrapping chain at most this times the previous

std::size_t sz(std::int64_t v) { return static_cast<std::size_t>(v); }

// What the fits read: a q_rot / k_rot target (head 0 of each token), or cos with its sin beside it.
struct Context {
  const GoldenSet* g = nullptr;
  const RopeSpec* truth = nullptr;
  const Target* rotated = nullptr;
  const Target* cos = nullptr;
  const Tensor* sin = nullptr;
  DType dt = DType::f32;
  accuracy::AccuracyClass cls = accuracy::AccuracyClass::fp32_angle;
  std::vector<std::int64_t> tokens;  // the fitting rows
  std::vector<double> input;         // what the rotated target rotates (check_detail::rotation_input)
  double norm_term = 0;              // its norm stage's term (ERROR_MODEL.md section 17), 0 without one
};

// One fitting row: per pair of the truth's pairing, the angle of the kernel's rotation in (-pi, pi] and
// its gain (|output| / |input|: the attention factor; NaN for tables and unreadable pairs).
struct Row {
  std::int64_t token = 0;
  std::vector<double> phi, gain;
};

Row read_row(const Context& x, std::int64_t token) {
  const RopeSpec& r = *x.truth;
  const int P = rope_pairs(r);
  Row row{token, std::vector<double>(sz(P), kNaN), std::vector<double>(sz(P), kNaN)};
  if (x.rotated) {
    const std::vector<double>& xs = x.input;
    const StoredValues ys(x.rotated->candidate->data.data(), x.dt);
    const std::int64_t base = token * x.g->heads() * r.head_dim;
    for (int j = 0; j < P; ++j) {
      const auto [a, b] = pair_channels(r, j);
      if (!is_rotary_channel(r, a) || !is_rotary_channel(r, b)) continue;
      const double xa = xs[sz(base + a)], xb = xs[sz(base + b)], ya = ys[base + a], yb = ys[base + b];
      const double n2 = xa * xa + xb * xb;
      if (!(n2 > 1e-6)) continue;  // a pair too small to show its rotation
      // y = att R(theta) x: (x . y) / |x|^2 = att cos(theta), (x cross y) / |x|^2 = att sin(theta).
      const double c = (xa * ya + xb * yb) / n2, s = (xa * yb - xb * ya) / n2;
      row.phi[sz(j)] = std::atan2(s, c);
      row.gain[sz(j)] = std::hypot(c, s);
    }
  } else {
    const StoredValues cs(x.cos->candidate->data.data(), x.dt), ss(x.sin->data.data(), x.dt);
    for (int j = 0; j < P; ++j) row.phi[sz(j)] = std::atan2(ss[token * P + j], cs[token * P + j]);
  }
  return row;
}

// The fitting rows: the tokens of the sampled failing elements (at most kMaxFailingTokens, spread), and a
// chain of positions from the smallest nonzero one up, each at most kChainRatio times the previous, along
// which a frequency is unwrapped.
std::vector<std::int64_t> fitting_tokens(const Context& x) {
  const Target& t = x.rotated ? *x.rotated : *x.cos;
  const std::int64_t per_token = x.rotated ? x.g->heads() * x.truth->head_dim : rope_pairs(*x.truth);
  std::set<std::int64_t> failing;
  for (std::int64_t i : t.sample.failing) failing.insert(i / per_token);
  std::set<std::int64_t> out;
  const std::vector<std::int64_t> f(failing.begin(), failing.end());
  for (std::size_t k = 0; k < std::min(f.size(), kMaxFailingTokens); ++k)
    out.insert(f[k * f.size() / std::min(f.size(), kMaxFailingTokens)]);
  std::vector<std::pair<std::int64_t, std::int64_t>> by_pos;  // (|t position|, token)
  const std::vector<Position>& pos = x.g->positions();
  for (std::size_t k = 0; k < pos.size(); ++k)
    if (pos[k].t != 0) by_pos.push_back({std::llabs(pos[k].t), static_cast<std::int64_t>(k)});
  std::sort(by_pos.begin(), by_pos.end());
  std::size_t chain = 0;
  for (std::size_t k = 0; k < by_pos.size() && chain < kMaxChainTokens;) {
    out.insert(by_pos[k].second);
    ++chain;
    std::size_t next = k + 1;  // the farthest position within the ratio, else the next one
    while (next + 1 < by_pos.size() && static_cast<double>(by_pos[next + 1].first) <= kChainRatio * static_cast<double>(by_pos[k].first))
      ++next;
    k = next;
  }
  return {out.begin(), out.end()};
}

// Each pair's frequency, unwrapped along the rows by increasing |position| (NaN when unreadable).
std::vector<double> fitted_frequencies(const Context& x, const std::vector<Row>& rows) {
  const int P = rope_pairs(*x.truth);
  std::vector<double> w(sz(P), kNaN);
  for (int j = 0; j < P; ++j) {
    std::vector<std::pair<std::int64_t, double>> obs;
    for (const Row& r : rows) {
      const std::int64_t p = stream_position(*x.truth, x.g->positions()[sz(r.token)], j);
      if (p != 0 && std::isfinite(r.phi[sz(j)])) obs.push_back({p, r.phi[sz(j)]});
    }
    std::sort(obs.begin(), obs.end(), [](const auto& a, const auto& b) { return std::llabs(a.first) < std::llabs(b.first); });
    double est = kNaN;
    for (const auto& [p, phi] : obs) {
      const double pd = static_cast<double>(p);
      est = std::isnan(est) ? phi / pd : (phi + kTwoPi * std::round((pd * est - phi) / kTwoPi)) / pd;
    }
    w[sz(j)] = est;
  }
  return w;
}

// The integer offset each row implies (the truth's phase error unwrapped from the lowest frequency up),
// and the one most rows agree on; nullopt without a majority.
std::optional<std::int64_t> fitted_offset(const Context& x, const std::vector<Row>& rows, const std::vector<double>& w) {
  std::vector<int> order;
  for (int j = 0; j < static_cast<int>(w.size()); ++j)
    if (w[sz(j)] > 0) order.push_back(j);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return w[sz(a)] < w[sz(b)]; });
  std::map<std::int64_t, int> votes;
  for (const Row& r : rows) {
    double k = kNaN;
    for (int j : order) {
      if (!std::isfinite(r.phi[sz(j)])) continue;
      const double p = static_cast<double>(stream_position(*x.truth, x.g->positions()[sz(r.token)], j));
      const double delta = std::remainder(r.phi[sz(j)] - p * w[sz(j)], kTwoPi);
      k = std::isnan(k) ? delta / w[sz(j)]
                        : (delta + kTwoPi * std::round((k * w[sz(j)] - delta) / kTwoPi)) / w[sz(j)];
    }
    if (std::isfinite(k) && std::fabs(k) < 0x1p52) ++votes[std::llround(k)];
  }
  const auto best = std::max_element(votes.begin(), votes.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  if (best == votes.end() || 2 * best->second < static_cast<int>(rows.size())) return std::nullopt;
  return best->first;
}

// The median gain over the rows' readable pairs (the attention factor the kernel applied).
double fitted_gain(const std::vector<Row>& rows) {
  std::vector<double> g;
  for (const Row& r : rows)
    for (double v : r.gain)
      if (std::isfinite(v)) g.push_back(v);
  if (g.empty()) return kNaN;
  std::nth_element(g.begin(), g.begin() + static_cast<std::ptrdiff_t>(g.size() / 2), g.end());
  return g[g.size() / 2];
}

// The s in [lo, hi] whose model frequencies fit the measured ones best in log space: a log grid, then
// a golden section around the best grid point.
double fit_scalar(const std::vector<double>& measured, const std::function<std::vector<double>(double)>& model, double lo,
                  double hi) {
  auto cost = [&](double ls) {
    const std::vector<double> w = model(std::exp(ls));
    double c = 0;
    int n = 0;
    for (std::size_t j = 0; j < measured.size() && j < w.size(); ++j)
      if (measured[j] > 0 && w[j] > 0) {
        const double d = std::log(measured[j]) - std::log(w[j]);
        c += d * d;
        ++n;
      }
    return n > 0 ? c / n : std::numeric_limits<double>::infinity();
  };
  constexpr int kGrid = 160;
  const double a0 = std::log(lo), step = (std::log(hi) - a0) / kGrid;
  int best = 0;
  double best_cost = std::numeric_limits<double>::infinity();
  for (int i = 0; i <= kGrid; ++i)
    if (const double c = cost(a0 + i * step); c < best_cost) best_cost = c, best = i;
  double a = a0 + (best - 1) * step, b = a0 + (best + 1) * step;
  const double phi = (std::sqrt(5.0) - 1) / 2;
  for (int it = 0; it < 80; ++it) {
    const double c = b - phi * (b - a), d = a + phi * (b - a);
    if (cost(c) < cost(d))
      b = d;
    else
      a = c;
  }
  return std::exp((a + b) / 2);
}

// The hypothesis computed in binary64 on the fitting rows, against the candidate, under the class bound.
struct Screen {
  double max_ratio = 0;
  std::int64_t discriminated = 0, saturated = 0;
  bool pass() const { return discriminated > 0 && max_ratio <= 1 && saturated <= discriminated; }
};

void judge(Screen& s, double c, double y, const accuracy::ClassBound& b, const accuracy::PairAngle& angle, double M) {
  const double rel = b.relative(angle);
  if (rel >= 1) {
    ++s.saturated;
    return;
  }
  ++s.discriminated;
  // binary64's own error in cos / sin of an angle this large, and in the rotation, is not the kernel's
  const double slack = 0x1p-50 * (angle.abs_theta + 4) * std::max(M, 1.0);
  const double e = std::isfinite(c) ? std::max(0.0, std::fabs(c - y) - slack) : std::numeric_limits<double>::infinity();
  s.max_ratio = std::max(s.max_ratio, e / (rel * M + b.floor));
}

Screen screen(const Context& x, const Mistake& m) {
  Screen s;
  if (!evaluable(*x.truth, m)) return s;
  const RopeSpec r = mistaken_spec(*x.truth, m);
  const RopeFrequencies<double> f = rope_frequencies<double>(r, x.g->seq_len());
  const double att = m.attention.value_or(f.attention_factor);
  const auto bound = [&](accuracy::Quantity q) { return accuracy::class_bound(x.cls, x.dt, q); };
  accuracy::ClassBound rot = bound(accuracy::Quantity::rotated), pass = bound(accuracy::Quantity::passthrough);
  const accuracy::ClassBound table = bound(accuracy::Quantity::table);
  rot.k_const += x.norm_term, pass.k_const += x.norm_term;
  const int P = rope_pairs(r), D = r.head_dim;
  for (std::int64_t t : x.tokens) {
    const Position& pos = x.g->positions()[sz(t)];
    if (x.rotated) {
      const std::vector<double>& xs = x.input;
      const StoredValues cs(x.rotated->candidate->data.data(), x.dt);
      const std::int64_t base = t * x.g->heads() * D;
      std::vector<bool> rotated(sz(D), false);
      for (int j = 0; j < P; ++j) {
        const auto [a, b] = pair_channels(r, j);
        if (!is_rotary_channel(r, a) || !is_rotary_channel(r, b)) continue;
        rotated[sz(a)] = rotated[sz(b)] = true;
        const double p = static_cast<double>(stream_position(r, pos, j) + m.position_shift), w = f.inv_freq[sz(j)];
        const double xa = xs[sz(base + a)], xb = xs[sz(base + b)], co = std::cos(p * w), si = std::sin(p * w);
        const accuracy::PairAngle angle = accuracy::pair_angle(p, w);
        const double M = att * (std::fabs(xa) + std::fabs(xb));
        judge(s, cs[base + a], att * (xa * co - xb * si), rot, angle, M);
        judge(s, cs[base + b], att * (xb * co + xa * si), rot, angle, M);
      }
      for (int c = 0; c < D; ++c)
        if (!rotated[sz(c)]) judge(s, cs[base + c], xs[sz(base + c)], pass, {0, 0}, std::fabs(xs[sz(base + c)]));
    } else {
      const StoredValues cv(x.cos->candidate->data.data(), x.dt), sv(x.sin->data.data(), x.dt);
      for (int j = 0; j < P; ++j) {
        const double p = static_cast<double>(stream_position(r, pos, j) + m.position_shift), w = f.inv_freq[sz(j)];
        const accuracy::PairAngle angle = accuracy::pair_angle(p, w);
        judge(s, cv[t * P + j], std::cos(p * w), table, angle, 1.0);
        judge(s, sv[t * P + j], std::sin(p * w), table, angle, 1.0);
      }
    }
  }
  return s;
}

double round_significant(double v, int digits) {
  if (v == 0 || !std::isfinite(v)) return v;
  const double scale = std::pow(10.0, digits - 1 - static_cast<int>(std::floor(std::log10(std::fabs(v)))));
  return std::round(v * scale) / scale;
}

// The shortest rounding of `estimate` that screens (never the spec's own value); nullopt and why not
// otherwise.
std::optional<double> snapped(const Context& x, double estimate, double spec_value,
                              const std::function<Mistake(double)>& make, std::string& why) {
  if (!std::isfinite(estimate) || !(estimate > 0)) return why = "no estimate from the outputs", std::nullopt;
  if (round_significant(estimate, 8) == round_significant(spec_value, 8))
    return why = "the fitted value is the spec's", std::nullopt;
  for (int d = 1; d <= 17; ++d) {
    const double v = d == 17 ? estimate : round_significant(estimate, d);
    if (v != spec_value && screen(x, make(v)).pass()) return v;
  }
  return why = fmt::format("no value near {:.8g} fits the fitting rows", estimate), std::nullopt;
}

std::string number(double v) { return fmt::format("{}", v); }

}  // namespace

std::vector<Hypothesis> fit_hypotheses(const GoldenSet& g, const std::vector<Target>& targets, const Tensor* sin_beside_cos,
                                       accuracy::AccuracyClass judged, std::vector<ParameterFit>& fits) {
  Context x;
  x.g = &g;
  x.truth = &g.spec().rope;
  x.cls = judged;
  for (const Target& t : targets)
    if (!x.rotated && (t.base == "q_rot" || t.base == "k_rot")) x.rotated = &t;
  for (const Target& t : targets)
    if (!x.rotated && !x.cos && t.base == "cos" && sin_beside_cos) x.cos = &t, x.sin = sin_beside_cos;
  if (!x.rotated && !x.cos) return {};
  x.dt = (x.rotated ? x.rotated : x.cos)->dt;
  if (x.rotated) {
    x.input = check_detail::rotation_input(g, x.rotated->base);
    if (check_detail::norm_of(g, x.rotated->base)) x.norm_term = accuracy::qk_norm_relative_term(g.spec().rope.head_dim);
  }
  x.tokens = fitting_tokens(x);
  if (screen(x, Mistake{}).pass()) return {};  // the fitting rows hold under the spec itself: nothing to fit
  std::vector<Row> rows;
  for (std::int64_t t : x.tokens) rows.push_back(read_row(x, t));

  const RopeSpec& truth = *x.truth;
  const RopeFrequencies<double> f = rope_frequencies<double>(truth, g.seq_len());
  const std::vector<double> measured = fitted_frequencies(x, rows);
  std::vector<Hypothesis> out;
  const std::string source = "fitted to the candidate's outputs (checker/DIAGNOSIS.md, \"Parametric hypotheses\")";
  // A fitted value a catalogue hypothesis computes is that hypothesis, not a second one.
  auto add = [&](const std::string& id, const std::string& title, Parameter p, std::optional<Mistake> m,
                 const std::string& why, const std::string& same_as) {
    if (!m) return fits.push_back({id, std::move(p), why});
    if (!same_as.empty()) return fits.push_back({id, std::move(p), "same as " + same_as});
    fits.push_back({id, p, "evaluated"});
    out.push_back({id, title, source, *m, std::move(p)});
  };
  std::string why;

  {  // position offset
    const std::optional<std::int64_t> k = fitted_offset(x, rows, f.inv_freq);
    Mistake m;
    m.position_shift = k.value_or(0);
    const bool ok = k && *k != 0 && screen(x, m).pass();
    add("fit-position-offset", fmt::format("positions shifted by {:+}", m.position_shift),
        {"position offset", ok ? fmt::format("{:+}", *k) : "", "0"}, ok ? std::optional(m) : std::nullopt,
        !k ? "the rows do not agree on an offset" : (*k == 0 ? "no offset" : "the offset does not fit the fitting rows"),
        !ok ? "" : (*k == 1 ? "position-plus-1" : (*k == -1 ? "position-minus-1" : "")));
  }
  {  // base
    auto make = [](double v) { Mistake m; m.base = v; return m; };
    const double est = fit_scalar(measured, [&](double v) {
      RopeSpec r = truth;
      r.base = v;
      return rope_frequencies<double>(r, g.seq_len()).inv_freq;
    }, 1.5, 1e12);
    const std::optional<double> v = snapped(x, est, truth.base, make, why);
    add("fit-base", fmt::format("base (rope_theta) {} instead of the spec's", v ? number(*v) : "?"),
        {"base", v ? number(*v) : "", number(truth.base)}, v ? std::optional(make(*v)) : std::nullopt, why,
        v && *v == 10000 ? "base-default" : "");
  }
  const ScalingType st = truth.scaling.type;
  if (st == ScalingType::linear || st == ScalingType::yarn || st == ScalingType::llama3) {  // scaling factor
    auto make = [](double v) { Mistake m; m.factor = v; return m; };
    const double spec_factor = effective_factor(truth);
    const double est = fit_scalar(measured, [&](double v) {
      RopeSpec r = truth;
      r.scaling.factor = v;
      return rope_frequencies<double>(r, g.seq_len()).inv_freq;
    }, 1e-3, 1e6);
    const std::optional<double> v = snapped(x, est, spec_factor, make, why);
    const bool ignored = v && *v == 1 && !truth.scaling.attention_factor;  // what dropping the scaling computes
    add("fit-factor", fmt::format("{} factor {} instead of the spec's", to_string(st), v ? number(*v) : "?"),
        {"scaling factor", v ? number(*v) : "", number(spec_factor)}, v ? std::optional(make(*v)) : std::nullopt, why,
        ignored ? "scaling-ignored" : "");
  }
  if (x.rotated) {  // attention factor
    auto make = [](double v) { Mistake m; m.attention = v; return m; };
    const double att = f.attention_factor;
    const std::optional<double> v = snapped(x, fitted_gain(rows), att, make, why);
    const std::string same = !v ? "" : (*v == 1 ? "attention-factor-missing"
                                               : (std::fabs(*v - att * att) <= 1e-9 * att * att ? "attention-factor-twice" : ""));
    add("fit-attention-factor", fmt::format("attention factor {} instead of the spec's", v ? number(*v) : "?"),
        {"attention factor", v ? number(*v) : "", fmt::format("{:.6g}", att)}, v ? std::optional(make(*v)) : std::nullopt,
        why, same);
  }
  if (x.rotated) {  // rotary width: every even width the head has
    std::optional<int> best;
    double best_ratio = 0;
    for (int w = 2; w <= truth.head_dim; w += 2) {
      Mistake m;
      m.rotary_dim = w;
      if (w == truth.rotary_dim || !evaluable(truth, m)) continue;
      if (const Screen s = screen(x, m); s.pass() && (!best || s.max_ratio < best_ratio)) best = w, best_ratio = s.max_ratio;
    }
    Mistake m;
    m.rotary_dim = best.value_or(0);
    add("fit-rotary-width", fmt::format("rotary width {} instead of the spec's", best.value_or(0)),
        {"rotary width", best ? std::to_string(*best) : "", std::to_string(truth.rotary_dim)},
        best ? std::optional(m) : std::nullopt, "no other width fits the fitting rows", "");
  }
  return out;
}

}  // namespace ropecheck::checker::diagnose_detail
