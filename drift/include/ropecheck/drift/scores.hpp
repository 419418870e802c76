// `drift --scores`: what each kernel's rotation does to attention logits and to the softmax over them
// (drift/DRIFT.md, "Scores"). For every pair (query at m, key at n) of a pair set (attention/pairs.hpp's
// grammar) and every head: the kernel's rotated q at m and k at n, their score scale <q^, k^> formed with a
// compensated dot product (so the only error left is the kernel's rotation and storage), against the
// correctly rounded exact score of attention::AttentionEngine::pairs. Errors in units of the logit's own
// rounding (half an ulp of the exact logit in f32 and in bf16), relative to the score's magnitude, and
// against the score class's propagated bound (accuracy/attention_bounds.hpp); per query row, the
// softmax's probabilities and an output o = sum p v against the exact ones.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ropecheck/accuracy/error_model.hpp"
#include "ropecheck/attention/pairs.hpp"
#include "ropecheck/core/dtype.hpp"
#include "ropecheck/core/spec.hpp"
#include "ropecheck/drift/metrics.hpp"
#include "ropecheck/plugin/client.hpp"
#include "ropecheck/plugin/kernel_name.hpp"

namespace ropecheck::drift {

// ---- the metrics (scores_metrics.cpp), public so that they are tested on known perturbations ----

// The logit's own rounding: ulp(s, dt) / 2 (core/dtype.hpp's spacing of dt at |s|), the largest error of
// rounding the exact logit s to dt. error / logit_rounding(s, dt) is the error in those units.
double logit_rounding(double s, DType dt);

// sum a_i b_i, compensated (Ogita, Rump and Oishi's Dot2: products split exactly with FMA, summed in
// double-double): relative error about 2^-106 times the condition number, so for the storage values of a
// kernel (at most f32 wide, every product exact) the result is the exact dot product to about 2^-100.
double dd_dot(std::span<const double> a, std::span<const double> b);

// One query row's softmax over its keys: exact (from the exact scores) against the candidate's (from the
// candidate's scores), both in binary64 with the row's largest logit subtracted first; v is [keys][dv].
//   prob_rel: max_j |p^_j - p_j| / p_j over the keys with p_j > 0
//   out_rel:  max_c |o^_c - o_c| / M_c, o_c = sum_j p_j v_jc (dd_dot), M_c = sum_j p_j |v_jc|
struct RowError {
  double prob_rel = 0, out_rel = 0;
};
RowError softmax_row_error(std::span<const double> exact, std::span<const double> candidate,
                           std::span<const double> v, int dv);

// Octave bins of a distance or position: bin 0 holds 0, bin b >= 1 holds [2^(b-1), 2^b).
int octave_bin(std::int64_t x);

// ---- the run ----

struct ScoresOptions {
  std::string pairs;                    // attention/pairs.hpp grammar; empty: default_score_pairs(max_pos)
  std::int64_t max_pos = 131072;        // N, for the default pairs
  DType storage = DType::bf16;          // the kernels' output dtype
  std::optional<std::int64_t> seq_len;  // dynamic / LongRoPE; default N
  int heads = 4;                        // independent q / k / v draws per token (1 .. 64)
  std::uint64_t seed = 0;
  int threads = 0;
  accuracy::AccuracyClass bound_class = accuracy::AccuracyClass::fp32_angle;  // error / bound
  plugin::PluginClientOptions plugin;
};

// The pairs of a run without --pairs: every distance (log-spaced, 4 per octave) from queries at 2^k - 1
// (k = 4, 5, ...) and at N - 1, and the last 2 queries of an N-token context against every 127th key.
std::string default_score_pairs(std::int64_t max_pos);

// The largest pair set --scores takes (its records are kept per kernel).
inline constexpr std::int64_t kMaxScorePairs = std::int64_t{1} << 20;

struct ScoreRecord {
  std::int64_t query = 0, key = 0;
  int head = 0;
  double exact = 0, candidate = 0;  // the scores (candidate: capped like the error when not finite)
  double error = 0;                 // |candidate - exact| (kUnitCap M_s for a non-finite candidate)
  double f32_units = 0, bf16_units = 0;  // error / logit_rounding(exact, f32 / bf16)
  double rel = 0;                   // error / M_s, M_s = scale sum_c |Q_c| |K_c| (ERROR_MODEL.md 16.1)
  std::optional<double> bound_ratio;  // error / the class's propagated bound; nullopt: saturated (or none)
  bool nonfinite = false;           // the kernel's rotated q or k held NaN / infinity
};

struct RowRecord {
  std::int64_t query = 0;
  int head = 0;
  std::int64_t keys = 0;
  RowError error;
};

// Summary of records: count, max and median of each unit, the largest error / bound.
struct ScoreSummary {
  std::int64_t count = 0, nonfinite = 0, saturated = 0;
  double abs_max = 0, f32_max = 0, f32_median = 0, bf16_max = 0, bf16_median = 0, rel_max = 0, rel_median = 0;
  std::optional<double> bound_max;  // nullopt: every bound saturated
  double prob_rel_max = 0, out_rel_max = 0;  // over the rows (total and position bins; 0 in distance bins)
};

struct ScoreBin {
  int bin = 0;
  std::int64_t lo = 0, hi = 0;  // [lo, hi)
  ScoreSummary summary;
};

struct ScoresKernel {
  std::string name, description;
  bool known_bad = false;
  std::vector<ScoreRecord> records;  // pair-major, then head
  std::vector<RowRecord> rows;
  std::vector<ScoreBin> by_distance, by_position;  // m - n and m, octave bins
  ScoreSummary total;
};

struct ScoresResult {
  EncodingSpec spec;
  ScoresOptions options;
  std::string pairs;  // the pair set as run
  std::int64_t pair_count = 0, seq_len = 0;
  double scale = 0;
  std::vector<ScoresKernel> kernels;
  std::vector<std::string> kernel_failures;
  double seconds = 0;
};

// The summaries of a kernel's records (bins and total).
void summarize_scores(ScoresKernel& k);

// The pair set the options name, after every check run_scores makes before it computes (so that a caller
// can refuse bad input before it makes an output folder): SpecError, one line, for a sinusoidal spec, bad
// pairs (syntax, more than kMaxScorePairs, a position beyond 2^24, more than 2^24 tokens x heads x head_dim)
// or bad options.
attention::PairSet check_scores_options(const EncodingSpec& spec, const ScoresOptions& options);

// Throws SpecError for a sinusoidal spec, bad pairs (syntax, more than kMaxScorePairs, a position beyond
// 2^24) or bad options; InputError for a kernel that does not load or declines the spec.
ScoresResult run_scores(const EncodingSpec& spec, std::span<const plugin::KernelName> kernels,
                        const ScoresOptions& options);

}  // namespace ropecheck::drift
