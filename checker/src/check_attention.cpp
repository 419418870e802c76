// check_attention_outputs (attention_outputs.hpp): every output of the candidate judged against the set's
// truth with the output class of the criterion (ERROR_MODEL.md 16.4, output_bound), or --max-ulp / --atol
// on the output itself. One pass per class (one class's rotated-element bounds held at a time); in each,
// chunks of tokens run on the workers, their results merged in chunk order: the report does not depend
// on the thread count.
#include <algorithm>
#include <cmath>

#include "attention_block.hpp"
#include "check_internal.hpp"
#include "ropecheck/checker/attention_outputs.hpp"
#include "ropecheck/io/memory_budget.hpp"

namespace ropecheck::checker {

using accuracy::AccuracyClass;
using accuracy::kAccuracyClasses;

std::vector<std::string> attention_output_names(const golden::GoldenSet& g) {
  std::vector<std::string> out;
  for (const golden::ManifestTensor& t : g.tensors())
    if (t.role == "attention" && t.name.rfind("attention_out.", 0) == 0) out.push_back(t.name);
  return out;
}

AttentionParams attention_params_of(const golden::GoldenSet& g) { return check_detail::block_params(g); }

// A named namespace, not an anonymous one: the checker compiles as one unit (checker_unit.cpp).
namespace attention_check {

constexpr std::int64_t kChunkTokens = 16;

struct Partial {
  std::int64_t passed = 0, failed = 0, untested = 0, identical = 0, nonfinite = 0;
  std::int64_t violations = 0, saturated = 0;  // this pass's class
  double max_abs = 0, worst_score = 0, worst_margin = 0;
  std::vector<OutputElement> worst;
};

bool ranks_before(const OutputElement& a, const OutputElement& b) {
  const double sa = std::isnan(a.score) ? check_detail::kInf : a.score, sb = std::isnan(b.score) ? check_detail::kInf : b.score;
  return sa != sb ? sa > sb : a.index < b.index;
}

void keep_worst(std::vector<OutputElement>& w, std::size_t K) {
  std::sort(w.begin(), w.end(), ranks_before);
  if (w.size() > K) w.resize(K);
}

// One pass over every output: under class `cls` (nullopt: the criterion's ulp / tolerance), deciding
// the elements' verdicts when `decides`, else only tallying the class.
struct Judge {
  const check_detail::AttentionBlock& b;
  const Criterion& cr;
  DType dt;
  std::span<const double> cand, same;
  std::optional<AccuracyClass> cls;
  bool decides;
  const check_detail::AttentionBlock::ClassErrors* errors;
  std::size_t K;

  void run(std::int64_t i0, std::int64_t i1, Partial& out) const {
    check_detail::AttentionBlock::Row row;
    for (std::int64_t i = i0; i < i1; ++i)
      for (std::int64_t h = 0; h < b.G; ++h) {
        if (cls) b.row(*errors, *cls, dt, i, h, row);
        for (std::int64_t c = 0; c < b.Dv; ++c) one(row, i, h, c, out);
      }
    keep_worst(out.worst, K);
  }

  void one(const check_detail::AttentionBlock::Row& row, std::int64_t i, std::int64_t h, std::int64_t c, Partial& out) const {
    const std::size_t idx = static_cast<std::size_t>((i * b.G + h) * b.Dv + c);
    OutputElement e;
    e.index = static_cast<std::int64_t>(idx), e.token = i, e.head = static_cast<int>(h), e.channel = static_cast<int>(c);
    e.position = b.pos[static_cast<std::size_t>(i)];
    e.candidate = cand[idx], e.truth = b.truth[idx], e.golden = same[idx];
    const bool finite = std::isfinite(e.candidate);
    e.abs_error = finite ? std::fabs(e.candidate - e.truth) : check_detail::kInf;
    const double ulps = e.candidate == e.golden ? 0.0 : (finite ? std::fabs(e.candidate - e.golden) / ulp(e.golden, dt) : check_detail::kInf);
    bool violated = false, sat = false;
    if (cls) {
      double margin = ulps;
      if (*cls != AccuracyClass::exact) {
        const AttentionKeys kr = b.keys(i);
        const accuracy::Column col{b.v.data() + static_cast<std::size_t>(kr.first * b.Dv + c), static_cast<std::size_t>(b.Dv)};
        const accuracy::OutputBound ob = accuracy::output_bound(*cls, dt, row.view(), col, e.truth);
        margin = e.abs_error / ob.bound;
        sat = ob.saturated;
        e.allowed = ob.bound, e.magnitude = ob.magnitude;
      }
      violated = *cls == AccuracyClass::exact ? margin > 0 : !(margin <= 1);
      sat = !violated && sat;
      out.violations += violated, out.saturated += sat;
      out.worst_margin = std::max(out.worst_margin, std::isnan(margin) ? check_detail::kInf : margin);
      e.score = margin, e.saturated = sat;
    } else {
      e.allowed = cr.kind == Criterion::Kind::max_ulp ? cr.max_ulp * ulp(e.truth, dt) : cr.atol + cr.rtol * std::fabs(e.truth);
      e.score = e.allowed > 0 ? e.abs_error / e.allowed : (e.abs_error > 0 ? check_detail::kInf : 0.0);
      violated = !(e.abs_error <= e.allowed);
    }
    if (!decides) return;
    out.nonfinite += !finite;
    if (finite) out.max_abs = std::max(out.max_abs, e.abs_error);
    out.identical += ulps == 0;
    if (violated) ++out.failed;
    else if (sat) ++out.untested;
    else ++out.passed;
    out.worst_score = std::max(out.worst_score, std::isnan(e.score) ? check_detail::kInf : e.score);
    out.worst.push_back(e);
    if (out.worst.size() > 4 * K + 64) keep_worst(out.worst, K);
  }

