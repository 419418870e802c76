// What the attention scores' and the attention outputs' reports share (CHECK_REPORT.md, "Attention scores",
// "Attention outputs"): both judge elements one by one against a criterion and the class ladder, so their
// JSON fields, worst elements' errors and the summary's counts and ladder are one code.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "check_internal.hpp"
#include "json_number.hpp"
#include "ropecheck/checker/scores.hpp"
#include "ropecheck/core/one_line.hpp"
#include "ropecheck/io/detail/tensor_io.hpp"

namespace ropecheck::checker::check_detail {

// A worst element's JSON: where it sits (`place`: head, pair or token, channel, ...) and its errors.
template <class Element>
nlohmann::json element_json(nlohmann::json place, const Element& e) {
  using detail::num;
  place.update({{"candidate", num(e.candidate)},
                {"truth", num(e.truth)},
                {"golden", num(e.golden)},
                {"abs_error", num(e.abs_error)},
                {"allowed", num(e.allowed)},
                {"magnitude", num(e.magnitude)},
                {"score", num(e.score)},
                {"saturated", e.saturated}});
  return place;
}

// The report's JSON: the shared fields, its worst elements (element_json) and what its kind adds (`extra`).
template <class Report>
nlohmann::json judged_report_json(const Report& r, nlohmann::json worst, const nlohmann::json& extra) {
  using detail::num;
  nlohmann::json j = {
      {"golden", r.golden_name},
      {"candidate", r.candidate_name},
      {"dtype", std::string(to_string(r.dtype))},
      {"shape", r.shape},
      {"elements", r.elements},
      {"passed", r.passed},
      {"failed", r.failed},
      {"not_tested", r.not_tested},
      {"identical", r.identical},
      {"nonfinite", r.nonfinite},
      {"max_abs_error", num(r.max_abs_error)},
      {"classes", classes_json(r.classes)},
      {"verdict", {{"state", std::string(to_string(r.verdict))}, {"reason", r.reason}, {"worst_score", num(r.worst_score)}}},
      {"worst", std::move(worst)}};
  j.update(extra);
  return j;
}

// The summary's head: the title line (`what`: "12 attention scores"), the counts, the reason and the class
// ladder under the column title `ladder` ("score class").
template <class Report>
std::string judged_summary_head(const Report& r, const Criterion& criterion, const std::string& what,
                                std::string_view ladder) {
  const ropecheck::Verdict v = r.verdict;
  std::string s = fmt::format("\n{}  <-  candidate '{}' ({} {}, {})  {}\n", r.golden_name, sanitize(r.candidate_name, 64),
                              to_string(r.dtype), io::shape_string(r.shape), what,
                              v == ropecheck::Verdict::pass ? "PASS" : (v == ropecheck::Verdict::fail ? "FAIL" : "NOT TESTED"));
  s += fmt::format("  {}: passed {}, failed {}, not tested (saturated) {}   identical to golden {}   max abs {}{}\n",
                   criterion.to_string(), r.passed, r.failed, r.not_tested, r.identical, g4(r.max_abs_error),
                   r.nonfinite ? fmt::format("   non-finite {}", r.nonfinite) : std::string());
  if (!r.reason.empty()) s += "  " + r.reason + "\n";
  if (!r.classes.empty()) {
    s += fmt::format("  {}  state       violations  saturated  worst margin\n", ladder);
    for (const ScoreClassResult& c : r.classes)
      s += fmt::format("  {:<{}}  {:<10}  {:>10}  {:>9}  {}\n", accuracy::to_string(c.accuracy_class), ladder.size(),
                       c.state, c.violations, c.saturated, g4(c.worst_margin));
  }
  return s;
}

}  // namespace ropecheck::checker::check_detail
