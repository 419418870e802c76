// The check of a candidate's attention scores against a golden set's scores file (golden/GOLDEN_FORMAT.md,
// "Attention scores"): each score [head][pair] judged with the score class derived from the criterion's
// rotation class (accuracy/attention_bounds.hpp, score_bound; accuracy/ERROR_MODEL.md section 16.3), or
// with --max-ulp / --atol on the score itself. A saturated bound leaves its score not tested, never
// passed (core/verdict.hpp). The report's JSON form is part of the check report (CHECK_REPORT.md,
// "Attention scores").
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropecheck/accuracy/error_model.hpp"
#include "ropecheck/core/verdict.hpp"
#include "ropecheck/golden/golden_set.hpp"
#include "ropecheck/io/tensor.hpp"

namespace ropecheck::checker {

struct Criterion;

// One score: where it sits and how wrong it is.
struct ScoreElement {
  std::int64_t index = 0;  // flat, row-major in [G][N]
  int head = 0;            // query head of the group
  std::int64_t pair = 0;   // index into score_positions
  std::int64_t query_position = 0, key_position = 0;
  double candidate = 0, truth = 0, golden = 0;  // golden: the correctly rounded value of the candidate's dtype
  double abs_error = 0;
  double allowed = 0;    // the criterion's bound at this score (0 for exact)
  double magnitude = 0;  // scale sum |Q_c| |K_c| (ERROR_MODEL.md 16.1); 0 unless a class criterion
  double score = 0;      // abs_error / allowed (exact: ulps from the golden value); > 1 fails (exact: > 0)
  bool saturated = false;  // the bound reached the magnitude: not tested, whatever the score
};

// One score class over every score: violated, satisfied, or not tested (no violation, some saturated).
struct ScoreClassResult {
  accuracy::AccuracyClass accuracy_class = accuracy::AccuracyClass::exact;
  std::string state = "satisfied";  // "satisfied", "violated", "not-tested" (ClassState's strings)
  std::int64_t violations = 0, saturated = 0;
  double worst_margin = 0;  // largest error / bound (exact: ulps from the golden value)
};
// The report's "classes" array of the scores or an attention output (CHECK_REPORT.md).
nlohmann::json classes_json(const std::vector<ScoreClassResult>& classes);

// One rotation mistake evaluated as an alternative score truth (DIAGNOSIS.md, "Scores"): the scores a
// kernel with that mistake would have, exactly, and the class bound around them.
struct ScoreHypothesisResult {
  std::string id, title, source;
  accuracy::AccuracyClass judged_class = accuracy::AccuracyClass::fp32_angle;
  std::int64_t failing_evaluated = 0, failing_explained = 0, passing_evaluated = 0, passing_explained = 0;
  std::int64_t failing_saturated = 0, passing_saturated = 0;  // bound saturated there: never explained
  double max_ratio = 0;  // largest |candidate - mistaken score| / bound over discriminated scores
  bool matches = false;  // as diagnose.hpp's HypothesisResult::matches
  // Hypotheses whose scores are this one's on every evaluated score (to 2^-50): the scores cannot tell
  // them apart (cos / sin swapped and sin negated both turn the relative angle to its negative).
  std::vector<std::string> same_scores_as;
};

// The diagnosis of failing scores from the scores alone: the catalogue's rotation mistakes that can act
// on a score, and the query off by one position relative to the key, ranked as the tensors' diagnosis
// ranks (failing share explained, then passing share kept, then max_ratio).
struct ScoreDiagnosis {
  accuracy::AccuracyClass judged_class = accuracy::AccuracyClass::fp32_angle;  // what "failing" means here
  std::int64_t failing = 0, failing_evaluated = 0, passing_evaluated = 0;
  std::vector<ScoreHypothesisResult> ranked;
  std::string match;       // the id of rank 1 when it matches, else empty
  std::string conclusion;  // one line
  nlohmann::json to_json() const;
};

struct ScoresReport {
  std::string golden_name, candidate_name;  // "scores.f32", the candidate tensor
  io::TensorDType dtype = io::TensorDType::f32;
  std::vector<std::int64_t> shape;  // [G][N]
  std::int64_t elements = 0;
  // Under the verdict criterion: every score is exactly one of passed, failed, not tested (saturated).
  std::int64_t passed = 0, failed = 0, not_tested = 0;
  std::int64_t identical = 0;  // equal to the golden value of the same dtype
  std::int64_t nonfinite = 0;  // NaN / Inf candidate scores (the truth is always finite): failures
  double max_abs_error = 0;    // over finite candidates
  std::vector<ScoreClassResult> classes;  // every class, strictest first (class criteria only)
  ropecheck::Verdict verdict = ropecheck::Verdict::pass;
  std::string reason;  // one line, empty for pass
  double worst_score = 0;
  std::vector<ScoreElement> worst;  // highest score first, then lower index
  std::optional<ScoreDiagnosis> diagnosis;  // when some score fails and the check diagnoses (CheckOptions)

  nlohmann::json to_json() const;
  std::string summary(const Criterion& criterion) const;  // the terminal block
};

// The candidate's scores `cand` ([G][N] values of `dtype`, already decoded) against golden tensor
// `golden_name` ("scores.<dt>") of `g`, under `criterion`; worst_count worst scores listed; `threads` as
// CheckOptions (the result does not depend on it). InputError when the set's scores file is unusable.
ScoresReport check_scores(const golden::GoldenSet& g, const std::string& golden_name, const std::string& candidate_name,
                          io::TensorDType dtype, std::span<const double> cand, const Criterion& criterion,
                          int worst_count, int threads, bool diagnose = true);

// The set's score tensors ("scores.<dt>", manifest order; empty without --scores).
std::vector<std::string> score_outputs(const golden::GoldenSet& g);

}  // namespace ropecheck::checker
