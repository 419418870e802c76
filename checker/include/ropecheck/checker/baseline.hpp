// Regression guard for the checker (`ropecheck check --baseline OLD_REPORT.json --max-growth F`): a kernel
// that got 10x worse can still hold its class bound; compared with an earlier report of the same golden
// set and criterion, its error statistics (error_stats.hpp) show it. checker/CHECK_REPORT.md, "Baseline".
//
// Compared, per matched tensor and per position bin: the max and the RMS error in units of u_dt (the
// pair-relative error: it does not depend on the criterion, and a correctly rounded output has at most
// 1 u). A quantity regressed when current > F * max(baseline, floor); the floor (1 u_dt) keeps errors
// within the output's own rounding from ever counting as growth (0 -> 0.4 u is not a regression).
// Growth exactly F passes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropecheck/checker/checker.hpp"
#include "ropecheck/checker/error_stats.hpp"
#include "ropecheck/golden/golden_set.hpp"

namespace ropecheck::checker {

// A baseline that cannot be used (unreadable, malformed, or of another golden set / criterion / tensors).
// The message is one line; the CLI turns it into exit 2.
class BaselineError : public InputError {
 public:
  using InputError::InputError;
};

// A check report read back as a baseline: only what the comparison needs.
struct CheckBaseline {
  struct Bin {
    std::int64_t lo = 0, hi = 0, elements = 0;
    ErrorStats error;
  };
  struct TensorStats {
    std::int64_t elements = 0;
    ErrorStats error;
    std::vector<Bin> bins;
  };
  std::string path;  // as given, for messages
  std::string golden_fingerprint, spec;
  nlohmann::json criterion;
  std::map<std::string, TensorStats> tensors;  // by golden output name
};

// Reads and validates a report written by `ropecheck check --report` (format ropecheck-check-report,
// version 1, with golden_fingerprint and error_stats). BaselineError otherwise, naming the file and the key.
CheckBaseline read_check_baseline(const std::filesystem::path& path);

// Before the check runs: the baseline must be of the same golden set (fingerprint) and criterion.
void require_same_setup(const CheckBaseline& b, const std::string& fingerprint, const Criterion& criterion);

struct GrowthLimit {
  double max_growth = 2;  // F >= 1
  double floor = 1;       // units of u_dt
};

struct BaselineRegression {
  std::string tensor;
  std::optional<std::int64_t> bin_lo, bin_hi;  // nullopt: the whole tensor
  std::string metric;                          // "max" or "rms" (units of u_dt)
  double baseline = 0, current = 0, growth = 0;  // growth = current / max(baseline, floor)
  std::string where() const;                   // "q_rot.f32 positions [4096, 8192) rms"
};

struct BaselineComparison {
  std::string path;
  GrowthLimit limit;
  std::int64_t compared = 0;                     // quantities compared (tensors and bins, max and rms)
  std::optional<BaselineRegression> largest;     // the largest growth seen (regression or not)
  std::vector<BaselineRegression> regressions;   // growth > F; golden output order, tensor before its bins
  bool pass() const { return regressions.empty(); }
  nlohmann::json to_json() const;
  std::string summary() const;  // a few lines; the last is the verdict, "PASS: no regression ..." or "FAIL: regression ..."
};

// After the check: the same tensors (by name and element count) with the same position bins, else
// BaselineError; then every tensor's and bin's max and RMS error in u_dt against the limit.
BaselineComparison compare_with_baseline(const CheckReport& current, const CheckBaseline& baseline, const GrowthLimit& limit);

}  // namespace ropecheck::checker
