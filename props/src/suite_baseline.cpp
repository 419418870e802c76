#include "ropecheck/props/suite_baseline.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <limits>

namespace ropecheck::props {
namespace {

// snprintf, not fmt: props is an exported library and fmt would be one more package every
// find_package(ropecheck) consumer must find (std::format needs GCC 13; Debian 12 has 12).
std::string g4(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return "inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string brief(const nlohmann::json& j) {
  std::string s = j.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

nlohmann::json num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json("inf"); }

// The setup keys of a report, as the JSON writes them.
nlohmann::json setup_of(const nlohmann::json& report) {
  nlohmann::json s = nlohmann::json::object();
  for (const char* k : {"spec", "seed", "cases", "max_position", "class", "dtype"})
    if (report.contains(k)) s[k] = report[k];
  return s;
}

nlohmann::json regression_json(const MarginRegression& r) {
  return {{"property", r.property}, {"metric", r.metric}, {"baseline", num(r.baseline)}, {"current", num(r.current)},
          {"growth", num(r.growth)}};
}

}  // namespace

SuiteBaseline read_suite_baseline(const std::filesystem::path& path) {
  SuiteBaseline b;
  b.path = path.string();
  auto fail = [&](const std::string& what) -> void { throw SuiteBaselineError("--baseline " + b.path + ": " + what); };
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) fail(std::filesystem::exists(path, ec) ? "not a regular file" : "no such file");
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    std::string m = e.what();
    std::replace(m.begin(), m.end(), '\n', ' ');
    fail("not JSON (" + m + ")");
  }
  if (!j.is_object()) fail("not a JSON object");
  if (!j.contains("format") || j["format"] != "ropecheck-props-report")
    fail("not a props report (format " + brief(j.value("format", nlohmann::json(nullptr))) +
         ", want \"ropecheck-props-report\"; written by an older ropecheck? write the baseline again)");
  if (j.value("format_version", nlohmann::json(nullptr)) != 1) fail("props report format_version is not 1");
  b.setup = setup_of(j);
  for (const char* k : {"spec", "seed", "cases", "max_position", "class", "dtype"})
    if (!b.setup.contains(k)) fail(std::string("has no \"") + k + "\"");
  if (!j.contains("properties") || !j["properties"].is_array() || j["properties"].empty())
    fail("\"properties\" is not a non-empty array");
  auto margin = [&](const nlohmann::json& p, const char* key, const std::string& name) {
    if (!p.contains(key)) fail("property '" + name + "' has no \"" + key + "\"");
    const nlohmann::json& v = p[key];
    if (v == "inf") return std::numeric_limits<double>::infinity();  // how the report writes inf
    if (!v.is_number() || !(v.get<double>() >= 0)) fail("property '" + name + "' \"" + key + "\" is not a margin: " + brief(v));
    return v.get<double>();
  };
  for (const nlohmann::json& p : j["properties"]) {
    if (!p.is_object() || !p.contains("name") || !p["name"].is_string()) fail("a property entry has no \"name\"");
    const std::string name = p["name"].get<std::string>();
    const SuiteBaseline::Margins m{margin(p, "worst_margin", name), margin(p, "rms_margin", name)};
    if (!b.properties.emplace(name, m).second) fail("property '" + name + "' is listed twice");
  }
  return b;
}

void require_same_setup(const SuiteBaseline& baseline, const SuiteReport& header, const std::vector<std::string>& properties) {
  const std::string pre = "--baseline " + baseline.path + ": ";
  const nlohmann::json now = setup_of(header.to_json());
  for (const auto& [k, v] : now.items())
    if (baseline.setup[k] != v)
      throw SuiteBaselineError(pre + "written with " + k + " " + brief(baseline.setup[k]) + ", this run has " + brief(v) +
                               " (a baseline compares the same spec, seed, cases, max position, class and dtype)");
  for (const auto& [name, m] : baseline.properties)
    if (std::find(properties.begin(), properties.end(), name) == properties.end())
      throw SuiteBaselineError(pre + "has property '" + name + "', which this run does not run");
  for (const std::string& name : properties)
    if (!baseline.properties.count(name)) throw SuiteBaselineError(pre + "has no property '" + name + "', which this run runs");
}

SuiteComparison compare_with_baseline(const SuiteReport& current, const SuiteBaseline& baseline, double max_growth, double floor) {
  const std::string pre = "--baseline " + baseline.path + ": ";
  if (!(max_growth >= 1) || !std::isfinite(max_growth))
    throw SuiteBaselineError("--max-growth must be a finite number >= 1, got " + g4(max_growth));
  std::vector<std::string> ran;
  for (const PropertyOutcome& o : current.outcomes) ran.push_back(o.property);
  require_same_setup(baseline, current, ran);
  SuiteComparison out;
  out.path = baseline.path;
  out.max_growth = max_growth;
  out.floor = floor;
  for (const PropertyOutcome& o : current.outcomes) {
    const auto it = baseline.properties.find(o.property);
    if (it == baseline.properties.end()) throw SuiteBaselineError(pre + "has no property '" + o.property + "', which this run ran");
    const std::pair<const char*, std::pair<double, double>> metrics[] = {
        {"worst", {it->second.worst, o.worst_margin}}, {"rms", {it->second.rms, o.margins.rms()}}};
    for (const auto& [metric, values] : metrics) {
      const auto [base, cur] = values;
      const double ref = std::max(base, floor);
      const MarginRegression r{o.property, metric, base, cur, std::isinf(ref) ? (std::isinf(cur) ? 1.0 : 0.0) : cur / ref};
      ++out.compared;
      if (!out.largest || r.growth > out.largest->growth) out.largest = r;
      if (std::isnan(cur) || cur > max_growth * ref) out.regressions.push_back(r);
    }
  }
  return out;
}

nlohmann::json SuiteComparison::to_json() const {
  nlohmann::json regs = nlohmann::json::array();
  for (const MarginRegression& r : regressions) regs.push_back(regression_json(r));
  return {{"path", path},
          {"max_growth", max_growth},
          {"floor", floor},
          {"pass", pass()},
          {"compared", compared},
          {"largest_growth", largest ? regression_json(*largest) : nlohmann::json(nullptr)},
          {"regressions", regs}};
}

std::string SuiteComparison::summary() const {
  std::string s = "baseline " + path + ": worst and RMS margin of every property (floor " + g4(floor) + "), " +
                  std::to_string(compared) + " quantities, limit " + g4(max_growth) + "x\n";
  if (largest)
    s += "  largest growth " + g4(largest->growth) + "x: " + largest->property + " " + largest->metric + " margin (" +
         g4(largest->baseline) + " -> " + g4(largest->current) + ")\n";
  for (const MarginRegression& r : regressions)
    s += "  grew " + g4(r.growth) + "x: " + r.property + " " + r.metric + " margin (" + g4(r.baseline) + " -> " + g4(r.current) + ")\n";
  if (pass())
    s += "PASS: no regression against the baseline (every worst and RMS margin within " + g4(max_growth) + "x the baseline's)\n";
  else
    s += "FAIL: regression against the baseline: " + std::to_string(regressions.size()) + " margin" +
         (regressions.size() == 1 ? "" : "s") + " grew more than " + g4(max_growth) + "x (first: " + regressions.front().property +
         " " + regressions.front().metric + ", " + g4(regressions.front().growth) + "x)\n";
  return s;
}

}  // namespace ropecheck::props
