// diagnose_scores (score_diagnosis.hpp): each rotation mistake of the catalogue that can act on a score
// (the same mistake on the query and the key: pairing, base, frequencies, attention factor, cos / sin,
// positions rounded or wrapped, scaling, looser classes) and the query one position off relative to the
// key, evaluated as an alternative truth: the exact scores of a kernel with that mistake (MPFR rotation,
// dot product in long double), with the score class's bound around them (ERROR_MODEL.md 16.3, the
// rotation bounds taken at the true positions). A uniform position shift is not a hypothesis: it
// leaves every score unchanged (ERROR_MODEL.md 16.6).
#include <algorithm>
#include <cmath>

#include "../score_diagnosis.hpp"
#include "internal.hpp"
#include "ropecheck/formulas/rope.hpp"
#include "ropecheck/reference/rounding.hpp"
#include "ropecheck/reference/scalar.hpp"

namespace ropecheck::checker::check_detail {

namespace score_diagnosis {

using accuracy::AccuracyClass;
using diagnose_detail::wrapped_position;

constexpr std::size_t kMaxFailing = 512, kMaxPassing = 128;

std::size_t rank_of(AccuracyClass c) {
  return static_cast<std::size_t>(std::find(accuracy::kAccuracyClasses.begin(), accuracy::kAccuracyClasses.end(), c) -
                                  accuracy::kAccuracyClasses.begin());
}

// A score hypothesis: a catalogue mistake on both vectors, and / or the query's position moved.
struct ScoreHypothesis {
  Hypothesis h;
  std::int64_t query_shift = 0;
};

std::vector<ScoreHypothesis> score_hypotheses(const GoldenSet& g) {
  std::vector<ScoreHypothesis> out;
  for (const Hypothesis& h : diagnosis_catalogue()) {
    const Mistake& m = h.mistake;
    // Invisible in a score: a uniform shift, a factor folded into tables only, text tokens' streams.
    if (m.position_shift != 0 || m.att == Mistake::Att::folded_in_table || m.flip_mrope_mode || m.swap_hw_streams) continue;
    if (!diagnose_detail::evaluable(g.spec().rope, m)) continue;
    out.push_back({h, 0});
  }
  for (const std::int64_t d : {1, -1}) {
    Hypothesis h;
    h.id = d > 0 ? "query-position-plus-1" : "query-position-minus-1";
    h.title = d > 0 ? "the query rotated one position too far (+1) relative to the key" : "the query rotated one position short (-1) relative to the key";
    h.source = "off-by-one offsets between the query's and the key's positions (KV-cache start, seqlen_offsets)";
    out.push_back({h, d});
  }
  return out;
}

// The exact rotation of a kernel with mistake m (mistaken_truth.cpp's, at any position of a text token).
class MistakenRotation {
 public:
  MistakenRotation(const GoldenSet& g, const Mistake& m) : m_(m), spec_(diagnose_detail::mistaken_spec(g.spec().rope, m)) {
    const RopeFrequencies<Real> f = rope_frequencies<Real>(spec_, g.seq_len());
    inv_ = f.inv_freq;
    for (Real& w : inv_) {
      if (m.reciprocal_freq && w != 0) w = Real(1) / w;
      if (m.freq_rounding) w = Real(round_to_double(w, *m.freq_rounding));
    }
    att_ = f.attention_factor;
    if (m.att == Mistake::Att::missing) att_ = Real(1);
    if (m.att == Mistake::Att::squared) att_ = f.attention_factor * f.attention_factor;
    if (m.attention) att_ = Real(*m.attention);
  }
  // x: heads * head_dim inputs; nullopt when the mistaken position overflows its dtype.
  std::optional<std::vector<long double>> rotate(std::int64_t position, std::span<const double> x) const {
    std::int64_t p = m_.position_wrap_bits ? wrapped_position(position, *m_.position_wrap_bits) : position;
    double pd = static_cast<double>(p);
    if (m_.position_rounding) pd = round_to_double(Real(pd), *m_.position_rounding);
    if (!std::isfinite(pd)) return std::nullopt;
    const int D = spec_.head_dim, P = rope_pairs(spec_), block = rope_block_channels(spec_);
    std::vector<long double> y(x.begin(), x.end());  // pass-through channels unchanged
    for (int j = 0; j < P; ++j) {
      const auto [a, b] = pair_channels(spec_, j);
      if (a >= block || b >= block) continue;
      const Real theta = Real(pd) * inv_[static_cast<std::size_t>(j)];
      Real c = cos(theta), s = sin(theta);
      if (m_.negate_sin) s = -s;
      if (m_.swap_cos_sin) std::swap(c, s);
      for (std::size_t h = 0; h < x.size() / static_cast<std::size_t>(D); ++h) {
        const std::size_t o = h * static_cast<std::size_t>(D);
        const Real xa(x[o + static_cast<std::size_t>(a)]), xb(x[o + static_cast<std::size_t>(b)]);
        y[o + static_cast<std::size_t>(a)] = static_cast<long double>(to_f64(att_ * (xa * c - xb * s)));
        y[o + static_cast<std::size_t>(b)] = static_cast<long double>(to_f64(att_ * (xb * c + xa * s)));
      }
    }
    return y;
  }

