// The property suite: properties that every correct RoPE / sinusoidal implementation satisfies at
// every position, run against any Target with RapidCheck generation and shrinking.
//
// Every property's statement, derivation and tolerance is written beside its code
// (props/src/properties.cpp) and collected in props/PROPERTIES.md. Tolerances are derived from the
// target's accuracy class (error_model.hpp): a correct target of its class never fails, so a
// failure is a bug (or a target claiming a class it does not belong to).
//
// Semantics the suite fixes for every target: RoPE outputs are Hugging Face's q_rot (attention
// factor folded into rotated channels, pass-through copied); frequencies are resolved without a
// run-time sequence length (dynamic NTK: the base at max_position_embeddings; LongRoPE: the short
// factors), so that a target's frequencies do not depend on the positions of one call.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropecheck/props/margin_stats.hpp"
#include "ropecheck/props/target.hpp"
#include "ropecheck/core/shard.hpp"
#include "ropecheck/core/spec.hpp"
#include "ropecheck/core/verdict.hpp"

namespace ropecheck::props {

struct SuiteOptions {
  int cases = 100;                    // RapidCheck max_success per property
  std::uint64_t seed = 20261121;      // RapidCheck seed (the same for every property)
  std::int64_t max_position = 0;      // largest position generated; 0: 2^24
  std::vector<std::string> only;      // property names; empty = all
  // false: a failing case is reported as found, unshrunk (RapidCheck's shrinking of a failure can take
  // seconds per property; tests that only ask whether a property fails turn it off).
  bool shrink = true;
  // GoogleTest adapter only (gtest.hpp): properties whose not-tested verdict is accepted (reported
  // as skipped); any other not-tested property fails its test. run_suite ignores it.
  std::vector<std::string> allow_not_tested;
  // Output dtypes to run. Empty: the target's own dtype (info().dtype), then every other dtype it
  // offers (Target::with_output) and implements (a kernel plugin that answers UNSUPPORTED for a dtype on
  // the probe calls is reported in SuiteReport::dtype_notes, not run). Given: exactly those; a dtype the
  // target does not offer throws std::invalid_argument.
  std::vector<DType> dtypes;
  // Part of a run split over processes (`props --shard I/N`): the properties run (every one, or
  // `only`'s) are split in N contiguous ranges and this runs range I, every output dtype; each
  // property runs its cases as in one run, so the parts' outcomes together are one run's. SpecError
  // when fewer properties than N are run.
  Shard shard;
};

struct PropertyInfo {
  std::string name, statement, tolerance;
};
// Every property, in the order run_suite runs them.
std::vector<PropertyInfo> list_properties();

// How to rerun one outcome alone, as data: cli/ and the gtest adapter each write it as their own
// command line.
struct ReproduceRecord {
  enum class SpecSource { generated, preset, given };
  std::string target;               // the target's name (SuiteReport::target)
  std::string property;             // the one property to run
  SpecSource spec_source = SpecSource::generated;  // generated specs, a preset (spec_name), or a spec given otherwise
  std::string spec_name;
  std::uint64_t seed = 0;
  int cases = 0;
  std::int64_t max_position = 0;    // 0: the default
  std::string dtype;                // the output dtype
};

struct PropertyOutcome {
  std::string property, statement;
  bool kernel_failed = false;  // failed because kernel calls were lost (a crash, a hang, ...), not on a value
  int cases = 0, skipped = 0;       // cases run (passing + the failing one); of those, skipped
                                    // (target does not implement the spec, or property not applicable)
  double worst_margin = 0;          // max error / bound over the cases run; > 1 fails
  MarginStats margins;              // RMS of the per-case margins (cases that were not skipped)
  bool passed = true;               // no case failed (the property may still be not tested: see verdict)
  // pass: tested and held; fail: a case failed; not-tested: every case skipped, or no case failed
  // but some bounds of the target's class were saturated (ClassBound::saturated: the bound reached
  // the pair's magnitude, so those elements accept an all-zero output). reason: one line saying why, empty for pass.
  Verdict verdict = Verdict::pass;
  std::string reason;
  std::int64_t bounds = 0, saturated = 0;           // class bounds evaluated / saturated ones
  int declined = 0;                 // target calls that returned false (unsupported spec / capability)
  // false: every case was skipped without asking the target (the property does not apply to the
  // spec, e.g. sinusoidal_shift on a RoPE spec); not-tested, but not counted against the run unless
  // named in SuiteOptions::only.
  bool applicable = true;
  bool asked = true;                // counts in SuiteReport::verdict() (applicable, or named in only)
  std::optional<std::int64_t> first_saturated_position;
  std::string counterexample;       // one readable line: spec, positions, dims (the shrunk case)
  ReproduceRecord reproduce;        // how to rerun just this
  std::optional<std::int64_t> failing_position;
  std::vector<std::string> notes;   // measurements the property reports (first collision, first negative cosine sum, ...)
  std::string dtype;                // the output dtype this outcome ran with ("f32", "bf16", ...)
};

struct SuiteReport {
  std::string target;
  std::string spec;                 // spec name, or "generated"
  std::uint64_t seed = 0;
  int cases = 0;                    // per property, as asked (SuiteOptions::cases)
  std::int64_t max_position = 0;    // as asked (0: 2^24)
  accuracy::AccuracyClass accuracy_class = accuracy::AccuracyClass::exact;  // the target's: margins are in units of its bounds
  DType dtype = DType::f64;                             // the target's output dtype
  std::vector<PropertyOutcome> outcomes;   // per output dtype run, every property (in dtype order)
  std::vector<std::string> dtypes;         // the output dtypes run, in order
  std::vector<std::string> dtype_notes;    // output dtypes offered but not implemented (not run), and why
  bool passed() const;               // no property failed (see verdict(): some may be not tested)
  Verdict verdict() const;           // combined over the asked-for properties: fail, else not-tested, else pass
  // Whether an outcome counts in verdict(): asked for, and not merely "not applicable to this output dtype"
  // while the same property applied to another dtype of the run (store_rounding on f32 beside bf16).
  bool counts(const PropertyOutcome& o) const;
  // The smallest position where the class's bound saturated in a counted property that did not fail
  // (nullopt: none): past it the class's claim is not tested, whatever the margins say.
  std::optional<std::int64_t> saturated_from() const;
  // reproduce_line: when given, each failed property carries "reproduce": its line for that record.
  nlohmann::json to_json(const std::function<std::string(const ReproduceRecord&)>& reproduce_line = {}) const;
  std::string summary() const;      // one line per property: cases, worst margin, verdict
};

// The report's setup fields (target, spec, seed, cases, max position, class, dtype) without outcomes: what
// run_suite starts from, and what a baseline is checked against before a run (suite_baseline.hpp).
SuiteReport suite_header(const Target& target, const EncodingSpec* spec, const SuiteOptions& options);

// Runs every property once per output dtype (options.dtypes).
// spec == nullptr: specs are generated (presets and any valid preset-like configuration, odd but
// valid ones included); else that spec only (properties that need another kind of spec derive it
// from this one, or are skipped). Throws std::invalid_argument for an unknown name in options.only.
SuiteReport run_suite(Target& target, const EncodingSpec* spec, const SuiteOptions& options);

// One case of one property, for use inside a RapidCheck property (RC_GTEST_PROP): draws its inputs
// with `*gen`, RC_FAIL()s with a readable counterexample when the bound is exceeded. Returns the
// margin (error / bound; 0 when skipped). Throws std::invalid_argument for an unknown name.
double run_property_case(const std::string& property, Target& target, const EncodingSpec* spec,
                         std::int64_t max_position = 0);

}  // namespace ropecheck::props
