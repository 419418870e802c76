// The check report as text (what `ropecheck check` prints).
#include <cstdint>
#include <optional>

#include "check_internal.hpp"
#include "ropecheck/io/detail/tensor_io.hpp"

namespace ropecheck::checker {

using accuracy::AccuracyClass;
using io::shape_string;
using check_detail::g4;
using check_detail::join;
using check_detail::note_first;

std::string Criterion::to_string() const {
  switch (kind) {
    case Kind::accuracy_class: return "class " + std::string(accuracy::to_string(accuracy_class));
    case Kind::max_ulp: return "max-ulp " + g4(max_ulp);
    case Kind::tolerance: return "atol " + g4(atol) + " rtol " + g4(rtol);
  }
  return "?";
}

std::string CheckReport::summary() const {
  std::string s;
  s += fmt::format("ropecheck check: golden {} (spec {}), criterion {}\n", golden_dir, spec_name, criterion.to_string());
  const bool crit_exact =
      criterion.kind == Criterion::Kind::accuracy_class && criterion.accuracy_class == AccuracyClass::exact;
  for (const TensorReport& t : tensors) {
    s += fmt::format("\n{}  <-  candidate '{}' ({} {}, {} elements)  {}\n", t.golden_name,
                     sanitize(t.candidate_name, 64), to_string(t.dtype), shape_string(t.shape), t.elements,
                     t.verdict == ropecheck::Verdict::pass ? "PASS"
                                                           : (t.verdict == ropecheck::Verdict::fail ? "FAIL" : "NOT TESTED"));
    if (t.verdict == ropecheck::Verdict::not_tested) s += "  not tested: " + t.reason + "\n";
    s += fmt::format("  error      max {} ulp (mean {})   max abs {}   max rel {}   NMSE {}\n", g4(t.max_ulps),
                     g4(t.mean_ulps), g4(t.max_abs_error), g4(t.max_rel_error), g4(t.nmse));
    s += fmt::format("  pair-rel   max {} u (mean {} u), u = unit roundoff of {}   identical to golden: {:.2f}%\n",
                     g4(t.max_pair_relative), g4(t.mean_pair_relative), to_string(t.dtype),
                     t.elements ? 100.0 * static_cast<double>(t.identical) / static_cast<double>(t.elements) : 100.0);
    s += "  vs bound   " + compact(t.error.bound) + "   in u: " + compact(t.error.u_dt) + "\n";
    if (t.nan_count || t.inf_count || t.nonfinite_mismatches)
      s += fmt::format("  non-finite NaN {}, Inf {}, where the truth is finite (or the reverse): {}\n", t.nan_count,
                       t.inf_count, t.nonfinite_mismatches);
    s += "  class        holds  violations  first position  worst margin\n";
    for (const ClassResult& c : t.classes) {
      const bool exact = c.accuracy_class == AccuracyClass::exact;
      const bool untested = c.state == ClassState::not_tested;
      s += fmt::format("  {:<11}  {:<5}  {:>10}  {:>14}  {}{}{}\n", accuracy::to_string(c.accuracy_class),
                       c.satisfied ? "yes" : (untested ? "n/t" : "no"), c.violations,
                       c.first_violating_position ? std::to_string(*c.first_violating_position) : "-",
                       g4(c.worst_margin), exact ? " ulp from golden" : "",
                       untested ? fmt::format("  not tested: saturated from position {} ({} element{})",
                                              c.first_saturated_position.value_or(-1), c.saturated,
                                              c.saturated == 1 ? "" : "s")
                                : std::string());
    }
    if (!t.worst.empty()) {
      s += fmt::format("  worst elements (score: {})\n",
                  criterion.kind == Criterion::Kind::accuracy_class
                      ? (crit_exact ? "ulps from the golden value" : "error / class bound")
                      : (criterion.kind == Criterion::Kind::max_ulp ? "ulps / max-ulp" : "error / (atol + rtol |truth|)"));
      s += "    score      token  position             head  chan  pair  theta       candidate      truth          ulps      pair-rel\n";
      for (const ElementReport& e : t.worst) {
        const std::string pos = e.position.t == e.position.h && e.position.h == e.position.w
                                    ? std::to_string(e.position.t)
                                    : fmt::format("{}/{}/{}", e.position.t, e.position.h, e.position.w);
        s += fmt::format("    {:<9}  {:>5}  {:<19}  {:>4}  {:>4}  {:>4}  {:<10}  {:<13.6g}  {:<13.6g}  {:<8}  {}{}\n",
                         g4(e.score), e.token, pos, e.head < 0 ? "-" : std::to_string(e.head),
                         e.channel < 0 ? "-" : std::to_string(e.channel), e.pair < 0 ? "-" : std::to_string(e.pair),
                         g4(e.theta), e.candidate, e.truth, g4(e.ulps), g4(e.pair_relative),
                         e.saturated ? "  SATURATED: not tested (any output of this magnitude passes)" : "");
      }
    }
    s += "  by position  elements  max pair-rel (u)  max ulp  violations  saturated  rms pair-rel (u)  rms vs bound\n";
    for (const PositionBin& b : t.bins) {
      const std::string range = b.lo == 0 ? "[0, 1)" : fmt::format("[{}, {})", b.lo, b.hi);
      s += fmt::format("  {:<22} {:>9}  {:>16}  {:>7}  {:>10}  {:>9}  {:>16}  {:>12}\n", range, b.elements,
                       g4(b.max_pair_relative), g4(b.max_ulps), b.violations, b.saturated, g4(b.error.u_dt.rms),
                       g4(b.error.bound.rms));
    }
  }
  if (scores) s += scores->summary(criterion);
  for (const AttentionOutputsReport& a : attention) s += a.summary(criterion);
  if (stores) s += "\n" + stores->summary();
  if (!ignored_candidate.empty()) s += "\nignored candidate tensors (no golden output): " + join(ignored_candidate) + "\n";
  if (!unchecked_golden.empty())
    s += fmt::format("{}{} golden outputs not checked (no candidate tensor, an f64 truth copy, or outside --only); "
                     "asked for but not tested: {}\n",
                     ignored_candidate.empty() ? "\n" : "", unchecked_golden.size(), join(not_tested));
  std::vector<std::string> sat, untested;
  for (AccuracyClass c : satisfied_classes()) sat.emplace_back(accuracy::to_string(c));
  for (AccuracyClass c : not_tested_classes()) untested.emplace_back(accuracy::to_string(c));
  // A class no tensor violates but some tensor does not test is named apart, never as satisfied.
  std::string untested_note = untested.empty() ? "" : "; classes not tested (saturated): " + join(untested);
  if (scores)  // the scores' own verdict (their classes are not the rotated elements')
    untested_note += fmt::format("; attention scores: {} passed, {} failed, {} not tested", scores->passed, scores->failed,
                                 scores->not_tested);
  for (const AttentionOutputsReport& a : attention)
    untested_note += fmt::format("; {}: {} passed, {} failed, {} not tested", a.golden_name, a.passed, a.failed, a.not_tested);
  std::int64_t violations = 0, failing = 0;
  std::optional<std::int64_t> first;
  for (const TensorReport& t : tensors) {
    violations += t.violations;
    if (!t.pass) ++failing;
    if (t.first_violating_position) note_first(first, *t.first_violating_position);
  }
  std::size_t judged = tensors.size();
  if (scores) {  // the scores tensor counts as one more (its first failure has no single position)
    violations += scores->failed;
    failing += scores->verdict != ropecheck::Verdict::pass;
    ++judged;
  }
  for (const AttentionOutputsReport& a : attention) {  // the same for each dtype of the attention outputs
    violations += a.failed;
    failing += a.verdict == ropecheck::Verdict::fail;
    ++judged;
  }
  if (stores) {  // each store counts as one more tensor
    for (const StoreCheck& c : stores->stores) violations += c.failed + c.groups_failed, failing += c.verdict == ropecheck::Verdict::fail;
    judged += stores->stores.size();
  }
  if (pass)
    s += fmt::format("\nPASS: {} holds on every element of {} tensor{}; classes satisfied: {}{}\n", criterion.to_string(),
                     judged, judged == 1 ? "" : "s", join(sat), untested_note);
  else if (verdict == ropecheck::Verdict::not_tested)
    s += fmt::format("\nNOT TESTED: nothing failed, but not everything asked for was tested: {}; classes satisfied: {}{}\n",
                     reason, join(sat), untested_note);
  else
    s += fmt::format("\nFAIL: {} violated by {} element{} in {} of {} tensor{}{}; classes satisfied: {}{}\n",
                     criterion.to_string(), violations, violations == 1 ? "" : "s", failing, judged,
                     judged == 1 ? "" : "s",
                     first || !(scores || !attention.empty() || stores) ? fmt::format(" (first at position {})", first.value_or(-1)) : std::string(),
                     join(sat), untested_note);
  return s;
}

}  // namespace ropecheck::checker
