// The attention outputs' part of the check report: JSON (CHECK_REPORT.md, "Attention outputs") and the
// terminal block.
#include "check_internal.hpp"
#include "json_number.hpp"
#include "ropecheck/checker/attention_outputs.hpp"
#include "ropecheck/io/detail/tensor_io.hpp"

namespace ropecheck::checker {

nlohmann::json AttentionOutputsReport::to_json() const {
  using detail::num;
  const nlohmann::json cls = classes_json(classes);
  nlohmann::json w = nlohmann::json::array();
  for (const OutputElement& e : worst)
    w.push_back({{"index", e.index},
                 {"token", e.token},
                 {"head", e.head},
                 {"channel", e.channel},
                 {"position", e.position},
                 {"candidate", num(e.candidate)},
                 {"truth", num(e.truth)},
                 {"golden", num(e.golden)},
                 {"abs_error", num(e.abs_error)},
                 {"allowed", num(e.allowed)},
                 {"magnitude", num(e.magnitude)},
                 {"score", num(e.score)},
                 {"saturated", e.saturated}});
  return {{"golden", golden_name},
          {"candidate", candidate_name},
          {"dtype", std::string(to_string(dtype))},
          {"shape", shape},
          {"block", block},
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
}

std::string AttentionOutputsReport::summary(const Criterion& criterion) const {
  using check_detail::g4;
  std::string s = fmt::format("\n{}  <-  candidate '{}' ({} {}, {} attention outputs of block {})  {}\n", golden_name,
                              sanitize(candidate_name, 64), to_string(dtype), io::shape_string(shape), elements, block,
                              verdict == ropecheck::Verdict::pass ? "PASS"
                                                                  : (verdict == ropecheck::Verdict::fail ? "FAIL" : "NOT TESTED"));
  s += fmt::format("  {}: passed {}, failed {}, not tested (saturated) {}   identical to golden {}   max abs {}{}\n",
                   criterion.to_string(), passed, failed, not_tested, identical, g4(max_abs_error),
                   nonfinite ? fmt::format("   non-finite {}", nonfinite) : std::string());
  if (!reason.empty()) s += "  " + reason + "\n";
  if (!classes.empty()) {
    s += "  output class  state       violations  saturated  worst margin\n";
    for (const ScoreClassResult& c : classes)
      s += fmt::format("  {:<12}  {:<10}  {:>10}  {:>9}  {}\n", accuracy::to_string(c.accuracy_class), c.state, c.violations,
                       c.saturated, g4(c.worst_margin));
  }
  if (!worst.empty()) {
    s += "  worst outputs   score      token  head  channel   position   candidate      truth          allowed\n";
    for (const OutputElement& e : worst)
      s += fmt::format("                  {:<9}  {:>5}  {:>4}  {:>7}  {:>9}   {:<13.6g}  {:<13.6g}  {}{}\n", g4(e.score), e.token,
                       e.head, e.channel, e.position, e.candidate, e.truth, g4(e.allowed),
                       e.saturated ? "  SATURATED: not tested" : "");
  }
  return s;
}

}  // namespace ropecheck::checker
