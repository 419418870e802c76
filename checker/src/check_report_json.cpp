// The check report as JSON (the format CHECK_REPORT.md documents).
#include <cmath>

#include "json_number.hpp"
#include "ropecheck/checker/checker.hpp"

namespace ropecheck::checker {

using accuracy::AccuracyClass;

namespace {

// JSON numbers; non-finite values become null (CHECK_REPORT.md).
using detail::num;

}  // namespace

nlohmann::json Criterion::to_json() const {
  switch (kind) {
    case Kind::accuracy_class: return {{"kind", "class"}, {"class", std::string(accuracy::to_string(accuracy_class))}};
    case Kind::max_ulp: return {{"kind", "max-ulp"}, {"max_ulp", max_ulp}};
    case Kind::tolerance: return {{"kind", "tolerance"}, {"atol", atol}, {"rtol", rtol}};
  }
  return nullptr;
}

nlohmann::json CheckReport::to_json() const {
  nlohmann::json ts = nlohmann::json::array();
  for (const TensorReport& t : tensors) {
    nlohmann::json classes = nlohmann::json::array();
    for (const ClassResult& c : t.classes)
      classes.push_back({{"class", std::string(accuracy::to_string(c.accuracy_class))},
                         {"satisfied", c.satisfied},
                         {"state", std::string(to_string(c.state))},
                         {"violations", c.violations},
                         {"first_violating_position", detail::opt_pos(c.first_violating_position)},
                         {"saturated", c.saturated},
                         {"first_saturated_position", detail::opt_pos(c.first_saturated_position)},
                         {"worst_margin", num(c.worst_margin)}});
    nlohmann::json worst_j = nlohmann::json::array();
    for (const ElementReport& e : t.worst)
      worst_j.push_back({{"index", e.index},
                         {"token", e.token},
                         {"position", {e.position.t, e.position.h, e.position.w}},
                         {"stream", e.stream},
                         {"head", e.head < 0 ? nlohmann::json(nullptr) : nlohmann::json(e.head)},
                         {"channel", e.channel < 0 ? nlohmann::json(nullptr) : nlohmann::json(e.channel)},
                         {"pair", e.pair < 0 ? nlohmann::json(nullptr) : nlohmann::json(e.pair)},
                         {"theta", num(e.theta)},
                         {"candidate", num(e.candidate)},
                         {"truth", num(e.truth)},
                         {"golden", num(e.golden)},
                         {"abs_error", num(e.abs_error)},
                         {"ulps", num(e.ulps)},
                         {"magnitude", num(e.magnitude)},
                         {"pair_relative", num(e.pair_relative)},
                         {"score", num(e.score)},
                         {"saturated", e.saturated}});
    nlohmann::json bins_j = nlohmann::json::array();
    for (const PositionBin& b : t.bins)
      bins_j.push_back({{"lo", b.lo},
                        {"hi", b.hi},
                        {"elements", b.elements},
                        {"max_pair_relative", num(b.max_pair_relative)},
                        {"max_ulps", num(b.max_ulps)},
                        {"violations", b.violations},
                        {"saturated", b.saturated},
                        {"error_stats", checker::to_json(b.error)}});
    const std::optional<AccuracyClass> best = t.best_class();
    ts.push_back({{"golden", t.golden_name},
                  {"candidate", t.candidate_name},
                  {"dtype", std::string(to_string(t.dtype))},
                  {"shape", t.shape},
                  {"elements", t.elements},
                  {"identical", t.identical},
                  {"metrics",
                   {{"max_ulps", num(t.max_ulps)},
                    {"mean_ulps", num(t.mean_ulps)},
                    {"max_abs_error", num(t.max_abs_error)},
                    {"max_rel_error", num(t.max_rel_error)},
                    {"nmse", num(t.nmse)},
                    {"nan", t.nan_count},
                    {"inf", t.inf_count},
                    {"nonfinite_mismatches", t.nonfinite_mismatches},
                    {"max_pair_relative", num(t.max_pair_relative)},
                    {"mean_pair_relative", num(t.mean_pair_relative)}}},
                  {"error_stats", checker::to_json(t.error)},
                  {"classes", classes},
                  {"best_class", best ? nlohmann::json(std::string(accuracy::to_string(*best))) : nlohmann::json(nullptr)},
                  {"verdict",
                   {{"pass", t.pass},
                    {"state", std::string(to_string(t.verdict))},
                    {"reason", t.reason},
                    {"violations", t.violations},
                    {"first_violating_position", detail::opt_pos(t.first_violating_position)},
                    {"saturated", t.saturated},
                    {"first_saturated_position", detail::opt_pos(t.first_saturated_position)},
                    {"worst_score", num(t.worst_score)}}},
                  {"worst", worst_j},
                  {"position_bins", bins_j}});
    if (t.passthrough)  // MLA sets only: other reports keep their bytes
      ts.back()["passthrough"] = {{"elements", t.passthrough->elements},
                                  {"differing", t.passthrough->differing},
                                  {"first_differing_position", detail::opt_pos(t.passthrough->first_differing_position)},
                                  {"bit_exact", t.passthrough->differing == 0}};
  }
  nlohmann::json sat = nlohmann::json::array();
  for (AccuracyClass c : satisfied_classes()) sat.push_back(std::string(accuracy::to_string(c)));
  nlohmann::json untested = nlohmann::json::array();
  for (AccuracyClass c : not_tested_classes()) untested.push_back(std::string(accuracy::to_string(c)));
  nlohmann::json out = {{"format", "ropecheck-check-report"},
          {"format_version", kCheckReportVersion},
          {"golden", golden_dir},
          {"spec", spec_name},
          {"golden_fingerprint", golden_fingerprint},
          {"criterion", criterion.to_json()},
          {"pass", pass},
          {"verdict", std::string(to_string(verdict))},
          {"reason", reason},
          {"satisfied_classes", sat},
          {"not_tested_classes", untested},
          {"declined", declined.empty() ? nlohmann::json(nullptr) : nlohmann::json(declined)},
          {"tensors", ts},
          {"ignored_candidate", ignored_candidate},
          {"unchecked_golden", unchecked_golden},
          {"not_tested", not_tested}};
  if (scores) out["scores"] = scores->to_json();  // only for sets with scores: other reports keep their bytes
  if (!attention.empty()) {  // the same for attention blocks: one entry per dtype judged
    nlohmann::json a = nlohmann::json::array();
    for (const AttentionOutputsReport& r : attention) a.push_back(r.to_json());
    out["attention"] = std::move(a);
  }
  if (stores) out["stores"] = stores->to_json();  // likewise
  return out;
}

}  // namespace ropecheck::checker
