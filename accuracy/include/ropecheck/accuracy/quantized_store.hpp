// Accuracy classes for quantized stores (ERROR_MODEL.md, "Quantized stores"): a kernel rotates in its
// class, rounds to binary32, then quantizes with its owner's recipe. Its codes are judged against the
// golden codes of the exact values (reference/quantized_rounding.hpp), each of which carries a margin:
// the largest error on the exact values of its scale group that cannot change it.
//
//   budget  e = the class bound of the binary32 values the kernel quantizes (E, per element, or the
//               largest over a scale group) + the quantizer's own binary32 roundings (below);
//   decided    e < margin: exactly one code is possible, the candidate's must be the golden one (and
//               its value within the tolerance below, which catches a wrong stored scale or bias);
//   undecided  e >= margin: the exact value is within e of a decision boundary (at a tie, margin 0,
//               always), so a correct kernel may land on either side: the element counts as not tested
//               when the candidate's value x^ is within e + one step of the exact value y,
//                 |x^ - y| <= e + D + |q| ds + db,
//               D the store's step at x^, ds / db the steps of the stored scale / bias when the codes
//               were computed with their unrounded binary32 values (ggml's f16 d, MLX's bf16 / f16
//               scale and bias), and fails otherwise. A saturated FP8 code is within it wherever y is
//               beyond the largest finite value (minus e).
// A data-derived scale is decided the same way (identity) or, undecided, checked against the exact
// scale within e / c + one step of its stored format (c = the scale's divisor of amax), and counted
// as not tested.
//
// Pure binary64 arithmetic; the golden side's numbers (codes, margins, the f64 copy of y) are inputs.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "ropecheck/accuracy/error_model.hpp"
#include "ropecheck/core/quantized.hpp"

namespace ropecheck::accuracy {

enum class StoreVerdict { pass, not_tested, fail };
std::string_view to_string(StoreVerdict v);  // "pass", "not-tested", "fail"

// Quantizer roundings in units of u32 = 2^-24, derived in ERROR_MODEL.md ("Quantized stores"), each
// before the second-order factor 1 + g.
namespace model {
// x / s or x * fl(1 / s) in binary32: at most two roundings, relative to the scaled value.
inline constexpr double kQuantQuotient = 2;
// A data-derived scale amax / c (and its reciprocal) in binary32, as a move of amax.
inline constexpr double kQuantScale = 1;
// ggml q4_0's t + 8.5f in binary32: 16.5 u32 in t, 16.5 / 8 u32 amax on the values.
inline constexpr double kQ4Offset = 16.5 / 8;
// MLX affine: max - min, / n, edge / s0 (the q0 decision: 3 roundings of R <= 2 amax), and edge / q0,
// x - edge, / scale (the codes: 3 roundings of x - edge <= 2 amax): 6 u32 amax.
inline constexpr double kAffine = 6;
}  // namespace model

// The error of one binary32 value the kernel quantizes, allowed by class c: the class bound of an f32
// output (ERROR_MODEL.md section 7 counts the binary32 rounding) plus the golden f64 copy's half ulp.
double quantizer_input_error(AccuracyClass c, Quantity q, const PairAngle& a, double M, double y);

// The budget of an element quantized against a given scale (FP8 per tensor / head / token from a
// golden input): e = E + (1 + g) kQuantQuotient u32 (|y| + E) + 2 s_min(f32) s.
double given_scale_budget(double e, double y, double scale);
// The budget of a scale group (data-derived scale), from the largest E of the group and amax = max |y|.
enum class GroupStore { fp8_dynamic, q8_0, q4_0, affine };
double group_budget(GroupStore k, double e_max, double amax);

// One element: the candidate's code equals the golden one (decoded values equal: +0 = -0, NaN = NaN),
// its decoded value, the exact value, one step (D + |q| ds + db), whether a non-finite code is one of
// the outcomes reachable within the budget (FP8 overflow under the nonfinite rule) and whether the
// candidate's code is the saturated largest value with y beyond it within the budget. Decided
// (budget < margin): pass when the code is the golden one and the value within budget + step of y
// (a right code next to a wrong stored scale or bias fails); undecided: not tested when the value is
// within budget + step, fail otherwise.
struct ElementCheck {
  bool same_code = false;
  double candidate = 0;
  double exact = 0;
  double step = 0;
  double budget = 0;
  double margin = 0;
  bool nonfinite_reachable = false;
  bool saturation_reachable = false;
};
StoreVerdict judge(const ElementCheck& e);

// ---- The stores -------------------------------------------------------------------------------------

// FP8 against a given scale s: golden code and margin, the exact value y, the candidate's code.
StoreVerdict judge_fp8(std::uint8_t golden, double margin, double y, std::uint8_t candidate, double s, quant::Fp8 f,
                       quant::Fp8Overflow o, double budget);
// The verdicts of a scale group: the scale's (bias included), then one per element.
template <std::size_t N>
struct GroupVerdicts {
  StoreVerdict scale = StoreVerdict::pass;
  std::array<StoreVerdict, N> elements{};
};
// FP8 with a data-derived scale over a group of y.size() elements (vLLM's dynamic scale, an f32 value).
struct Fp8GroupVerdicts {
  StoreVerdict scale = StoreVerdict::pass;
  std::vector<StoreVerdict> elements;
};
Fp8GroupVerdicts judge_fp8_group(float golden_scale, double scale_margin, std::span<const std::uint8_t> golden,
                                 std::span<const double> margins, std::span<const double> y, float candidate_scale,
                                 std::span<const std::uint8_t> candidate, quant::Fp8 f, quant::Fp8Overflow o,
                                 double budget);
GroupVerdicts<quant::kGgmlBlock> judge_q8_0(const quant::BlockQ8_0& golden, double scale_margin,
                                            std::span<const double, quant::kGgmlBlock> margins,
                                            std::span<const double, quant::kGgmlBlock> y,
                                            const quant::BlockQ8_0& candidate, double budget);
GroupVerdicts<quant::kGgmlBlock> judge_q4_0(const quant::BlockQ4_0& golden, double scale_margin,
                                            std::span<const double, quant::kGgmlBlock> margins,
                                            std::span<const double, quant::kGgmlBlock> y,
                                            const quant::BlockQ4_0& candidate, double budget);
// One MLX affine group: golden codes, scale / bias and margins (reference AffineExact), the
// candidate's. Scale and bias: identity when decided; else, while the group's decisions (edge, clamp,
// q0) are, within e / |q0| (scale; 2 e / n when q0 = 0) and e (bias) plus one step of scale_dtype
// of the exact ones (not tested); with those undecided the exact scale jumps with q0: not tested, the
// elements' values carry the check.
struct AffineGroupVerdicts {
  StoreVerdict scale = StoreVerdict::pass;
  std::vector<StoreVerdict> elements;
};
AffineGroupVerdicts judge_affine_group(std::span<const std::uint8_t> golden, const quant::AffineGroup& golden_group,
                                       double scale_margin, double decision_margin, std::span<const double> margins,
                                       std::span<const double> y, std::span<const std::uint8_t> candidate,
                                       const quant::AffineGroup& candidate_group, const quant::AffineSpec& spec,
                                       double budget);

}  // namespace ropecheck::accuracy
