// Error statistics of a drift sweep: max / RMS accumulators, the per-position and per-bin metric
// set, and the caps that stand in for non-finite outputs (drift/DRIFT.md, "Metrics").
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <vector>

namespace ropecheck::drift {

// Errors of a non-finite output (NaN or infinity) are counted at these caps (and counted in
// Metrics::nonfinite): the largest error a finite answer could have.
inline constexpr double kAngleCap = std::numbers::pi;  // a wrapped angle error is at most pi
inline constexpr double kUnitCap = 2.0;                // two points of the unit circle (cos / sin,
                                                       // rotated values relative to M, shift violation)

// Max and RMS of non-negative errors. NaN must not be added (callers map it to a cap).
struct Stat {
  double max = 0;
  double sumsq = 0;
  std::int64_t count = 0;

  void add(double e) {
    if (e > max) max = e;
    sumsq += e * e;
    ++count;
  }
  void merge(const Stat& o) {
    if (o.max > max) max = o.max;
    sumsq += o.sumsq;
    count += o.count;
  }
  double rms() const { return count > 0 ? std::sqrt(sumsq / static_cast<double>(count)) : 0.0; }
  bool empty() const { return count == 0; }
};

// One position's (or one bin's) measurements of one kernel. Empty stats mean "not measured"
// (a plugin has no angles or f32 rows; a plugin without ropecheck_rope_cos_sin has no table).
struct Metrics {
  std::int64_t samples = 0;  // sampled positions merged in
  Stat angle;     // |wrapped angle error|, rad, over pairs
  Stat trig;      // |cos - exact|, |sin - exact| of the recipe's f32 values (before att and the table cast)
  Stat table;     // the same for the cos / sin table in the storage dtype
  Stat rot_ulp;   // |rotated - exact| / ulp(exact) in the storage dtype, over heads x rotated channels
  Stat rot_rel;   // |rotated - exact| / M, M = att (|x_a| + |x_b|) (the error model's magnitude)
  std::vector<Stat> shift;  // per shift s: |logit(m, n) - logit(m+s, n+s)| / (att^2 |q| |k|), over heads
  std::int64_t nonfinite = 0;  // non-finite outputs (angles, rows, table, rotated values, logits)

  void merge(const Metrics& o) {
    samples += o.samples;
    angle.merge(o.angle);
    trig.merge(o.trig);
    table.merge(o.table);
    rot_ulp.merge(o.rot_ulp);
    rot_rel.merge(o.rot_rel);
    if (shift.size() < o.shift.size()) shift.resize(o.shift.size());
    for (std::size_t i = 0; i < o.shift.size(); ++i) shift[i].merge(o.shift[i]);
    nonfinite += o.nonfinite;
  }
};

}  // namespace ropecheck::drift
