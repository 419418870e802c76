// diagnose(): every applicable hypothesis of the catalogue, and the parametric ones fitted to the
// candidate, evaluated on the failing elements and a passing sample, ranked by the share of failing
// elements it brings inside the class bound, then the share of the passing sample it keeps inside,
// then its largest error / bound; pairs of partial catalogue explanations composed when no single one
// matches.
#include <algorithm>
#include <chrono>
#include <cmath>

#include "../output_geometry.hpp"
#include "../check_internal.hpp"
#include "internal.hpp"
#include "ropecheck/reference/scalar.hpp"

namespace ropecheck::checker {
// The checker's vocabulary from the modules below it.
using golden::GoldenSet;
using golden::ManifestTensor;
using io::Tensor;
using io::TensorDType;

using accuracy::AccuracyClass;
using check_detail::g4;

double HypothesisResult::failing_fraction() const {
  return failing_evaluated ? static_cast<double>(failing_explained) / static_cast<double>(failing_evaluated) : 0.0;
}

const HypothesisResult* Diagnosis::best_match() const {
  if (!pairs.empty() && pairs.front().matches) return &pairs.front();
  return !ranked.empty() && ranked.front().matches ? &ranked.front() : nullptr;
}

namespace {

using diagnose_detail::Target;

std::size_t class_rank(AccuracyClass c) {
  return static_cast<std::size_t>(std::find(accuracy::kAccuracyClasses.begin(), accuracy::kAccuracyClasses.end(), c) -
                                  accuracy::kAccuracyClasses.begin());
}
AccuracyClass looser(AccuracyClass a, AccuracyClass b) { return class_rank(a) >= class_rank(b) ? a : b; }

bool same_value(double v, double y) {
  if (std::isnan(v) || std::isnan(y)) return std::isnan(v) == std::isnan(y);
  return std::fabs(v - y) <= 0x1p-50 * std::max(1.0, std::fabs(y));
}

// The spec's value of a catalogue hypothesis's parameter (the base-default hypothesis's "base").
std::string spec_value_of(const std::string& name, const GoldenSet& g) {
  if (name == "base") return fmt::format("{}", g.spec().rope.base);
  return "";
}

// One hypothesis over the sampled elements; nullopt when it does not apply here (its class is not
// looser than the judging one, or it gives the truth on every evaluated element). An element where the
// bound around the mistaken truth is saturated is not discriminated: counted apart, never explained.
std::optional<HypothesisResult> evaluate(const GoldenSet& g, const std::vector<Target>& targets, const Hypothesis& h,
                                         AccuracyClass judging) {
  const Mistake& m = h.mistake;
  if (!diagnose_detail::evaluable(g.spec().rope, m)) return std::nullopt;
  if (m.position_wrap_bits && !diagnose_detail::wraps(g, *m.position_wrap_bits)) return std::nullopt;  // changes nothing
  if (m.judged_class && class_rank(*m.judged_class) <= class_rank(judging)) return std::nullopt;
  HypothesisResult r;
  r.id = h.id;
  r.title = h.title;
  r.source = h.source;
  r.parameter = h.parameter;
  if (r.parameter && r.parameter->spec_value.empty()) r.parameter->spec_value = spec_value_of(r.parameter->name, g);
  r.judged_class = m.judged_class ? looser(*m.judged_class, judging) : looser(judging, AccuracyClass::fp32_angle);
  const ScopedPrecision precision(diagnose_detail::MistakenTruth::precision_bits(g, m));
  diagnose_detail::MistakenTruth mt(g, m);
  bool differs = m.judged_class.has_value();
  for (const Target& t : targets) {
    const bool table = t.base == "cos" || t.base == "sin";
    if (table && (m.rotary_dim || m.whole_head)) continue;  // another rotary width has tables of another width
    const StoredValues cand(t.candidate->data.data(), t.dt), truth(g.tensor(t.base + ".f64").data.data(), DType::f64);
    for (const bool failing : {true, false})
      for (std::int64_t i : failing ? t.sample.failing : t.sample.passing) {
        const diagnose_detail::MistakenTruth::Value v = mt.at(t.base, i, r.judged_class, t.dt);
        const double c = cand[i];
        if (!differs && !same_value(v.value, truth[i])) differs = true;
        (failing ? r.failing_evaluated : r.passing_evaluated) += 1;
        if (v.saturated) {
          (failing ? r.failing_saturated : r.passing_saturated) += 1;
          continue;
        }
        bool explained;
        double ratio;
        if (std::isfinite(c) && std::isfinite(v.value)) {
          const double e = std::fabs(c - v.value);
          ratio = v.allowed > 0 ? e / v.allowed : (e == 0 ? 0 : check_detail::kInf);
          explained = ratio <= 1;
        } else {
          explained = !std::isfinite(c) && !std::isfinite(v.value);
          ratio = explained ? 0 : check_detail::kInf;
        }
        r.max_ratio = std::max(r.max_ratio, ratio);
        (failing ? r.failing_explained : r.passing_explained) += explained;
      }
  }
  if (!differs || r.failing_evaluated == 0) return std::nullopt;
  r.matches = r.failing_explained + r.failing_saturated == r.failing_evaluated &&
              r.passing_explained + r.passing_saturated == r.passing_evaluated &&
              2 * r.failing_saturated <= r.failing_evaluated && r.failing_explained > 0;
  return r;
}

bool ranks_before(const HypothesisResult& a, const HypothesisResult& b) {
  if (a.failing_explained * std::max<std::int64_t>(1, b.failing_evaluated) !=
      b.failing_explained * std::max<std::int64_t>(1, a.failing_evaluated))
    return a.failing_fraction() > b.failing_fraction();
  const double pa = a.passing_evaluated ? static_cast<double>(a.passing_explained) / static_cast<double>(a.passing_evaluated) : 1;
  const double pb = b.passing_evaluated ? static_cast<double>(b.passing_explained) / static_cast<double>(b.passing_evaluated) : 1;
  if (pa != pb) return pa > pb;
  // Both explain everything: the stricter class is the more specific explanation.
  if (a.matches && b.matches && a.judged_class != b.judged_class) return class_rank(a.judged_class) < class_rank(b.judged_class);
  return a.max_ratio < b.max_ratio;
}

std::string percent(double f) { return fmt::format("{:.4g}%", 100 * f); }

// The sin tensor beside a diagnosed cos one (the same dtype), for the fits' angles; nullptr if none.
const Tensor* sin_beside_cos(const std::vector<Tensor>& candidate, const CheckReport& report, const std::vector<Target>& targets) {
  for (const Target& t : targets) {
    if (t.base != "cos") continue;
    for (const TensorReport& r : report.tensors)
      if (r.base == "sin" && r.dtype == t.candidate->dtype)
        for (const Tensor& c : candidate)
          if (c.name == r.candidate_name) return &c;
  }
  return nullptr;
}

// Pairs of (at most six of) the best partial catalogue explanations, composed; the matching ones.
void compose_pairs(const GoldenSet& g, const std::vector<Target>& targets, std::vector<const Hypothesis*> partial,
                   Diagnosis& d) {
  std::stable_sort(partial.begin(), partial.end(), [&](const Hypothesis* a, const Hypothesis* b) {
    auto of = [&](const Hypothesis* h) {
      return std::find_if(d.ranked.begin(), d.ranked.end(), [&](const HypothesisResult& r) { return r.id == h->id; });
    };
    return of(a) < of(b);
  });
  if (partial.size() > 6) partial.resize(6);
  std::sort(partial.begin(), partial.end());  // catalogue order: a pair is named the same whatever the ranking
  for (std::size_t a = 0; a < partial.size(); ++a)
    for (std::size_t b = a + 1; b < partial.size(); ++b) {
      const std::optional<Mistake> m = Mistake::compose(partial[a]->mistake, partial[b]->mistake);
      if (!m) continue;
      const Hypothesis both{partial[a]->id + "+" + partial[b]->id, partial[a]->title + ", and " + partial[b]->title,
                            partial[a]->source + "; " + partial[b]->source, *m, std::nullopt};
      if (std::optional<HypothesisResult> r = evaluate(g, targets, both, d.judged_class); r && r->matches)
        d.pairs.push_back(std::move(*r));
    }
  std::stable_sort(d.pairs.begin(), d.pairs.end(), ranks_before);
}

// Which way a LongRoPE swap went on this set: " (here: ...)", or "" for other hypotheses.
std::string longrope_direction(const HypothesisResult& r, const GoldenSet& g) {
  if (r.id != "longrope-factors-swapped") return "";
  const std::int64_t orig = effective_original_max_positions(g.spec().rope);
  const std::string len = g.seq_len() ? fmt::format("sequence length {}", *g.seq_len()) : "no sequence length";
  return g.seq_len() && *g.seq_len() > orig
             ? fmt::format(" (here: the short factors at {}, past original_max_position_embeddings {})", len, orig)
             : fmt::format(" (here: the long factors at {}, within original_max_position_embeddings {})", len, orig);
}

// The conclusion line from the ranking (diagnosis.conclusion).
std::string conclude(const Diagnosis& d, const GoldenSet& g) {
  const std::string over = fmt::format("{} evaluated of {} failing, and {} passing", d.failing_evaluated,
                                       d.failing_elements, d.passing_evaluated);
  auto undiscriminated = [](const HypothesisResult& r) {
    return r.failing_saturated == 0
               ? std::string()
               : fmt::format("; {} of the failing elements not discriminated (the bound around this mistake is "
                             "saturated there)",
                             r.failing_saturated);
  };
  if (!d.ranked.empty() && d.ranked.front().matches) {
    const HypothesisResult& r = d.ranked.front();
    const std::string stats = fmt::format("max error {} of the {} bound over {} of the failing elements ({})",
                                          g4(r.max_ratio), accuracy::to_string(r.judged_class),
                                          percent(r.failing_fraction()), over);
    std::string c;
    if (r.parameter) {
      c = fmt::format("{} {} fits every failing element; the spec says {} ({}): {}", r.parameter->name, r.parameter->value,
                      r.parameter->spec_value, r.title, stats);
    } else {
      const std::string factor =
          r.id.rfind("attention-factor", 0) == 0 ? " (the attention factor is " + g4(g.attention_factor()) + ")" : "";
      c = fmt::format("matches the truth computed with {}{}{}: {}", r.title, factor, longrope_direction(r, g), stats);
    }
    c += undiscriminated(r);
    std::vector<std::string> also;
    for (std::size_t k = 1; k < d.ranked.size(); ++k) {
      const HypothesisResult& o2 = d.ranked[k];
      // A looser class than the match's holds whenever the match does: not another explanation.
      const bool implied = o2.id.rfind("class-", 0) == 0 && class_rank(o2.judged_class) > class_rank(r.judged_class);
      if (o2.matches && !implied) also.push_back(o2.id);
    }
    if (!also.empty()) c += "; also consistent with: " + check_detail::join(also);
    return c;
  }
  if (!d.pairs.empty()) {
    const HypothesisResult& r = d.pairs.front();
    return fmt::format("no single known mistake explains this; two at once do: {}: max error {} of the {} bound over 100% "
                       "of the failing elements ({})",
                       r.title, g4(r.max_ratio), accuracy::to_string(r.judged_class), over);
  }
  // The closest one is named only when it explains most of the failing elements: a minority is no hint.
  if (!d.ranked.empty() && 2 * d.ranked.front().failing_explained > d.ranked.front().failing_evaluated) {
    const HypothesisResult& r = d.ranked.front();
    return fmt::format(
        "no known mistake explains this: the closest, {}, brings {} of the failing elements and {} of the passing "
        "sample inside the {} bound ({})",
        r.title, percent(r.failing_fraction()),
        percent(r.passing_evaluated ? static_cast<double>(r.passing_explained) / static_cast<double>(r.passing_evaluated) : 1.0),
        accuracy::to_string(r.judged_class), over);
  }
  return "no known mistake explains this (" + over + ")";
}

}  // namespace

Diagnosis diagnose(const GoldenSet& g, const std::vector<Tensor>& candidate, const CheckReport& report,
                   const DiagnoseOptions& o, bool all_tensors) {
  const auto t0 = std::chrono::steady_clock::now();
  Diagnosis d;
  const Criterion& cr = report.criterion;
  d.judged_class = cr.kind == Criterion::Kind::accuracy_class && cr.accuracy_class != AccuracyClass::exact
                       ? cr.accuracy_class
                       : AccuracyClass::fp32_angle;
  auto finish = [&] {
    d.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return d;
  };
  if (!g.is_rope()) {
    d.applicable = false;
    d.not_applicable_reason = "the catalogue covers RoPE; this golden set is sinusoidal";
    d.conclusion = "no diagnosis: " + d.not_applicable_reason;
    return finish();
  }
  std::vector<Target> targets;
  for (const TensorReport& t : report.tensors) {
    if (!all_tensors && t.verdict != Verdict::fail) continue;
    if (t.base != "cos" && t.base != "sin" && t.base != "q_rot" && t.base != "k_rot" && t.base != "k_pe_rot") continue;
    const auto it = std::find_if(candidate.begin(), candidate.end(), [&](const Tensor& c) { return c.name == t.candidate_name; });
    if (it == candidate.end()) continue;
    Target tg{t.base, &*it, *check_detail::float_dtype(it->dtype),
              diagnose_detail::sample_elements(g, t.golden_name, *it, d.judged_class, o)};
    d.tensors.push_back(t.golden_name);
    d.failing_elements += tg.sample.failing_total;
    d.failing_evaluated += static_cast<std::int64_t>(tg.sample.failing.size());
    d.passing_evaluated += static_cast<std::int64_t>(tg.sample.passing.size());
    targets.push_back(std::move(tg));
  }
  const std::string judged = std::string(accuracy::to_string(d.judged_class));
  if (d.failing_elements == 0) {
    d.conclusion = "nothing to diagnose: no element is outside the " + judged + " bound";
    return finish();
  }

  std::vector<const Hypothesis*> partial;
  for (const Hypothesis& h : diagnosis_catalogue())
    if (std::optional<HypothesisResult> r = evaluate(g, targets, h, d.judged_class)) {
      if (r->failing_explained > 0 && !h.mistake.judged_class) partial.push_back(&h);
      d.ranked.push_back(std::move(*r));
    }
  if (o.fit)  // the fitted parameters, judged exactly like the catalogue (fit_hypotheses keeps what it computes apart)
    for (const Hypothesis& h :
         diagnose_detail::fit_hypotheses(g, targets, sin_beside_cos(candidate, report, targets),
                                         looser(d.judged_class, AccuracyClass::fp32_angle), d.fits))
      if (std::optional<HypothesisResult> r = evaluate(g, targets, h, d.judged_class)) d.ranked.push_back(std::move(*r));
  std::stable_sort(d.ranked.begin(), d.ranked.end(), ranks_before);
  if (!(!d.ranked.empty() && d.ranked.front().matches) && o.try_pairs) compose_pairs(g, targets, partial, d);
  d.conclusion = conclude(d, g);
  return finish();
}

}  // namespace ropecheck::checker
