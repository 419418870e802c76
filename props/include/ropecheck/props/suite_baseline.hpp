// Regression guard for the property suite (`ropecheck props --baseline OLD_REPORT.json --max-growth F`):
// compared with an earlier `props --report` of the same setup, a property whose worst margin or RMS margin
// (margin_stats.hpp) grew by more than F fails, even while every margin is still under 1.
//
// Same setup: spec, seed, cases, max position, the target's class and dtype (margins are in units of the
// class's bounds), and the same properties; the target's name may differ (an old and a new build of a
// kernel). A margin regressed when current > F * max(baseline, floor); the floor (2^-10 of the bound) keeps
// margins that are noise next to their tolerance (the exact reference's ~1e-20) from counting as growth.
// Growth exactly F passes. props/PROPERTIES.md, "Baseline".
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropecheck/props/suite.hpp"

namespace ropecheck::props {

// A baseline that cannot be used (unreadable, malformed, another setup); one-line message, exit 2.
class SuiteBaselineError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline constexpr double kMarginGrowthFloor = 1.0 / 1024;

struct SuiteBaseline {
  struct Margins {
    double worst = 0, rms = 0;
  };
  std::string path;
  nlohmann::json setup;                       // spec, seed, cases, max_position, class, dtype
  std::map<std::string, Margins> properties;  // by name
};

// Reads a `props --report` file (format ropecheck-props-report, version 1, with rms_margin);
// SuiteBaselineError otherwise, naming the file and the key.
SuiteBaseline read_suite_baseline(const std::filesystem::path& path);

struct MarginRegression {
  std::string property, metric;  // metric: "worst" or "rms"
  double baseline = 0, current = 0, growth = 0;  // growth = current / max(baseline, floor)
};

struct SuiteComparison {
  std::string path;
  double max_growth = 2, floor = kMarginGrowthFloor;
  int compared = 0;
  std::optional<MarginRegression> largest;
  std::vector<MarginRegression> regressions;  // run order, worst before rms
  bool pass() const { return regressions.empty(); }
  nlohmann::json to_json() const;
  std::string summary() const;  // a few lines; the last is "PASS: no regression ..." or "FAIL: regression ..."
};

// Before a run: the baseline's setup must equal `header`'s (suite_header()) and its properties `properties`
// (the run's --only list, or every property). SuiteBaselineError naming the first difference.
void require_same_setup(const SuiteBaseline& baseline, const SuiteReport& header, const std::vector<std::string>& properties);

// After the run (the same checks again, on the report), then every property's worst and RMS margin against
// the limit. SuiteBaselineError when the setup or the property list differs, or max_growth is not a finite
// number >= 1.
SuiteComparison compare_with_baseline(const SuiteReport& current, const SuiteBaseline& baseline, double max_growth,
                                      double floor = kMarginGrowthFloor);

}  // namespace ropecheck::props
