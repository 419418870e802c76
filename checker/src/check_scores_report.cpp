// The scores' part of the check report: JSON (CHECK_REPORT.md, "Attention scores") and the terminal block.
#include "check_internal.hpp"
#include "json_number.hpp"
#include "ropecheck/checker/scores.hpp"
#include "ropecheck/io/detail/tensor_io.hpp"

namespace ropecheck::checker {

nlohmann::json ScoreDiagnosis::to_json() const {
  using detail::num;
  nlohmann::json rj = nlohmann::json::array();
  for (const ScoreHypothesisResult& r : ranked)
    rj.push_back({{"id", r.id},
                  {"title", r.title},
                  {"source", r.source},
                  {"judged_class", std::string(accuracy::to_string(r.judged_class))},
                  {"failing_evaluated", r.failing_evaluated},
                  {"failing_explained", r.failing_explained},
                  {"passing_evaluated", r.passing_evaluated},
                  {"passing_explained", r.passing_explained},
                  {"failing_saturated", r.failing_saturated},
                  {"passing_saturated", r.passing_saturated},
                  {"max_ratio", num(r.max_ratio)},
                  {"matches", r.matches},
                  {"same_scores_as", r.same_scores_as}});
  return {{"judged_class", std::string(accuracy::to_string(judged_class))},
          {"failing_scores", failing},
          {"failing_evaluated", failing_evaluated},
          {"passing_evaluated", passing_evaluated},
          {"match", match.empty() ? nlohmann::json(nullptr) : nlohmann::json(match)},
          {"conclusion", conclusion},
          {"ranked", rj}};
}

nlohmann::json classes_json(const std::vector<ScoreClassResult>& classes) {
  nlohmann::json cls = nlohmann::json::array();
  for (const ScoreClassResult& c : classes)
    cls.push_back({{"class", std::string(accuracy::to_string(c.accuracy_class))},
                   {"state", c.state},
                   {"violations", c.violations},
                   {"saturated", c.saturated},
                   {"worst_margin", detail::num(c.worst_margin)}});
  return cls;
}

nlohmann::json ScoresReport::to_json() const {
  using detail::num;
  const nlohmann::json cls = classes_json(classes);
  nlohmann::json w = nlohmann::json::array();
  for (const ScoreElement& e : worst)
    w.push_back({{"index", e.index},
                 {"head", e.head},
                 {"pair", e.pair},
                 {"query_position", e.query_position},
                 {"key_position", e.key_position},
                 {"candidate", num(e.candidate)},
                 {"truth", num(e.truth)},
                 {"golden", num(e.golden)},
                 {"abs_error", num(e.abs_error)},
                 {"allowed", num(e.allowed)},
                 {"magnitude", num(e.magnitude)},
                 {"score", num(e.score)},
                 {"saturated", e.saturated}});
  nlohmann::json out = {{"golden", golden_name},
          {"candidate", candidate_name},
          {"dtype", std::string(to_string(dtype))},
          {"shape", shape},
          {"elements", elements},
          {"passed", passed},
          {"failed", failed},
          {"not_tested", not_tested},
          {"identical", identical},
          {"nonfinite", nonfinite},
          {"max_abs_error", num(max_abs_error)},
          {"classes", cls},
          {"verdict", {{"state", std::string(to_string(verdict))}, {"reason", reason}, {"worst_score", num(worst_score)}}},
          {"worst", w}};
  if (diagnosis) out["diagnosis"] = diagnosis->to_json();
  return out;
}

std::string ScoresReport::summary(const Criterion& criterion) const {
  using check_detail::g4;
  std::string s = fmt::format("\n{}  <-  candidate '{}' ({} {}, {} attention scores)  {}\n", golden_name,
                              sanitize(candidate_name, 64), to_string(dtype), io::shape_string(shape), elements,
                              verdict == ropecheck::Verdict::pass ? "PASS"
                                                                  : (verdict == ropecheck::Verdict::fail ? "FAIL" : "NOT TESTED"));
  s += fmt::format("  {}: passed {}, failed {}, not tested (saturated) {}   identical to golden {}   max abs {}{}\n",
                   criterion.to_string(), passed, failed, not_tested, identical, g4(max_abs_error),
                   nonfinite ? fmt::format("   non-finite {}", nonfinite) : std::string());
  if (!reason.empty()) s += "  " + reason + "\n";
  if (!classes.empty()) {
    s += "  score class  state       violations  saturated  worst margin\n";
    for (const ScoreClassResult& c : classes)
      s += fmt::format("  {:<11}  {:<10}  {:>10}  {:>9}  {}\n", accuracy::to_string(c.accuracy_class), c.state, c.violations,
                       c.saturated, g4(c.worst_margin));
  }
  if (!worst.empty()) {
    s += "  worst scores    score      head  query pos   key pos     candidate      truth          allowed\n";
    for (const ScoreElement& e : worst)
      s += fmt::format("                  {:<9}  {:>4}  {:>9}  {:>9}   {:<13.6g}  {:<13.6g}  {}{}\n", g4(e.score), e.head,
                       e.query_position, e.key_position, e.candidate, e.truth, g4(e.allowed),
                       e.saturated ? "  SATURATED: not tested" : "");
  }
  if (diagnosis) {
    s += fmt::format("  diagnosis from the scores ({} failing under {}, {} evaluated): {}\n", diagnosis->failing,
                     accuracy::to_string(diagnosis->judged_class), diagnosis->failing_evaluated, diagnosis->conclusion);
    for (std::size_t k = 0; k < diagnosis->ranked.size() && k < 5; ++k) {
      const ScoreHypothesisResult& r = diagnosis->ranked[k];
      s += fmt::format("    {}. {:<28} explains {}/{} failing, keeps {}/{} passing, max ratio {}{}\n", k + 1, r.id,
                       r.failing_explained, r.failing_evaluated, r.passing_explained, r.passing_evaluated, g4(r.max_ratio),
                       r.matches ? "  MATCH" : "");
    }
  }
  return s;
}

}  // namespace ropecheck::checker
