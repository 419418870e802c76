// JUnit XML for CI systems (`--junit FILE` of check, props and drift --compare): one testcase per
// checked tensor / property (per output dtype) / compared pair. A fail is a <failure> with the one-line
// reason as its message and the diagnosis as its text; not-tested is <skipped> with the reason, never
// a pass. The structure is the one Jenkins, GitLab and GitHub test reporters read (testsuites >
// testsuite > testcase; tests/python/package/junit.xsd, checked by the package's tests).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropecheck/checker/run_check.hpp"
#include "ropecheck/core/verdict.hpp"

namespace ropecheck::cli {

struct JunitCase {
  std::string classname, name;
  Verdict verdict = Verdict::pass;
  std::string message;  // one line: the reason (fail, not-tested)
  std::string details;  // the diagnosis (fail)
};

std::string junit_xml(const std::string& suite, const std::vector<JunitCase>& cases, double seconds);

// The cases of each command, from its JSON report (checker/CHECK_REPORT.md, props/PROPERTIES.md,
// drift/DRIFT.md's compare.json).
std::vector<JunitCase> check_junit_cases(const nlohmann::json& report);
// A check run's: its report's cases, and a failing "baseline" case when an error grew past --max-growth.
std::vector<JunitCase> check_junit_cases(const checker::CheckOutcome& outcome);
std::vector<JunitCase> props_junit_cases(const nlohmann::json& report);
JunitCase drift_compare_junit_case(const std::string& spec, const std::string& a, const std::string& b, Verdict verdict,
                                   const std::string& reason);

}  // namespace ropecheck::cli
