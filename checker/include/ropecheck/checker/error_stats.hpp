// Boost.Math-style error statistics for the checker: max, mean and RMS of the error next to each other,
// per tensor and per position bin (checker/CHECK_REPORT.md, "Error statistics").
//
// Two units: the verdict criterion's bound (an element's score: error / allowed, so 1 is the bound) and
// u_dt (the pair-relative error: error / (M u_dt)). The max says whether the bound holds; the mean and RMS
// say how the bulk of the elements moved, which is what a regression under a loose bound changes first
// (`check --baseline`, golden/baseline.hpp). Only elements where candidate and truth are both finite count:
// a non-finite mismatch is already a failure of every criterion and is counted on its own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace ropecheck::checker {

struct ErrorMoments {  // of one unit
  double max = 0, mean = 0, rms = 0;
};

struct ErrorStats {
  std::int64_t elements = 0;  // elements counted (candidate and truth both finite)
  ErrorMoments bound;         // units of the verdict criterion's bound (the score)
  ErrorMoments u_dt;          // units of M u_dt (the pair-relative error)
};

// Sums for ErrorStats. Chunks of elements are accumulated separately and merged in a fixed order, so the
// result does not depend on the thread count.
struct ErrorStatsAcc {
  std::int64_t n = 0;
  double max_b = 0, sum_b = 0, sq_b = 0;
  double max_u = 0, sum_u = 0, sq_u = 0;

  void add(double bound_units, double udt_units) {
    ++n;
    if (bound_units > max_b) max_b = bound_units;
    sum_b += bound_units;
    sq_b += bound_units * bound_units;
    if (udt_units > max_u) max_u = udt_units;
    sum_u += udt_units;
    sq_u += udt_units * udt_units;
  }
  void merge(const ErrorStatsAcc& o);
  ErrorStats result() const;
};

// {"elements": N, "bound": {"max", "mean", "rms"}, "u_dt": {"max", "mean", "rms"}}; non-finite numbers as null.
nlohmann::json to_json(const ErrorStats& s);
// The inverse (null read as +inf); nullopt when `j` does not have that form.
std::optional<ErrorStats> error_stats_from_json(const nlohmann::json& j);
// "max 0.31 mean 0.012 rms 0.034" for one unit.
std::string compact(const ErrorMoments& m);

}  // namespace ropecheck::checker
