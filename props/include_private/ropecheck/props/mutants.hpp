// Built-in targets: our correct scalar hf-fp32 kernel (kernels/scalar_recipes.hpp), and deliberately
// broken variants of it ("mutants") that show the property suite has teeth.
//
// Each mutant is the hf-fp32 kernel with exactly one bug that real implementations have shipped or
// that is one edit away from the correct code, and it claims the class the correct kernel has
// (fp32-angle; f32 output, bf16 for the store-rounding bug). Mutants see the input name ("q" / "k"):
// one bug lives in the k path only. The self-test (tests/props/test_props_mutants.cpp, `ropecheck props
// --self-test`) runs the suite on each mutant's spec and position range and requires at least one
// property to fail; it also requires the correct kernel to pass the same runs.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ropecheck/props/suite.hpp"
#include "ropecheck/props/target.hpp"
#include "ropecheck/core/spec.hpp"

namespace ropecheck::props {

struct MutantInfo {
  std::string name;         // "wrong-pairing"; the registered target is "mutant:" + name
  std::string description;  // the bug, one sentence
  std::string where;        // who ships it / where a user meets it, and what it breaks
  EncodingSpec spec;        // the spec a user meets it with (a preset, or a preset changed as `where` says)
  std::int64_t max_position = 0;  // the realistic range of positions: [0, max_position]
  // Non-empty: the suite cannot catch this mutant yet, and why (the self-test reports it, and says
  // so when it is caught after all, but does not fail on it).
  std::string known_gap;
  DType dtype = DType::f32;       // the output dtype it stores (the correct kernel is run with the same)
};

// Every mutant (at least 12), in a fixed order.
std::vector<MutantInfo> mutants();

// The mutant `name` (without the "mutant:" prefix) as a target; nullptr when unknown.
std::unique_ptr<Target> make_mutant_target(const std::string& name);

// The correct scalar kernel as a target: recipe hf-fp32 with outputs stored in `out` (f32, f16 or
// bf16), class fp32-angle. Names: "hf-fp32", "hf-fp32-f16out", "hf-fp32-bf16out".
std::unique_ptr<Target> make_hf_fp32_target(DType out = DType::f32);

// ---- the self-test ---------------------------------------------------------------------------------

struct SelfTestOptions {
  int cases = 20;                  // RapidCheck cases per property
  std::uint64_t seed = 20261121;   // the same for every run
  // false: properties run one at a time in the suite's order and a mutant's run stops at its first
  // failure (shrinking failures is the expensive part); true: every property runs.
  bool all_properties = false;
  bool shrink = true;              // false: counterexamples as found, unshrunk (SuiteOptions::shrink)
  std::vector<std::string> only;   // mutant names; empty = all
};

struct MutantVerdict {
  MutantInfo mutant;
  bool caught = false;
  std::string property;                     // the first property that failed
  std::optional<std::int64_t> position;     // its failing position
  double margin = 0;                        // its worst margin (error / bound)
  std::string counterexample;               // the shrunk case
  ReproduceRecord reproduce;                // how to rerun it alone
  int properties_run = 0, properties_failed = 0;
  bool correct_passed = true;               // hf-fp32 passed the whole suite on the same spec and options
  std::string correct_failures;             // else what failed
  double seconds_mutant = 0, seconds_correct = 0;
};

struct SelfTestReport {
  SelfTestOptions options;
  std::vector<MutantVerdict> verdicts;
  // Every mutant without a known gap caught, and hf-fp32 never failing.
  bool passed() const;
  // "mutant -> property that caught it, at position P, margin M", one line per mutant, then the
  // counterexamples and the known gaps.
  std::string table() const;
};

// Runs the suite on every mutant (its spec, positions [0, max_position]) and the correct hf-fp32
// kernel on the same runs. Throws std::invalid_argument for an unknown mutant in options.only.
SelfTestReport run_self_test(const SelfTestOptions& options = {});

// Registers "hf-fp32", "hf-fp32-f16out", "hf-fp32-bf16out" and "mutant:NAME" for every mutant into the
// target registry (registry.hpp); kernels are not registered: they come by name (`props --kernel`). Idempotent; call it before make_target() / target_names().
void register_builtin_targets();

}  // namespace ropecheck::props
