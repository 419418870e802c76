// A golden set's scores file as the checker and its diagnosis read it (golden/GOLDEN_FORMAT.md, "Attention
// scores"): the pairs' positions, the group's query heads and the key, the scale, the truth (scores.f64)
// and, per position, the exact rotated vectors and each class's per-channel bounds on them (ERROR_MODEL.md
// 16.3: what score_bound needs).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "ropecheck/accuracy/attention_bounds.hpp"
#include "ropecheck/core/dtype.hpp"
#include "ropecheck/golden/golden_set.hpp"
#include "ropecheck/reference/fast_rounding.hpp"

namespace ropecheck::checker::check_detail {

class ScoreProblem {
 public:
  // InputError when the set has no scores, or its scores file disagrees with its manifest.
  explicit ScoreProblem(const golden::GoldenSet& g);

  std::int64_t G = 0, N = 0, D = 0;
  double scale = 1;
  std::optional<double> cap;
  std::vector<std::int64_t> qpos, kpos;  // per pair
  std::vector<double> q, k;              // score_q [G][D], score_k [D]
  std::vector<double> truth;             // scores.f64 [G][N]
  std::optional<accuracy::RopeGeometry> geo;

  // The exact rotated query heads [G][D] and key [D] at position p (nearest doubles) and the bounds of
  // class c in dtype dt on them (rotated_errors), cached per position.
  struct AtPosition {
    std::vector<double> Q, K;
    std::vector<std::vector<double>> Eq, Ek;  // per class (kAccuracyClasses order), [G][D] / [D]
  };
  class Cache {
   public:
    Cache(const ScoreProblem& p, DType dt) : p_(&p), dt_(dt) {}
    const AtPosition& at(std::int64_t position);

   private:
    const ScoreProblem* p_;
    DType dt_;
    std::unordered_map<std::int64_t, AtPosition> map_;
  };
  // Score [h][pair]'s bound under class c (not exact) with the cached vectors.
  accuracy::ScoreBound bound(Cache& cache, accuracy::AccuracyClass c, DType dt, std::int64_t h, std::int64_t pair) const;

 private:
  std::shared_ptr<const RopeRoundingEngine> engine_;  // the exact rotation (shared by every cache)
};

}  // namespace ropecheck::checker::check_detail
