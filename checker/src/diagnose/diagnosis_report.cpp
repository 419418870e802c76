// The diagnosis in the check report: the JSON object "diagnosis" (checker/CHECK_REPORT.md) and the
// text report's section.
#include <cmath>

#include "../check_internal.hpp"
#include "ropecheck/checker/diagnose.hpp"

namespace ropecheck::checker {

namespace {

nlohmann::json num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

nlohmann::json parameter_json(const std::optional<Parameter>& p) {
  if (!p) return nullptr;
  return {{"name", p->name}, {"value", p->value}, {"spec", p->spec_value}};
}

nlohmann::json result_json(const HypothesisResult& r) {
  return {{"id", r.id},
          {"title", r.title},
          {"source", r.source},
          {"judged_class", std::string(accuracy::to_string(r.judged_class))},
          {"failing_evaluated", r.failing_evaluated},
          {"failing_explained", r.failing_explained},
          {"failing_fraction", num(r.failing_fraction())},
          {"passing_evaluated", r.passing_evaluated},
          {"passing_explained", r.passing_explained},
          {"failing_saturated", r.failing_saturated},
          {"passing_saturated", r.passing_saturated},
          {"max_ratio", num(r.max_ratio)},
          {"matches", r.matches},
          {"parameter", parameter_json(r.parameter)}};
}

}  // namespace

nlohmann::json Diagnosis::to_json() const {
  nlohmann::json ranked_j = nlohmann::json::array(), pairs_j = nlohmann::json::array();
  for (const HypothesisResult& r : ranked) ranked_j.push_back(result_json(r));
  for (const HypothesisResult& r : pairs) pairs_j.push_back(result_json(r));
  nlohmann::json fits_j = nlohmann::json::array();
  for (const ParameterFit& f : fits)
    fits_j.push_back({{"id", f.id}, {"parameter", parameter_json(f.parameter)}, {"outcome", f.outcome}});
  const HypothesisResult* best = best_match();
  return {{"applicable", applicable},
          {"judged_class", std::string(accuracy::to_string(judged_class))},
          {"tensors", tensors},
          {"failing_elements", failing_elements},
          {"failing_evaluated", failing_evaluated},
          {"passing_evaluated", passing_evaluated},
          {"match", best ? nlohmann::json(best->id) : nlohmann::json(nullptr)},
          {"conclusion", conclusion},
          {"ranked", ranked_j},
          {"pairs", pairs_j},
          {"fits", fits_j}};
}

std::string Diagnosis::summary() const {
  using check_detail::g4;
  std::string s = "\ndiagnosis: " + conclusion + "\n";
  if (ranked.empty()) return s;
  s += fmt::format("  judged against the exact mistaken computation on {} (failing: outside {})\n",
                   check_detail::join(tensors), accuracy::to_string(judged_class));
  s += "  rank  hypothesis                    class        failing inside  passing inside  max error / bound\n";
  auto line = [&](const std::string& rank, const HypothesisResult& r) {
    // a fitted hypothesis shows its value: fit-base=10000
    const std::string id = r.parameter && r.id.rfind("fit-", 0) == 0 ? r.id + "=" + r.parameter->value : r.id;
    s += fmt::format("  {:<4}  {:<28}  {:<11}  {:>6}/{:<7}  {:>6}/{:<7}  {}{}{}\n", rank, id,
                     accuracy::to_string(r.judged_class), r.failing_explained, r.failing_evaluated, r.passing_explained,
                     r.passing_evaluated, g4(r.max_ratio), r.matches ? "  MATCH" : "",
                     r.failing_saturated + r.passing_saturated > 0
                         ? fmt::format("  ({} not discriminated: saturated bound)", r.failing_saturated + r.passing_saturated)
                         : std::string());
  };
  for (const HypothesisResult& r : pairs) line("2x", r);
  const std::size_t shown = std::min<std::size_t>(ranked.size(), 8);
  for (std::size_t k = 0; k < shown; ++k) line(std::to_string(k + 1), ranked[k]);
  if (ranked.size() > shown) s += fmt::format("  ... {} more in the JSON report\n", ranked.size() - shown);
  return s;
}

}  // namespace ropecheck::checker