  // Every token, chunks merged in order.
  Partial all(int threads) const {
    const std::int64_t chunks = (b.T + kChunkTokens - 1) / kChunkTokens;
    std::vector<Partial> parts(static_cast<std::size_t>(chunks));
    check_detail::for_each_chunk(chunks, threads, [&](std::int64_t k) {
      run(k * kChunkTokens, std::min(b.T, (k + 1) * kChunkTokens), parts[static_cast<std::size_t>(k)]);
    });
    Partial a;
    for (const Partial& o : parts) {
      a.passed += o.passed, a.failed += o.failed, a.untested += o.untested;
      a.identical += o.identical, a.nonfinite += o.nonfinite;
      a.violations += o.violations, a.saturated += o.saturated;
      a.max_abs = std::max(a.max_abs, o.max_abs);
      a.worst_score = std::max(a.worst_score, o.worst_score);
      a.worst_margin = std::max(a.worst_margin, o.worst_margin);
      a.worst.insert(a.worst.end(), o.worst.begin(), o.worst.end());
      keep_worst(a.worst, K);
    }
    return a;
  }
};

void set_verdict(AttentionOutputsReport& r, const Criterion& cr) {
  check_detail::set_element_verdict(r, cr, "attention outputs", "bound >= sum_j p_j |V_j|, a zero output passes");
}

}  // namespace attention_check

AttentionOutputsReport check_attention_outputs(const golden::GoldenSet& g, const std::string& golden_name,
                                               const std::string& candidate_name, io::TensorDType dtype,
                                               std::span<const double> cand, const Criterion& criterion, int worst_count,
                                               int threads, std::uint64_t max_memory) {
  using attention_check::Judge;
  using attention_check::Partial;
  const check_detail::AttentionBlock b(g, threads, max_memory);
  const std::optional<DType> dt = check_detail::float_dtype(dtype);
  const ManifestTensor* m = g.find(golden_name);
  const std::int64_t n = b.T * b.G * b.Dv;
  if (!dt || !m || m->role != "attention" || static_cast<std::int64_t>(cand.size()) != n)
    throw InputError(golden_name + ": candidate tensor " + quote_name(candidate_name) + " does not hold the set's " +
                     std::to_string(b.T) + " x " + std::to_string(b.G) + " x " + std::to_string(b.Dv) + " attention outputs");
  const io::Tensor& same_t = g.tensor(golden_name);
  if (same_t.numel() != n) throw InputError(golden_name + ": the golden tensor's shape disagrees with the attention record");
  std::vector<double> same(static_cast<std::size_t>(n));
  decode(same_t.data.data(), *dt, same);
  const std::size_t K = static_cast<std::size_t>(std::max(0, worst_count));
  const bool by_class = criterion.kind == Criterion::Kind::accuracy_class;

  AttentionOutputsReport r;
  r.golden_name = golden_name, r.candidate_name = candidate_name, r.dtype = dtype, r.block = b.argument;
  r.shape = {b.T, b.G, b.Dv}, r.elements = n;
  Partial verdict;
  if (!by_class) {
    verdict = Judge{b, criterion, *dt, cand, same, std::nullopt, true, nullptr, K}.all(threads);
  } else {
    for (AccuracyClass c : kAccuracyClasses) {
      const check_detail::AttentionBlock::ClassErrors e = b.class_errors(c, *dt);
      const bool decides = c == criterion.accuracy_class;
      Partial p = Judge{b, criterion, *dt, cand, same, c, decides, &e, K}.all(threads);
      r.classes.push_back({c, p.violations > 0 ? "violated" : (p.saturated > 0 ? "not-tested" : "satisfied"), p.violations,
                           p.saturated, p.worst_margin});
      if (decides) verdict = std::move(p);
    }
  }
  r.passed = verdict.passed, r.failed = verdict.failed, r.not_tested = verdict.untested;
  r.identical = verdict.identical, r.nonfinite = verdict.nonfinite, r.max_abs_error = verdict.max_abs;
  r.worst_score = verdict.worst_score;
  r.worst = std::move(verdict.worst);
  attention_check::set_verdict(r, criterion);
  return r;
}

}  // namespace ropecheck::checker
