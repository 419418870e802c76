// A check split over processes (`check --shard I/N`, `ropecheck merge`): what a check of a token range
// keeps about each tensor is a set of statistics that merge exactly (counts, maxima, first positions,
// exact sums, the worst elements under a total order, position bins keyed by global position), and the
// verdicts and reasons of the report are derived from them by one function. One run is the merge of
// one part, so N parts merged give the report one run gives, bit for bit (checker/CHECK_REPORT.md,
// "Sharded checks").
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropecheck/core/shard.hpp"
#include "ropecheck/checker/checker.hpp"
#include "ropecheck/io/exact_sum.hpp"

namespace ropecheck::checker {

// ErrorStats as mergeable sums (error_stats.hpp).
struct ErrorSums {
  std::int64_t n = 0;
  double max_b = 0, max_u = 0;
  io::ExactSum sum_b, sq_b, sum_u, sq_u;
  void merge(const ErrorSums& o);
  ErrorStats result() const;
};

struct ClassStats {
  std::int64_t violations = 0;
  std::optional<std::int64_t> first;
  double worst = 0;
  std::int64_t saturated = 0;  // violation-free elements whose bound of this class is saturated
  std::optional<std::int64_t> first_saturated;
};

struct BinStats {  // one position bin: |position| in [2^(k-1), 2^k), bin 0 = [0, 1)
  std::int64_t elements = 0, violations = 0, saturated = 0;
  double max_pair = 0, max_ulps = 0;
  ErrorSums err;
};

inline constexpr std::size_t kPositionBins = 64;

// One matched tensor over the tokens checked.
struct TensorStats {
  std::string golden_name, candidate_name, base;
  io::TensorDType dtype = io::TensorDType::f32;
  std::vector<std::int64_t> shape;
  std::int64_t elements = 0;  // checked
  std::int64_t identical = 0, nan = 0, inf = 0, mismatches = 0, finite = 0;
  double max_ulps = 0, max_abs = 0, max_rel = 0, max_pair = 0;
  io::ExactSum sum_ulps, sum_pair, sum_sq_err, sum_sq_truth;
  std::array<ClassStats, accuracy::kAccuracyClasses.size()> classes{};
  std::int64_t violations = 0, saturated = 0;
  std::optional<std::int64_t> first, first_saturated;
  double worst_score = 0;
  std::array<BinStats, kPositionBins> bins{};
  ErrorSums err;
  std::vector<ElementReport> worst;  // ranked: higher score, then lower index; at most the run's --worst
  // MLA sets (rope.rotary_offset / key_layout): pass-through channels checked bit for bit, those that
  // differ, and the smallest position of one. 0 elsewhere (and left out of the JSON).
  std::int64_t passthrough = 0, passthrough_differing = 0;
  std::optional<std::int64_t> first_passthrough_differing;

  // Adds o's statistics (not the worst lists: merge_worst).
  void merge_counts(const TensorStats& o);
};

// The K best of both lists under the worst-element order (higher score, then lower flat index).
void merge_worst(std::vector<ElementReport>& into, const std::vector<ElementReport>& more, std::size_t K);

// The tensor's report (verdict, reason, means) from its statistics under the criterion.
TensorReport finalize(const TensorStats& s, const Criterion& criterion);

// A check of tokens [first_token, last_token) of the golden set.
struct CheckPart {
  Shard shard;
  std::int64_t first_token = 0, last_token = 0, total_tokens = 0;
  CheckReport header;  // everything but tensors / verdict / reason: set, spec, criterion, name matching
  int worst_count = 10;
  std::vector<TensorStats> tensors;
  std::optional<ScoresReport> scores;  // unsharded runs only (a part of several never holds scores)
  std::vector<AttentionOutputsReport> attention;  // the same for the attention outputs (one per dtype)
  std::optional<StoresReport> stores;  // unsharded runs only, as the scores
  // The golden set's data files the check read (manifest order) and, of those, the ones whose hashes this
  // part verified (files_hashed_by: together, the parts of a run verify each file once).
  std::vector<std::string> files_read, files_hashed;
};

// The check of shard `shard` of the golden set's tokens (check_candidate is this over every token,
// finalized). SpecError when the set has fewer tokens than shards.
CheckPart check_candidate_part(const golden::GoldenSet& golden, const std::vector<io::Tensor>& candidate, const CheckOptions& options,
                               const Shard& shard);

// The check of a kernel that declined every output (`reason`, the kernel's own): nothing is compared,
// every output asked for is not tested, and the report says why. InputError for unusable options.
CheckPart declined_check_part(const golden::GoldenSet& golden, const CheckOptions& options, const Shard& shard,
                              const std::string& reason);

// The report of a part (of a whole run when the part is all tokens): verdicts and reasons.
CheckReport finalize(const CheckPart& part);

// The part file's JSON ("ropecheck-check-part", CHECK_REPORT.md "Sharded checks"): `run` is what
// every part of one run shares (the caller's description of the candidate and the options), compared
// by merge_check_parts; `source` is the candidate_source the merged report carries.
nlohmann::json part_to_json(const CheckPart& part, const nlohmann::json& run, const nlohmann::json& source);

struct MergedCheck {
  CheckPart whole;  // shard 1/1 over every token
  nlohmann::json run, source;
};

// Merges the parts' JSON (any order). InputError (one line, naming the files) when a part is not a
// check part, or the parts differ in format or ropecheck version, run, shard count or tokens, or a
// shard is given twice or missing.
MergedCheck merge_check_parts(const std::vector<nlohmann::json>& parts, const std::vector<std::string>& names);

}  // namespace ropecheck::checker
