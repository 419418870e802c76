// The checker: compares a candidate's tensors with a golden set, element by element, and says how
// far they are from the truth, which accuracy classes (accuracy/error_model.hpp) they satisfy, and
// where they go wrong. The report's JSON form is a stable contract (checker/CHECK_REPORT.md).
//
// Truth: the golden float64 copy (`<base>.f64`) of each output; the "exact" class compares with the
// golden tensor of the candidate's own dtype (`<base>.<dt>`), which is the correctly rounded value.
//
// Name resolution, for each candidate tensor (first rule that applies):
//   1. --map GOLDEN=CANDIDATE names it explicitly;
//   2. it is named exactly like a golden output ("q_rot.bf16");
//   3. it is named like an output's base ("q_rot", "cos", "pe") and resolves with its own dtype to
//      "<base>.<dt>" (a bf16 "q_rot" is checked against "q_rot.bf16");
//   4. otherwise it is ignored (listed in the report), e.g. the inputs a candidate file carries along.
// InputError (unusable input, exit 2) when: a --map names a golden tensor that is not an output or
// a candidate tensor that does not exist; two candidate tensors resolve to one golden output; a
// base name resolves to a dtype the golden set lacks; a matched tensor's dtype or shape differs
// (the message names the tensor and both); no candidate tensor matches any golden output (the
// message lists both sides' names).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropecheck/checker/error_stats.hpp"
#include "ropecheck/checker/attention_outputs.hpp"
#include "ropecheck/checker/scores.hpp"
#include "ropecheck/checker/stores.hpp"
#include "ropecheck/golden/golden_set.hpp"
#include "ropecheck/io/tensor.hpp"
#include "ropecheck/accuracy/error_model.hpp"
#include "ropecheck/core/verdict.hpp"

namespace ropecheck::checker {

// The check report's format_version (CHECK_REPORT.md): 2 made class results three-valued (state,
// saturated), marked saturated worst elements and added not_tested_classes and declined.
inline constexpr int kCheckReportVersion = 2;

// The verdict criterion: it must hold for every element of every matched tensor.
struct Criterion {
  enum class Kind {
    accuracy_class,  // the class's per-element bound (accuracy/ERROR_MODEL.md); exact = identical
    max_ulp,         // |candidate - truth| <= max_ulp * ulp_dt(truth)
    tolerance,       // |candidate - truth| <= atol + rtol * |truth|  (numpy.allclose)
  };
  Kind kind = Kind::accuracy_class;
  accuracy::AccuracyClass accuracy_class = accuracy::kDefaultAccuracyClass;
  double max_ulp = 0;
  double atol = 0, rtol = 0;

