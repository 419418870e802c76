// The scores' part of the check report: JSON (CHECK_REPORT.md, "Attention scores") and the terminal block.
#include "check_internal.hpp"
#include "judged_report.hpp"
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
  nlohmann::json w = nlohmann::json::array();
  for (const ScoreElement& e : worst)
    w.push_back(check_detail::element_json({{"index", e.index},
                                            {"head", e.head},
                                            {"pair", e.pair},
                                            {"query_position", e.query_position},
                                            {"key_position", e.key_position}},
                                           e));
  nlohmann::json out = check_detail::judged_report_json(*this, std::move(w), nlohmann::json::object());
  if (diagnosis) out["diagnosis"] = diagnosis->to_json();
  return out;
}

std::string ScoresReport::summary(const Criterion& criterion) const {
  using check_detail::g4;
  std::string s = check_detail::judged_summary_head(*this, criterion, fmt::format("{} attention scores", elements), "score class");
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
