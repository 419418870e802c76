// The diagnosis of failing attention scores from the scores alone (diagnose/score_diagnosis.cpp;
// DIAGNOSIS.md, "Scores").
#pragma once

#include <span>

#include "ropecheck/checker/scores.hpp"
#include "score_problem.hpp"

namespace ropecheck::checker::check_detail {

// The candidate's scores `cand` ([G][N], stored as dt) judged with `judging` (the criterion's class, at
// least fp32-angle as the tensors' diagnosis judges): the failing ones (at most 512, evenly spaced) and
// 128 passing ones evaluated under every rotation mistake that can act on a score.
ScoreDiagnosis diagnose_scores(const golden::GoldenSet& g, const ScoreProblem& p, std::span<const double> cand, DType dt,
                               accuracy::AccuracyClass judging);

}  // namespace ropecheck::checker::check_detail
