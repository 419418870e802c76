// The attention outputs' part of the check report: JSON (CHECK_REPORT.md, "Attention outputs") and the
// terminal block.
#include "judged_report.hpp"
#include "ropecheck/checker/attention_outputs.hpp"
#include "ropecheck/io/detail/tensor_io.hpp"

namespace ropecheck::checker {

nlohmann::json AttentionOutputsReport::to_json() const {
  nlohmann::json w = nlohmann::json::array();
  for (const OutputElement& e : worst)
    w.push_back(check_detail::element_json(
        {{"index", e.index}, {"token", e.token}, {"head", e.head}, {"channel", e.channel}, {"position", e.position}}, e));
  return check_detail::judged_report_json(*this, std::move(w), {{"block", block}});
}

std::string AttentionOutputsReport::summary(const Criterion& criterion) const {
  using check_detail::g4;
  std::string s = check_detail::judged_summary_head(
      *this, criterion, fmt::format("{} attention outputs of block {}", elements, block), "output class");
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
