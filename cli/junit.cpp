#include "junit.hpp"

#include <fmt/core.h>

namespace ropecheck::cli {
namespace {

// XML 1.0 text and attribute values: the five special characters escaped; control characters other
// than tab / newline (not allowed in XML 1.0 at all) written as \xHH.
std::string xml(const std::string& s, bool attribute) {
  std::string out;
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += attribute ? "&quot;" : "\""; break;
      case '\n': out += attribute ? "&#10;" : "\n"; break;
      case '\t': out += attribute ? "&#9;" : "\t"; break;
      default:
        if (c < 0x20 || c == 0x7f)
          out += fmt::format("\\x{:02x}", c);
        else
          out += ch;
    }
  }
  return out;
}

std::string text_of(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

Verdict verdict_of(const std::string& s) {
  return s == "pass" ? Verdict::pass : s == "fail" ? Verdict::fail : Verdict::not_tested;
}

std::string number(const nlohmann::json& v) { return v.is_null() ? "-" : fmt::format("{:.6g}", v.get<double>()); }

}  // namespace

std::string junit_xml(const std::string& suite, const std::vector<JunitCase>& cases, double seconds) {
  int failures = 0, skipped = 0;
  for (const JunitCase& c : cases) {
    failures += c.verdict == Verdict::fail;
    skipped += c.verdict == Verdict::not_tested;
  }
  const std::string counts = fmt::format(R"(tests="{}" failures="{}" errors="0")", cases.size(), failures);
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += fmt::format("<testsuites name=\"{}\" {} time=\"{:.3f}\">\n", xml(suite, true), counts, seconds);
  out += fmt::format("  <testsuite name=\"{}\" {} skipped=\"{}\" time=\"{:.3f}\">\n", xml(suite, true), counts, skipped,
                     seconds);
  for (const JunitCase& c : cases) {
    out += fmt::format("    <testcase classname=\"{}\" name=\"{}\" time=\"0\"", xml(c.classname, true), xml(c.name, true));
    if (c.verdict == Verdict::pass) {
      out += "/>\n";
      continue;
    }
    out += ">\n";
    if (c.verdict == Verdict::fail)
      out += fmt::format("      <failure type=\"fail\" message=\"{}\">{}</failure>\n", xml(c.message, true), xml(c.details, false));
    else
      out += fmt::format("      <skipped type=\"not-tested\" message=\"{}\"/>\n", xml(c.message, true));
    out += "    </testcase>\n";
  }
  out += "  </testsuite>\n</testsuites>\n";
  return out;
}

std::vector<JunitCase> check_junit_cases(const nlohmann::json& report) {
  std::vector<JunitCase> cases;
  const std::string classname = "ropecheck.check." + text_of(report, "spec");
  for (const nlohmann::json& t : report.at("tensors")) {
    JunitCase c{classname, text_of(t, "golden"), verdict_of(text_of(t.at("verdict"), "state")),
                text_of(t.at("verdict"), "reason"), ""};
    if (c.verdict == Verdict::fail) {
      c.details = "worst elements (score = error / bound; > 1 fails):\n";
      for (const nlohmann::json& e : t.at("worst"))
        c.details += fmt::format("  score {} token {} position {} head {} channel {} pair {}: candidate {} truth {} ({} ulp)\n",
                                 number(e["score"]), e["token"].dump(), e["position"].dump(), e["head"].dump(),
                                 e["channel"].dump(), e["pair"].dump(), number(e["candidate"]), number(e["truth"]),
                                 number(e["ulps"]));
    }
    cases.push_back(std::move(c));
  }
  const bool declined = report.contains("declined") && report["declined"].is_string();
  for (const nlohmann::json& name : report.at("not_tested"))
    cases.push_back({classname, name.get<std::string>(), Verdict::not_tested,
                     declined ? "the kernel declined it: " + report["declined"].get<std::string>()
                              : "no candidate tensor for this golden output",
                     ""});
  // A kernel whose calls failed fails the check whatever its tensors say (cmd_check.cpp).
  if (report.contains("candidate_source") && report["candidate_source"].contains("failures"))
    for (const nlohmann::json& f : report["candidate_source"]["failures"])
      cases.push_back({classname, "kernel " + f.at("outputs").dump(), Verdict::fail, text_of(f, "message"), text_of(f, "message")});
  return cases;
}

std::vector<JunitCase> check_junit_cases(const checker::CheckOutcome& outcome) {
  std::vector<JunitCase> cases = check_junit_cases(outcome.to_json());
  if (outcome.baseline && !outcome.baseline->pass())
    cases.push_back({"ropecheck.check." + outcome.report.spec_name, "baseline", Verdict::fail,
                     "an error grew past --max-growth", outcome.baseline->summary()});
  return cases;
}

std::vector<JunitCase> props_junit_cases(const nlohmann::json& report) {
  std::vector<JunitCase> cases;
  const std::string classname = "ropecheck.props." + text_of(report, "target") + "." + text_of(report, "spec");
  for (const nlohmann::json& p : report.at("properties")) {
    JunitCase c{classname, text_of(p, "name") + "." + text_of(p, "dtype"), verdict_of(text_of(p, "verdict")),
                text_of(p, "reason"), ""};
    if (c.verdict == Verdict::not_tested && !p.value("applicable", true))
      c.message = "not applicable to this spec" + (c.message.empty() ? "" : ": " + c.message);
    if (c.verdict == Verdict::fail)
      c.details = fmt::format("{}\ncounterexample: {}\nreproduce: {}\n", text_of(p, "statement"), text_of(p, "counterexample"),
                              text_of(p, "reproduce"));
    cases.push_back(std::move(c));
  }
  return cases;
}

JunitCase drift_compare_junit_case(const std::string& spec, const std::string& a, const std::string& b, Verdict verdict,
                                   const std::string& reason) {
  return {"ropecheck.drift." + spec, a + " vs " + b, verdict, reason, reason};
}

}  // namespace ropecheck::cli