 private:
  Mistake m_;
  RopeSpec spec_;
  std::vector<Real> inv_;
  Real att_{1};
};

unsigned precision_for(const GoldenSet& g, const ScoreProblem& p, const Mistake& m) {
  double max_pos = 2;
  for (std::size_t i = 0; i < p.qpos.size(); ++i)
    max_pos = std::max({max_pos, std::fabs(static_cast<double>(p.qpos[i])), std::fabs(static_cast<double>(p.kpos[i]))});
  max_pos = max_pos * (1 + 1.0 / 64) + 2;  // rounded to bf16 / f16, shifted by one
  const RopeFrequencies<double> f = rope_frequencies<double>(diagnose_detail::mistaken_spec(g.spec().rope, m), g.seq_len());
  double w = 0;
  for (double x : f.inv_freq) w = std::max(w, std::fabs(m.reciprocal_freq && x != 0 ? 1 / x : x));
  return working_precision_bits(53, max_pos * w * 1.01);
}

struct Sample {
  std::vector<std::int64_t> failing, passing;  // flat indices [h * N + pair]
  std::int64_t failing_total = 0;
};

std::vector<std::int64_t> evenly(const std::vector<std::int64_t>& v, std::size_t k) {
  if (v.size() <= k) return v;
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < k; ++i) out.push_back(v[i * v.size() / k]);
  return out;
}

Sample sample_scores(const ScoreProblem& p, std::span<const double> cand, DType dt, AccuracyClass c) {
  ScoreProblem::Cache cache(p, dt);
  std::vector<std::int64_t> failing, passing;
  for (std::int64_t h = 0; h < p.G; ++h)
    for (std::int64_t j = 0; j < p.N; ++j) {
      const std::int64_t i = h * p.N + j;
      const accuracy::ScoreBound b = p.bound(cache, c, dt, h, j);
      const double err = std::fabs(cand[static_cast<std::size_t>(i)] - p.truth[static_cast<std::size_t>(i)]);
      if (!(err <= b.stored)) failing.push_back(i);
      else if (!b.saturated) passing.push_back(i);
    }
  return {evenly(failing, kMaxFailing), evenly(passing, kMaxPassing), static_cast<std::int64_t>(failing.size())};
}

// One hypothesis over the sample; nullopt when it gives the truth on every evaluated score.
// `values` receives the mistaken scores (NaN where a position overflowed).
std::optional<ScoreHypothesisResult> evaluate(const GoldenSet& g, const ScoreProblem& p, std::span<const double> cand,
                                              DType dt, AccuracyClass judging, const Sample& sample, const ScoreHypothesis& sh,
                                              std::vector<double>& values) {
  const Mistake& m = sh.h.mistake;
  if (m.judged_class && rank_of(*m.judged_class) <= rank_of(judging)) return std::nullopt;
  ScoreHypothesisResult r;
  r.id = sh.h.id, r.title = sh.h.title, r.source = sh.h.source;
  r.judged_class = m.judged_class ? *m.judged_class : judging;
  const ScopedPrecision precision(precision_for(g, p, m));
  const MistakenRotation rot(g, m);
  ScoreProblem::Cache cache(p, dt);
  const std::size_t D = static_cast<std::size_t>(p.D);
  bool differs = m.judged_class.has_value();
  for (const bool failing : {true, false})
    for (const std::int64_t i : failing ? sample.failing : sample.passing) {
      const std::int64_t h = i / p.N, j = i % p.N;
      const std::int64_t mq = p.qpos[static_cast<std::size_t>(j)] + sh.query_shift, nk = p.kpos[static_cast<std::size_t>(j)];
      const auto Q = rot.rotate(mq, std::span<const double>(p.q).subspan(static_cast<std::size_t>(h) * D, D));
      const auto K = rot.rotate(nk, p.k);
      (failing ? r.failing_evaluated : r.passing_evaluated) += 1;
      if (!Q || !K) {  // an overflowed position explains nothing
        values.push_back(std::nan(""));
        r.max_ratio = std::numeric_limits<double>::infinity();
        continue;
      }
      long double dot = 0;
      for (std::size_t c = 0; c < D; ++c) dot += (*Q)[c] * (*K)[c];
      double mistaken = static_cast<double>(dot * static_cast<long double>(p.scale));
      if (p.cap) mistaken = *p.cap * std::tanh(mistaken / *p.cap);
      values.push_back(mistaken);
      const double truth = p.truth[static_cast<std::size_t>(i)];
      differs = differs || std::fabs(mistaken - truth) > 0x1p-50 * std::max(1.0, std::fabs(truth));
      const accuracy::ScoreBound b = p.bound(cache, r.judged_class, dt, h, j);
      // The bound is the one around the truth (rotation errors at the true positions), re-centred: its
      // magnitude-driven parts move with the score by O(|mistaken - truth| u), far below the bound.
      const double ratio = std::fabs(cand[static_cast<std::size_t>(i)] - mistaken) / b.stored;
      if (b.saturated) {
        (failing ? r.failing_saturated : r.passing_saturated) += 1;
        continue;
      }
      r.max_ratio = std::max(r.max_ratio, std::isnan(ratio) ? std::numeric_limits<double>::infinity() : ratio);
      if (ratio <= 1) (failing ? r.failing_explained : r.passing_explained) += 1;
    }
  if (!differs) return std::nullopt;
  r.matches = r.failing_explained > 0 && r.max_ratio <= 1 && 2 * r.failing_saturated <= r.failing_evaluated;
  return r;
}

bool same_scores(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::isnan(a[i]) != std::isnan(b[i]) || std::fabs(a[i] - b[i]) > 0x1p-50 * std::max(1.0, std::fabs(a[i]))) return false;
  return true;
}

