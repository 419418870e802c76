// The quantized stores' part of the check report: JSON (CHECK_REPORT.md, "Quantized stores") and the
// terminal block.
#include "check_internal.hpp"
#include "json_number.hpp"
#include "ropecheck/checker/stores.hpp"

namespace ropecheck::checker {

namespace {

nlohmann::json diagnosis_json(const StoreDiagnosis& d) {
  nlohmann::json ranked = nlohmann::json::array();
  for (const StoreHypothesis& h : d.ranked)
    ranked.push_back({{"id", h.id},
                      {"title", h.title},
                      {"source", h.source},
                      {"failing", h.failing},
                      {"failing_explained", h.failing_explained},
                      {"compared", h.compared},
                      {"agreeing", h.agreeing},
                      {"matches", h.matches}});
  return {{"failing", d.failing},
          {"match", d.match ? nlohmann::json(*d.match) : nlohmann::json(nullptr)},
          {"conclusion", d.conclusion},
          {"ranked", ranked},
          {"unchanged", d.unchanged}};
}

}  // namespace

nlohmann::json StoresReport::to_json() const {
  using detail::num;
  nlohmann::json all = nlohmann::json::array();
  for (const StoreCheck& s : stores) {
    nlohmann::json w = nlohmann::json::array();
    for (const StoreElement& e : s.worst)
      w.push_back({{"index", e.index},
                   {"token", e.token},
                   {"head", e.head},
                   {"channel", e.channel},
                   {"golden_code", e.golden_code},
                   {"candidate_code", e.candidate_code},
                   {"candidate", num(e.candidate)},
                   {"exact", num(e.exact)},
                   {"budget", num(e.budget)},
                   {"margin", num(e.margin)},
                   {"verdict", std::string(ropecheck::to_string(e.verdict))}});
    nlohmann::json one = {{"golden", s.golden_name},
                   {"candidate", s.candidate_name},
                   {"store", s.store},
                   {"elements", {{"count", s.elements}, {"passed", s.passed}, {"failed", s.failed}, {"not_tested", s.not_tested}}},
                   {"scale_groups",
                    {{"count", s.groups}, {"passed", s.groups_passed}, {"failed", s.groups_failed}, {"not_tested", s.groups_not_tested}}},
                   {"verdict", std::string(ropecheck::to_string(s.verdict))},
                   {"worst", w}};
    if (s.diagnosis) one["diagnosis"] = diagnosis_json(*s.diagnosis);  // failed stores only
    all.push_back(std::move(one));
  }
  return {{"class", std::string(accuracy::to_string(accuracy_class))},
          {"verdict", std::string(ropecheck::to_string(verdict))},
          {"reason", reason},
          {"stores", all}};
}

std::string StoresReport::summary() const {
  using check_detail::g4;
  std::string s = fmt::format("quantized stores (store classes of {}): {}{}\n", accuracy::to_string(accuracy_class),
                              ropecheck::to_string(verdict), reason.empty() ? "" : " - " + reason);
  for (const StoreCheck& c : stores) {
    s += fmt::format("  {:<20} {:<28} {}: elements {} passed, {} failed, {} not tested; scale groups {} passed, {} failed, "
                     "{} not tested\n",
                     c.golden_name, c.store, ropecheck::to_string(c.verdict), c.passed, c.failed, c.not_tested,
                     c.groups_passed, c.groups_failed, c.groups_not_tested);
    for (const StoreElement& e : c.worst)
      s += fmt::format("    {:<10} token {} head {} chan {}: code {} (golden {}), value {} (exact {}, budget {}, margin {})\n",
                       ropecheck::to_string(e.verdict), e.token, e.head, e.channel, e.candidate_code, e.golden_code,
                       g4(e.candidate), g4(e.exact), g4(e.budget), g4(e.margin));
    if (!c.diagnosis) continue;
    s += fmt::format("    diagnosis: {}\n", c.diagnosis->conclusion);
    for (std::size_t k = 0; k < c.diagnosis->ranked.size() && k < 3; ++k) {
      const StoreHypothesis& h = c.diagnosis->ranked[k];
      s += fmt::format("      {:<5} {:<24} {} of {} failing, {} of {} equal\n", h.matches ? "MATCH" : "", h.id,
                       h.failing_explained, h.failing, h.agreeing, h.compared);
    }
  }
  return s;
}

}  // namespace ropecheck::checker
