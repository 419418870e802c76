#include "ropecheck/accuracy/error_model.hpp"

#include <algorithm>
#include <cmath>

namespace ropecheck::accuracy {

std::string_view to_string(AccuracyClass c) {
  switch (c) {
    case AccuracyClass::exact: return "exact";
    case AccuracyClass::fp64_angle: return "fp64-angle";
    case AccuracyClass::f32_reduced: return "f32-reduced";
    case AccuracyClass::fp32_angle: return "fp32-angle";
    case AccuracyClass::f16_table: return "f16-table";
    case AccuracyClass::bf16_table: return "bf16-table";
  }
  return "?";
}

std::optional<AccuracyClass> parse_accuracy_class(std::string_view s) {
  for (AccuracyClass c : kAccuracyClasses)
    if (s == to_string(c)) return c;
  return std::nullopt;
}

std::optional<DType> table_dtype(AccuracyClass c) {
  switch (c) {
    case AccuracyClass::f16_table: return DType::f16;
    case AccuracyClass::bf16_table: return DType::bf16;
    default: return std::nullopt;
  }
}

std::string_view describe(AccuracyClass c) {
  switch (c) {
    case AccuracyClass::exact:
      return "identical to the golden value of the same dtype (correctly rounded, 0.5 ulp); +0 and -0 are "
             "equal";
    case AccuracyClass::fp64_angle:
      return "angle, sin, cos and rotation in binary64, rounded once to the output dtype: error <= "
             "(6|ln w| + 14) 2^-53 |theta| M + 8 2^-53 M + u_dt M (times 1 + 2^-5)";
    case AccuracyClass::f32_reduced:
      return "angle formed and reduced in binary64, the reduced argument rounded to f32, f32 sin/cos within 1.5 ulp, "
             "f32 rotation, one rounding to the output dtype (ropecheck's `accurate` recipe): error <= "
             "(6|ln w| + 14) 2^-53 |theta| M + 8 2^-24 M + u_dt M (times 1 + 2^-5)";
    case AccuracyClass::fp32_angle:
      return "the Hugging Face / Meta fp32 recipe: f32 inverse frequencies, f32 angle, f32 sin/cos within 2 ulp, "
             "f32 rotation, one rounding to the output dtype: error <= (6|ln w| + 14) 2^-24 |theta| M + 8 2^-24 M + "
             "u_dt M (times 1 + 2^-5)";
    case AccuracyClass::f16_table:
      return "fp32 angles and sin/cos, cos/sin tables cast to f16 and the rotation done in f16: the fp32-angle "
             "angle term + 6 2^-24 M + 3 2^-11 M + u_dt M (times 1 + 2^-5)";
    case AccuracyClass::bf16_table:
      return "fp32 angles and sin/cos, cos/sin tables cast to bf16 and the rotation done in bf16 (Hugging Face "
             "with bf16 activations): the fp32-angle angle term + 6 2^-24 M + 3 2^-8 M + u_dt M (times 1 + 2^-5)";
  }
  return "";
}

std::string_view to_string(Quantity q) {
  switch (q) {
    case Quantity::table: return "table";
    case Quantity::rotated: return "rotated";
    case Quantity::passthrough: return "passthrough";
  }
  return "?";
}

PairAngle pair_angle(double position, double frequency) {
  if (frequency == 0) return {0, 0};
  return {std::fabs(position * frequency), std::fabs(std::log(std::fabs(frequency)))};
}

ClassBound class_bound(AccuracyClass c, DType dt, Quantity q) {
  using namespace model;
  const double g1 = 1 + kSecondOrder;
  const double u_dt = unit_roundoff(dt);
  ClassBound b;
  if (c == AccuracyClass::exact) {
    // Correct rounding: |fl(y) - y| <= u_dt |y| <= u_dt M (|y| <= att * ||(x_a, x_b)||_2 <= M),
    // and half the subnormal spacing below the normal range.
    b.k_const = u_dt;
    b.floor = 0.5 * min_subnormal(dt);
    return b;
  }
  // The format the angle is formed in (u_a of the angle term), the format sin, cos, the attention
  // factor and (angle classes) the rotation are computed in (u_s), and the table / rotation format.
  // f32-reduced forms the angle like fp64-angle and evaluates everything else like fp32-angle.
  const DType angle_fmt = c == AccuracyClass::fp64_angle || c == AccuracyClass::f32_reduced ? DType::f64 : DType::f32;
  const DType trig_fmt = c == AccuracyClass::fp64_angle ? DType::f64 : DType::f32;
  const bool table_class = c == AccuracyClass::f16_table || c == AccuracyClass::bf16_table;
  const DType table_fmt = c == AccuracyClass::f16_table ? DType::f16 : (c == AccuracyClass::bf16_table ? DType::bf16 : trig_fmt);
  const double u_a = unit_roundoff(angle_fmt), u_s = unit_roundoff(trig_fmt), u_t = unit_roundoff(table_fmt);

  // Underflow: at most four roundings (two products, the sum, the store) whose absolute error is
  // half a subnormal spacing of the coarsest-range format involved. The table classes share the
  // f16 floor so that f16-table stays contained in bf16-table.
  const DType floor_fmt = table_class ? DType::f16 : trig_fmt;
  b.floor = 2 * std::max(min_subnormal(floor_fmt), min_subnormal(dt));

  if (q == Quantity::passthrough) {
    b.k_const = g1 * u_dt;  // a copy: only the storage rounding
    return b;
  }
  // Angle: relative error of w (kInvLog |ln w| + kInvConst) u_a, position and product roundings.
  b.k_log = g1 * kInvLog * u_a;
  b.k_lin = g1 * (kInvConst + kAngleRoundings) * u_a;
  double k = 0;
  if (q == Quantity::table) {
    // sin / cos evaluation, the table rounding (table classes), the store.
    k = kTrig * u_s + (table_class ? u_t : 0.0) + u_dt;
  } else {
    // sin / cos, attention factor folded in the working format, then either the rotation in the
    // working format (angle classes) or the table cast plus the rotation in the table dtype.
    k = (kTrig + kAttention) * u_s + (table_class ? u_t : 0.0) + kRotation * u_t + u_dt;
  }
  b.k_const = g1 * k;
  return b;
}

double element_bound(AccuracyClass c, DType candidate, const PairAngle& angle, Quantity q) {
  return class_bound(c, candidate, q).relative(angle);
}

double absolute_floor(AccuracyClass c, DType candidate) {
  return class_bound(c, candidate, Quantity::rotated).floor;
}

double qk_norm_relative_term(int head_dim) {
  if (head_dim <= 0) return 0.0;
  // Section 17: squares and an in-order sum of head_dim positive terms (gamma_D), the division and eps
  // (2u), halved by the square root; the root, the reciprocal, the product and the weight (4u).
  return (head_dim / 2.0 + 5.0) * unit_roundoff(DType::f32) * (1.0 + model::kSecondOrder);
}

}  // namespace ropecheck::accuracy
