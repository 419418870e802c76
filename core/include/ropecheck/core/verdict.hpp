// The three verdicts every ropecheck command gives, per tensor / property / compared pair and per
// run, and the exit code a run maps to (README "Verdicts and exit codes").
//   pass        everything asked for was tested and held
//   fail        something was tested and did not hold
//   not-tested  nothing failed, but something asked for was not tested (unsupported by the kernel,
//               no candidate tensor, or a saturated bound that accepts even an all-zero output)
// A verdict never reads "pass" when something asked for was not tested.
#pragma once

#include <string_view>

namespace ropecheck {

enum class Verdict { pass, fail, not_tested };

// "pass", "fail", "not-tested" (the JSON strings).
constexpr std::string_view to_string(Verdict v) {
  return v == Verdict::pass ? "pass" : (v == Verdict::fail ? "fail" : "not-tested");
}

// Combines two verdicts: fail wins, then not-tested.
constexpr Verdict combine(Verdict a, Verdict b) {
  if (a == Verdict::fail || b == Verdict::fail) return Verdict::fail;
  if (a == Verdict::not_tested || b == Verdict::not_tested) return Verdict::not_tested;
  return Verdict::pass;
}

// Exit codes: 0 pass, 1 fail, 3 not tested (2 is unusable input, raised before any verdict).
inline constexpr int kExitNotTested = 3;
constexpr int exit_code(Verdict v) { return v == Verdict::pass ? 0 : (v == Verdict::fail ? 1 : kExitNotTested); }

// The advice printed with a saturated bound (accuracy/error_model.hpp ClassBound::saturated).
inline constexpr std::string_view kSaturationAdvice = "use a stricter class (f32-reduced, fp64-angle) here";

}  // namespace ropecheck
