// The self-test (mutants.hpp): the suite run on every mutant, which some property must catch, and on
// the correct hf-fp32 kernel with the same spec and options, which must pass.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "ropecheck/props/mutants.hpp"
#include "ropecheck/props/suite.hpp"

namespace ropecheck::props {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

bool SelfTestReport::passed() const {
  return std::all_of(verdicts.begin(), verdicts.end(), [](const MutantVerdict& v) {
    return v.correct_passed && (v.caught || !v.mutant.known_gap.empty());
  });
}

std::string SelfTestReport::table() const {
  std::ostringstream os;
  char line[512];
  os << "mutant -> property that caught it, at position P, margin M (error / bound); seed " << options.seed << ", "
     << options.cases << " cases per property\n";
  std::snprintf(line, sizeof line, "%-24s %-22s %-16s %10s %11s %6s %8s %s\n", "mutant", "spec", "caught by",
                "position P", "margin M", "props", "hf-fp32", "time mutant / hf-fp32");
  os << line;
  for (const MutantVerdict& v : verdicts) {
    const std::string props_col = options.all_properties ? std::to_string(v.properties_failed) + "/" +
                                                               std::to_string(v.properties_run)
                                                         : std::to_string(v.properties_run);
    std::snprintf(line, sizeof line, "%-24s %-22s %-16s %10s %11.4g %6s %8s %6.2f / %.2f s\n", v.mutant.name.c_str(),
                  v.mutant.spec.name.c_str(), v.caught ? v.property.c_str() : "NOT CAUGHT",
                  v.position ? std::to_string(*v.position).c_str() : "-", v.margin, props_col.c_str(),
                  v.correct_passed ? "pass" : "FAIL", v.seconds_mutant, v.seconds_correct);
    os << line;
  }
  os << (options.shrink ? "counterexamples (shrunk):\n" : "counterexamples (as found, not shrunk):\n");
  for (const MutantVerdict& v : verdicts)
    if (v.caught) os << "  " << v.mutant.name << ": " << v.counterexample << "\n";
  for (const MutantVerdict& v : verdicts) {
    if (v.mutant.known_gap.empty()) continue;
    os << "known gap: " << v.mutant.name << ": " << v.mutant.known_gap
       << (v.caught ? " (caught now: remove the known gap)" : "") << "\n";
  }
  for (const MutantVerdict& v : verdicts)
    if (!v.correct_passed) os << "hf-fp32 FAILED on " << v.mutant.spec.name << ":\n" << v.correct_failures;
  return os.str();
}

SelfTestReport run_self_test(const SelfTestOptions& options) {
  SelfTestReport report;
  report.options = options;
  std::vector<MutantInfo> all = mutants();
  for (const std::string& name : options.only)
    if (std::none_of(all.begin(), all.end(), [&](const MutantInfo& m) { return m.name == name; }))
      throw std::invalid_argument("unknown mutant '" + name + "'");
  for (MutantInfo& m : all) {
    if (!options.only.empty() && std::find(options.only.begin(), options.only.end(), m.name) == options.only.end())
      continue;
    MutantVerdict v;
    SuiteOptions so;
    so.cases = options.cases;
    so.seed = options.seed;
    so.max_position = m.max_position;
    so.shrink = options.shrink;
    auto bad = make_mutant_target(m.name);
    const auto t0 = std::chrono::steady_clock::now();
    for (const PropertyInfo& p : list_properties()) {
      so.only = {p.name};
      const SuiteReport rep = run_suite(*bad, &m.spec, so);
      ++v.properties_run;
      for (const PropertyOutcome& o : rep.outcomes) {
        if (o.passed) continue;
        if (v.properties_failed++ == 0) {
          v.caught = true;
          v.property = o.property;
          v.position = o.failing_position;
          v.margin = o.worst_margin;
          v.counterexample = o.counterexample;
          v.reproduce = o.reproduce;
        }
      }
      if (v.caught && !options.all_properties) break;
    }
    v.seconds_mutant = seconds_since(t0);

    so.only.clear();
    auto good = make_hf_fp32_target(m.dtype);
    const auto t1 = std::chrono::steady_clock::now();
    const SuiteReport ok = run_suite(*good, &m.spec, so);
    v.seconds_correct = seconds_since(t1);
    v.correct_passed = ok.passed();
    for (const PropertyOutcome& o : ok.outcomes)
      if (!o.passed)
        v.correct_failures += "  " + o.property + ": " + o.counterexample + "\n    rerun alone: target " + o.reproduce.target +
                              ", seed " + std::to_string(o.reproduce.seed) + ", " + std::to_string(o.reproduce.cases) +
                              " cases, output " + o.reproduce.dtype + "\n";
    v.mutant = std::move(m);
    report.verdicts.push_back(std::move(v));
  }
  return report;
}

}  // namespace ropecheck::props