  static Criterion of_class(accuracy::AccuracyClass c) { return {Kind::accuracy_class, c, 0, 0, 0}; }
  static Criterion of_max_ulp(double n) { return {Kind::max_ulp, accuracy::kDefaultAccuracyClass, n, 0, 0}; }
  static Criterion of_tolerance(double atol, double rtol) { return {Kind::tolerance, accuracy::kDefaultAccuracyClass, 0, atol, rtol}; }
  std::string to_string() const;  // "class fp32-angle", "max-ulp 4", "atol 1e-06 rtol 1e-05"
  nlohmann::json to_json() const;
};

// InputError unless the criterion's numbers are usable (non-negative, finite where they must be).
void validate(const Criterion& criterion);

struct CheckOptions {
  std::map<std::string, std::string> name_map;  // golden output name -> candidate tensor name (--map)
  Criterion criterion;                           // default: class fp32-angle
  int worst_count = 10;                          // worst elements listed per tensor
  int threads = 0;                               // 0: hardware concurrency (results do not depend on it)
  // What is asked for (--only): golden output names ("q_rot.bf16") or bases ("q_rot": every dtype of
  // it; its f64 copy only when matched). Empty: every golden output, the f64 truth copies only when
  // matched or when f64 is the set's only dtype. An asked-for output without a candidate tensor is
  // not tested; an output outside --only is not checked.
  std::vector<std::string> only;
  // Memory (CHECK_REPORT.md, "Memory"): the data are read a block of tokens at a time, blocks sized so that
  // the process stays under max_memory (0: kDefaultMaxMemory); block_tokens > 0 sets the block size
  // instead. The report depends on neither.
  std::uint64_t max_memory = 0;
  std::int64_t block_tokens = 0;
  // Failing attention scores are diagnosed from the scores alone (scores.hpp, ScoreDiagnosis); `check
  // --no-diagnose` turns it off.
  bool diagnose_scores = true;
};

// The --max-memory of `check` when none is given: 1 GiB.
inline constexpr std::uint64_t kDefaultMaxMemory = std::uint64_t{1} << 30;

// Where an element sits and how wrong it is.
struct ElementReport {
  std::int64_t index = 0;   // flat row-major index
  std::int64_t token = 0;
  Position position;        // the token's positions (t, h, w; all equal unless multimodal)
  int stream = 0;           // which stream drives the element's pair (0 = t, 1 = h, 2 = w)
  int head = -1;            // q_rot / k_rot only
  int channel = -1;         // q_rot / k_rot / pe column
  int pair = -1;            // frequency pair (cos / sin / q_rot / k_rot); frequency index for pe; -1 pass-through
  double theta = 0;         // |angle| of the pair, radians
  double candidate = 0, truth = 0, golden = 0;  // golden: the golden value of the candidate's dtype
  double abs_error = 0;
  double ulps = 0;          // |candidate - truth| / ulp_dt(truth)
  double magnitude = 0;     // M
  double pair_relative = 0; // |candidate - truth| / (M u_dt)
  double score = 0;         // the criterion's margin (see CHECK_REPORT.md); > 1 fails (exact: > 0)
  // The criterion class's bound is saturated here (ClassBound::saturated): whatever the score, the
  // element is not tested. Always false for exact, max-ulp and tolerance criteria.
  bool saturated = false;
};

// A class on one tensor: satisfied (no violation, every bound discriminates), violated (some element
// exceeds the bound), or not tested (no violation, but some elements' bounds are saturated: an
// all-zero output would pass there, so holding proves nothing).
enum class ClassState { satisfied, violated, not_tested };
std::string_view to_string(ClassState s);  // "satisfied", "violated", "not-tested" (the JSON strings)

struct ClassResult {
  accuracy::AccuracyClass accuracy_class;
  ClassState state = ClassState::satisfied;
  bool satisfied = true;  // state == satisfied: a not-tested class is never satisfied
  std::int64_t violations = 0;
  std::optional<std::int64_t> first_violating_position;  // smallest position with a violation
  // Violation-free elements whose bound of this class is saturated, and the smallest position of one
  // (exact never saturates).
  std::int64_t saturated = 0;
  std::optional<std::int64_t> first_saturated_position;
  // Largest error / allowed over all elements (<= 1 when satisfied). For "exact": the largest
  // distance to the golden value of the same dtype, in ulps (0 when satisfied).
  double worst_margin = 0;
};

// Error as a function of position: |position| in [lo, hi) with hi = 2 lo ([0, 1) first).
struct PositionBin {
  std::int64_t lo = 0, hi = 1;
  std::int64_t elements = 0;
  double max_pair_relative = 0;  // units of u_dt
  double max_ulps = 0;
  std::int64_t violations = 0;   // of the verdict criterion
  ErrorStats error;              // max / mean / RMS error in the bin (error_stats.hpp)
  std::int64_t saturated = 0;    // violation-free elements whose criterion bound is saturated (not tested)
};

struct TensorReport {
  std::string golden_name, candidate_name, base;  // base: cos, sin, q_rot, k_rot, pe
  io::TensorDType dtype = io::TensorDType::f32;
  std::vector<std::int64_t> shape;
  std::int64_t elements = 0;
  std::int64_t identical = 0;  // equal to the golden value of the same dtype
  double max_ulps = 0, mean_ulps = 0;
  double max_abs_error = 0;
  double max_rel_error = 0;  // over elements with a nonzero truth
  double nmse = 0;           // sum (c - t)^2 / sum t^2 over finite elements
  std::int64_t nan_count = 0, inf_count = 0;  // in the candidate
  std::int64_t nonfinite_mismatches = 0;      // NaN / Inf where the truth is finite (always a failure), or vice versa
  double max_pair_relative = 0, mean_pair_relative = 0;  // units of u_dt
  ErrorStats error;                  // max / mean / RMS error, in units of the bound and of u_dt
  std::vector<ClassResult> classes;  // every class, strictest first
  // The verdict criterion on this tensor. pass: no violation and no saturated element;
  // not-tested: no violation, but `saturated` elements had a saturated class bound (ClassBound::
  // saturated: the bound reached the pair's magnitude, so an all-zero output passes), from
  // first_saturated_position.
  ropecheck::Verdict verdict = ropecheck::Verdict::pass;
  std::string reason;  // one line, empty for pass
  std::int64_t saturated = 0;
  std::optional<std::int64_t> first_saturated_position;
  bool pass = true;  // verdict == pass
  std::int64_t violations = 0;
  std::optional<std::int64_t> first_violating_position;
  double worst_score = 0;
  std::vector<ElementReport> worst;  // highest score first
  std::vector<PositionBin> bins;     // only bins with elements, ascending
  // MLA sets: the pass-through channels (q_nope), which must come back bit for bit (CHECK_REPORT.md,
  // "MLA"): checked, differing, the smallest position of a difference. nullopt for other sets.
  struct Passthrough {
    std::int64_t elements = 0, differing = 0;
    std::optional<std::int64_t> first_differing_position;
  };
  std::optional<Passthrough> passthrough;

