// Per-property margin statistics over the cases run (Boost.Math style: the RMS next to the worst), so
// that a target whose margins all grew stays visible while it is still under its tolerance
// (`props --baseline`, props/include/ropecheck/props/suite_baseline.hpp).
#pragma once

#include <cmath>

namespace ropecheck::props {

struct MarginStats {
  int cases = 0;       // cases that measured a margin (skipped cases do not)
  double sum_sq = 0;   // sum of each case's margin squared (a case's margin: its largest error / bound)

  void add(double case_margin) {
    ++cases;
    sum_sq += case_margin * case_margin;
  }
  double rms() const { return cases > 0 ? std::sqrt(sum_sq / cases) : 0.0; }
};

}  // namespace ropecheck::props