double share(std::int64_t a, std::int64_t b) { return b ? static_cast<double>(a) / static_cast<double>(b) : 0.0; }

}  // namespace score_diagnosis

ScoreDiagnosis diagnose_scores(const golden::GoldenSet& g, const ScoreProblem& p, std::span<const double> cand, DType dt,
                               accuracy::AccuracyClass judging) {
  using namespace score_diagnosis;
  ScoreDiagnosis d;
  d.judged_class = rank_of(judging) >= rank_of(AccuracyClass::fp32_angle) ? judging : AccuracyClass::fp32_angle;
  const Sample sample = sample_scores(p, cand, dt, d.judged_class);
  d.failing = sample.failing_total;
  d.failing_evaluated = static_cast<std::int64_t>(sample.failing.size());
  d.passing_evaluated = static_cast<std::int64_t>(sample.passing.size());
  if (sample.failing.empty()) {
    d.conclusion = "nothing to diagnose: no score is outside the " + std::string(accuracy::to_string(d.judged_class)) + " bound";
    return d;
  }
  std::vector<std::vector<double>> values;
  for (const ScoreHypothesis& h : score_hypotheses(g)) {
    std::vector<double> v;
    if (auto r = evaluate(g, p, cand, dt, d.judged_class, sample, h, v)) {
      d.ranked.push_back(std::move(*r));
      values.push_back(std::move(v));
    }
  }
  for (std::size_t a = 0; a < d.ranked.size(); ++a)
    for (std::size_t b = 0; b < d.ranked.size(); ++b)
      if (a != b && d.ranked[a].judged_class == d.ranked[b].judged_class && same_scores(values[a], values[b]))
        d.ranked[a].same_scores_as.push_back(d.ranked[b].id);
  std::stable_sort(d.ranked.begin(), d.ranked.end(), [](const ScoreHypothesisResult& a, const ScoreHypothesisResult& b) {
    const double fa = share(a.failing_explained, a.failing_evaluated), fb = share(b.failing_explained, b.failing_evaluated);
    if (fa != fb) return fa > fb;
    const double pa = share(a.passing_explained, a.passing_evaluated), pb = share(b.passing_explained, b.passing_evaluated);
    if (pa != pb) return pa > pb;
    return a.max_ratio < b.max_ratio;
  });
  if (!d.ranked.empty() && d.ranked.front().matches) {
    d.match = d.ranked.front().id;
    d.conclusion = "the failing scores match: " + d.ranked.front().title + " (" + d.match + ")";
    for (const std::string& o : d.ranked.front().same_scores_as) d.conclusion += "; the scores cannot tell it from " + o;
  } else {
    d.conclusion = "no known rotation mistake explains the failing scores";
  }
  return d;
}

}  // namespace ropecheck::checker::check_detail
