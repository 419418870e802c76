// check_scores (scores.hpp): every score of the candidate judged against the set's truth with the score
// class of the criterion (ERROR_MODEL.md 16.3, score_bound), or --max-ulp / --atol on the score itself.
// Chunks of pairs run on the workers, their results merged in chunk order: the report does not depend
// on the thread count.
#include <algorithm>
#include <cmath>

#include "check_internal.hpp"
#include "score_diagnosis.hpp"
#include "score_problem.hpp"
#include "ropecheck/checker/scores.hpp"

namespace ropecheck::checker {

using accuracy::AccuracyClass;
using accuracy::kAccuracyClasses;

std::vector<std::string> score_outputs(const golden::GoldenSet& g) {
  std::vector<std::string> out;
  for (const golden::ManifestTensor& t : g.tensors())
    if (t.role == "score" && t.name.rfind("scores.", 0) == 0) out.push_back(t.name);
  return out;
}

// A named namespace, not an anonymous one: the checker compiles as one unit (checker_unit.cpp).
namespace score_check {

constexpr std::int64_t kChunkPairs = 256;

struct ClassTally {
  std::int64_t violations = 0, saturated = 0;
  double worst = 0;
};

struct Partial {
  std::int64_t passed = 0, failed = 0, untested = 0, identical = 0, nonfinite = 0;
  double max_abs = 0, worst_score = 0;
  std::array<ClassTally, kAccuracyClasses.size()> classes{};
  std::vector<ScoreElement> worst;
};

bool ranks_before(const ScoreElement& a, const ScoreElement& b) {
  const double sa = std::isnan(a.score) ? check_detail::kInf : a.score, sb = std::isnan(b.score) ? check_detail::kInf : b.score;
  return sa != sb ? sa > sb : a.index < b.index;
}

void keep_worst(std::vector<ScoreElement>& w, std::size_t K) {
  std::sort(w.begin(), w.end(), ranks_before);
  if (w.size() > K) w.resize(K);
}

// The ulps between a candidate score and the correctly rounded one (exact's margin).
double ulps_from(double c, double golden, DType dt) {
  if (c == golden) return 0;
  if (!std::isfinite(c)) return check_detail::kInf;
  return std::fabs(c - golden) / ulp(golden, dt);
}

struct Judge {
  const check_detail::ScoreProblem& p;
  const Criterion& cr;
  DType dt;
  std::span<const double> cand, same;
  bool class_criterion;
  std::size_t K;

  void run(std::int64_t p0, std::int64_t p1, Partial& out) const {
    check_detail::ScoreProblem::Cache cache(p, dt);
    for (std::int64_t h = 0; h < p.G; ++h)
      for (std::int64_t j = p0; j < p1; ++j) one(cache, h, j, out);
    keep_worst(out.worst, K);
  }