  // The strictest class satisfied (nullopt when none; a not-tested class is not satisfied).
  std::optional<accuracy::AccuracyClass> best_class() const;
};

struct CheckReport {
  std::string golden_dir;
  std::string spec_name;
  std::string golden_fingerprint;  // what the set's data is, whatever its path (golden_fingerprint(), baseline.hpp)
  Criterion criterion;
  std::vector<TensorReport> tensors;          // golden output order
  std::vector<std::string> ignored_candidate;  // candidate tensors matching no golden output
  std::vector<std::string> unchecked_golden;   // golden outputs without a candidate (or outside --only)
  std::vector<std::string> not_tested;         // of those, the ones asked for: verdict not-tested
  // The kernel declined every output asked for (it answered UNSUPPORTED, or lacks the entry point the
  // set needs): its reason, one line; the run is not tested. Empty otherwise.
  std::string declined;
  // The attention scores (scores.hpp) when the set has them and the candidate a tensor answering one
  // dtype of them; nullopt otherwise (the asked-for score tensors are then in not_tested).
  std::optional<ScoresReport> scores;
  // The attention outputs (attention_outputs.hpp) of a set with an attention block: one report per dtype
  // a candidate tensor answered (golden order); the asked-for ones without a candidate are in not_tested.
  std::vector<AttentionOutputsReport> attention;
  // The quantized stores (stores.hpp) the candidate answered, when the set has them (golden --stores);
  // nullopt otherwise (the asked-for stores are then in not_tested).
  std::optional<StoresReport> stores;
  // fail: some tensor failed; not-tested: none failed, but an asked-for output had no candidate or
  // some tensor is not tested (saturated bounds); pass: everything asked for was tested and held.
  ropecheck::Verdict verdict = ropecheck::Verdict::fail;
  std::string reason;                          // one line, empty for pass
  bool pass = false;                           // verdict == pass

  // Classes every matched tensor satisfies, strictest first.
  std::vector<accuracy::AccuracyClass> satisfied_classes() const;
  // Classes no matched tensor violates but some tensor does not test (saturated), strictest first.
  std::vector<accuracy::AccuracyClass> not_tested_classes() const;
  nlohmann::json to_json() const;
  std::string summary() const;  // the terminal report: one block per tensor and a verdict line
};

CheckReport check_candidate(const golden::GoldenSet& golden, const std::vector<io::Tensor>& candidate, const CheckOptions& options);

}  // namespace ropecheck::checker
