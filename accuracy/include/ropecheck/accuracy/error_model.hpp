// The error model: accuracy classes and the per-element error bound each one allows.
//
// The derivation of every constant is written once, in accuracy/ERROR_MODEL.md; the numbers below
// are that derivation's results and nothing else. In short, an output element's error is measured
// against the magnitude M of what it came from:
//   rotated q / k channel:   M = att * (|x_a| + |x_b|)   (x_a, x_b the input pair, att the attention factor)
//   cos / sin / pe value:    M = 1
//   pass-through channel:    M = |x|                     (copied, only the storage rounding applies)
// and a class allows, for an element whose pair has angle theta = position * w (frequency w),
//   |candidate - exact| <= bound * M + floor,
//   bound = min((1 + g) * (k_log * |ln w| + k_lin) * |theta|, 2) + (1 + g) * k_const,
// where the angle term is the phase error of the class's way of forming theta (growing like
// position x frequency x unit roundoff), capped at 2 (two unit vectors are never further apart),
// k_const collects sin/cos, table, arithmetic and storage roundings, g = 2^-5 covers every
// second-order term, and floor (absolute) covers underflow into subnormals.
//
// Classes nest (each is contained in the next): a kernel satisfying a class satisfies every later
// one, for every dtype, angle and M:
//   exact  ⊂  fp64-angle  ⊂  f32-reduced  ⊂  fp32-angle  ⊂  f16-table  ⊂  bf16-table
#pragma once

#include <array>
#include <optional>
#include <string_view>

#include "ropecheck/core/dtype.hpp"

namespace ropecheck::accuracy {

enum class AccuracyClass {
  exact,       // identical to the correctly rounded value of the same dtype
  fp64_angle,  // angle, sin, cos and rotation in binary64, one rounding to the output dtype
  f32_reduced, // angle formed and reduced in binary64, sin / cos and rotation in f32 (the `accurate` recipe)
  fp32_angle,  // the Hugging Face / Meta fp32 recipe: f32 frequencies, angle, sin, cos, rotation
  f16_table,   // fp32 angles, cos / sin tables cast to f16 and the rotation done in f16
  bf16_table,  // ... in bf16 (the Hugging Face recipe with bf16 activations)
};

// Strictest first; each class is contained in the next.
inline constexpr std::array<AccuracyClass, 6> kAccuracyClasses = {
    AccuracyClass::exact,      AccuracyClass::fp64_angle, AccuracyClass::f32_reduced,
    AccuracyClass::fp32_angle, AccuracyClass::f16_table,  AccuracyClass::bf16_table};

// The checker's verdict class when the user names none.
inline constexpr AccuracyClass kDefaultAccuracyClass = AccuracyClass::fp32_angle;

// "exact", "fp64-angle", "f32-reduced", "fp32-angle", "f16-table", "bf16-table"
std::string_view to_string(AccuracyClass c);
std::optional<AccuracyClass> parse_accuracy_class(std::string_view s);  // exactly those names
// One paragraph for the README and --help: what computation the class stands for and its bound.
std::string_view describe(AccuracyClass c);
// The narrow dtype a table class rounds its cos / sin tables and rotation to (f16-table: f16,
// bf16-table: bf16), nullopt for the angle classes: what a property feeds such a target as input.
std::optional<DType> table_dtype(AccuracyClass c);

// What an output element is, which fixes its M.
enum class Quantity {
  table,        // cos / sin / pe value: M = 1
  rotated,      // rotated q / k channel: M = att * (|x_a| + |x_b|)
  passthrough,  // channel past the rotary block, copied: M = |x|
};
std::string_view to_string(Quantity q);

// unit_roundoff / min_subnormal of a dtype: core/dtype.hpp.

// The angle facts of the pair an element belongs to.
struct PairAngle {
  double abs_theta = 0;     // |position * w| in radians
  double abs_log_freq = 0;  // |ln w|, 0 when w = 0 (a pair that does not rotate)
};
// |p * w| and |ln w| of a position and a frequency (w = 0 gives {0, 0}).
PairAngle pair_angle(double position, double frequency);

// Model constants, each derived in ERROR_MODEL.md where it is named (sections 3-7 and 10). Units:
// the unit roundoff u of the format named in each comment.
namespace model {
// Inverse frequency relative error allowed to an fp32 / fp64 recipe: (kInvLog |ln w| + kInvConst) u.
inline constexpr double kInvLog = 6;
inline constexpr double kInvConst = 12;
// Position conversion (exact below 2^24 in f32) and the angle product: one rounding each.
inline constexpr double kAngleRoundings = 2;
// sin / cos within 2 ulp of the rounded result: 2 ulp <= 2 * 2u = 4u absolute for |v| <= 1.
inline constexpr double kTrig = 4;
// Attention factor: att rounded to the working format, and one product.
inline constexpr double kAttention = 2;
// Rotation arithmetic: two products (together <= u M) and one sum (<= u M).
inline constexpr double kRotation = 2;
// Second-order slack g: every first-order term is multiplied by (1 + g).
inline constexpr double kSecondOrder = 1.0 / 32;
// Largest possible distance between two points of the unit circle.
inline constexpr double kAngleCap = 2;
}  // namespace model

// The bound of one class for one candidate dtype and quantity, ready to evaluate per element.
struct ClassBound {
  double k_log = 0;    // angle term per radian per |ln w|
  double k_lin = 0;    // angle term per radian
  double k_const = 0;  // angle-independent part, in units of M (g already applied)
  double floor = 0;    // absolute (not scaled by M)

  // The bound in units of M (the relative part).
  double relative(const PairAngle& a) const {
    const double angle = (k_log * a.abs_log_freq + k_lin) * a.abs_theta;
    return (angle < model::kAngleCap ? angle : model::kAngleCap) + k_const;
  }
  // The absolute error allowed for an element with magnitude M.
  double allowed(const PairAngle& a, double M) const { return relative(a) * M + floor; }
  // The bound no longer discriminates: it has reached the pair's own magnitude M, so an all-zero
  // output passes (|y| <= M), and a little further the angle term hits its cap 2 and any output of
  // that magnitude passes. Such an element counts as not tested (core/verdict.hpp). For fp32-angle
  // and w = 1 this starts near position 1.16e6 (cap at 2.32e6); Llama-3.1-8B at 2^24 - 1 has 18 of
  // 64 pairs here, 14 of them at the cap.
  bool saturated(const PairAngle& a) const { return relative(a) >= 1; }
};

ClassBound class_bound(AccuracyClass c, DType candidate, Quantity q);

// The Q/K RMSNorm stage before the rotation (ERROR_MODEL.md section 17): the relative error of a binary32
// norm's output, (head_dim / 2 + 5) u_f32 (1 + g), added to k_const of the rotated and pass-through
// bounds of every class but exact, with M taken of the normalized input. 0 for head_dim <= 0.
double qk_norm_relative_term(int head_dim);

// The bound in units of M (what the issue calls the per-element bound); the allowed absolute
// error is element_bound(...) * M + absolute_floor(...).
double element_bound(AccuracyClass c, DType candidate, const PairAngle& angle, Quantity q);
double absolute_floor(AccuracyClass c, DType candidate);

}  // namespace ropecheck::accuracy