  void one(check_detail::ScoreProblem::Cache& cache, std::int64_t h, std::int64_t j, Partial& out) const {
    const std::size_t i = static_cast<std::size_t>(h * p.N + j);
    ScoreElement e;
    e.index = static_cast<std::int64_t>(i), e.head = static_cast<int>(h), e.pair = j;
    e.query_position = p.qpos[static_cast<std::size_t>(j)], e.key_position = p.kpos[static_cast<std::size_t>(j)];
    e.candidate = cand[i], e.truth = p.truth[i], e.golden = same[i];
    const bool finite = std::isfinite(e.candidate);
    e.abs_error = finite ? std::fabs(e.candidate - e.truth) : check_detail::kInf;
    out.nonfinite += !finite;
    if (finite) out.max_abs = std::max(out.max_abs, e.abs_error);
    const double ulps = ulps_from(e.candidate, e.golden, dt);
    out.identical += ulps == 0;
    bool violated = false;
    if (class_criterion) {
      for (std::size_t c = 0; c < kAccuracyClasses.size(); ++c) {
        ClassTally& t = out.classes[c];
        double margin = ulps;
        bool sat = false;
        if (kAccuracyClasses[c] != AccuracyClass::exact) {
          const accuracy::ScoreBound b = p.bound(cache, kAccuracyClasses[c], dt, h, j);
          margin = e.abs_error / b.stored;
          sat = b.saturated;
          if (kAccuracyClasses[c] == cr.accuracy_class) e.allowed = b.stored, e.magnitude = b.magnitude;
        }
        const bool v = kAccuracyClasses[c] == AccuracyClass::exact ? margin > 0 : !(margin <= 1);
        t.violations += v;
        t.saturated += !v && sat;
        t.worst = std::max(t.worst, std::isnan(margin) ? check_detail::kInf : margin);
        if (kAccuracyClasses[c] == cr.accuracy_class) violated = v, e.score = margin, e.saturated = !v && sat;
      }
    } else {
      e.allowed = cr.kind == Criterion::Kind::max_ulp ? cr.max_ulp * ulp(e.truth, dt) : cr.atol + cr.rtol * std::fabs(e.truth);
      e.score = e.allowed > 0 ? e.abs_error / e.allowed : (e.abs_error > 0 ? check_detail::kInf : 0.0);
      violated = !(e.abs_error <= e.allowed);
    }
    if (violated) ++out.failed;
    else if (e.saturated) ++out.untested;
    else ++out.passed;
    out.worst_score = std::max(out.worst_score, std::isnan(e.score) ? check_detail::kInf : e.score);
    out.worst.push_back(e);
    if (out.worst.size() > 4 * K + 64) keep_worst(out.worst, K);
  }
};

void merge(Partial& into, const Partial& o, std::size_t K) {
  into.passed += o.passed, into.failed += o.failed, into.untested += o.untested;
  into.identical += o.identical, into.nonfinite += o.nonfinite;
  into.max_abs = std::max(into.max_abs, o.max_abs);
  into.worst_score = std::max(into.worst_score, o.worst_score);
  for (std::size_t c = 0; c < into.classes.size(); ++c) {
    into.classes[c].violations += o.classes[c].violations;
    into.classes[c].saturated += o.classes[c].saturated;
    into.classes[c].worst = std::max(into.classes[c].worst, o.classes[c].worst);
  }
  into.worst.insert(into.worst.end(), o.worst.begin(), o.worst.end());
  keep_worst(into.worst, K);
}

void set_verdict(ScoresReport& r, const Criterion& cr) {
  check_detail::set_element_verdict(r, cr, "scores", "bound >= the score's magnitude, a zero score passes");
}

}  // namespace score_check

using namespace score_check;

ScoresReport check_scores(const golden::GoldenSet& g, const std::string& golden_name, const std::string& candidate_name,
                          io::TensorDType dtype, std::span<const double> cand, const Criterion& criterion,
                          int worst_count, int threads, bool diagnose) {
  const check_detail::ScoreProblem p(g);
  const std::optional<DType> dt = check_detail::float_dtype(dtype);
  const io::Tensor& same_t = g.tensor(golden_name);
  if (!dt || static_cast<std::int64_t>(cand.size()) != p.G * p.N || same_t.numel() != p.G * p.N)
    throw InputError(golden_name + ": candidate tensor " + quote_name(candidate_name) + " does not hold the set's " +
                     std::to_string(p.G) + " x " + std::to_string(p.N) + " scores");
  std::vector<double> same(static_cast<std::size_t>(p.G * p.N));
  decode(same_t.data.data(), *dt, same);
  const std::size_t K = static_cast<std::size_t>(std::max(0, worst_count));
  const Judge judge{p, criterion, *dt, cand, same, criterion.kind == Criterion::Kind::accuracy_class, K};
  const std::int64_t chunks = (p.N + kChunkPairs - 1) / kChunkPairs;
  std::vector<Partial> parts(static_cast<std::size_t>(chunks));
  check_detail::for_each_chunk(chunks, threads, [&](std::int64_t c) {
    judge.run(c * kChunkPairs, std::min(p.N, (c + 1) * kChunkPairs), parts[static_cast<std::size_t>(c)]);
  });
  Partial all;
  for (const Partial& x : parts) merge(all, x, K);

  ScoresReport r;
  r.golden_name = golden_name, r.candidate_name = candidate_name, r.dtype = dtype;
  r.shape = {p.G, p.N}, r.elements = p.G * p.N;
  r.passed = all.passed, r.failed = all.failed, r.not_tested = all.untested;
  r.identical = all.identical, r.nonfinite = all.nonfinite, r.max_abs_error = all.max_abs;
  if (judge.class_criterion)
    for (std::size_t c = 0; c < kAccuracyClasses.size(); ++c) {
      const ClassTally& t = all.classes[c];
      r.classes.push_back({kAccuracyClasses[c], t.violations > 0 ? "violated" : (t.saturated > 0 ? "not-tested" : "satisfied"),
                           t.violations, t.saturated, t.worst});
    }
  r.worst_score = all.worst_score;
  r.worst = std::move(all.worst);
  set_verdict(r, criterion);
  if (diagnose && r.failed > 0)
    r.diagnosis = check_detail::diagnose_scores(
        g, p, cand, *dt, judge.class_criterion ? criterion.accuracy_class : accuracy::kDefaultAccuracyClass);
  return r;
}

}  // namespace ropecheck::checker
