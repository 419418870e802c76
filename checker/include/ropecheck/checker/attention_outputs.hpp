// The check of a candidate's attention outputs against a golden set's attention block (golden/
// GOLDEN_FORMAT.md, "Attention blocks"): each output o[token][head][channel] = sum_j p_j V_jc judged with
// the output class derived from the criterion's rotation class (accuracy/attention_bounds.hpp,
// output_bound; accuracy/ERROR_MODEL.md section 16.4), or with --max-ulp / --atol on the output itself.
// A saturated bound (it reaches sum_j p_j |V_jc|, so a zero output would pass) leaves its element not
// tested, never passed (core/verdict.hpp). The report's JSON form is part of the check report
// (CHECK_REPORT.md, "Attention outputs").
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropecheck/checker/scores.hpp"
#include "ropecheck/core/attention_params.hpp"
#include "ropecheck/core/verdict.hpp"
#include "ropecheck/golden/golden_set.hpp"
#include "ropecheck/io/tensor.hpp"

namespace ropecheck::checker {

struct Criterion;

// One output element: where it sits and how wrong it is.
struct OutputElement {
  std::int64_t index = 0;  // flat, row-major in [T][G][Dv]
  std::int64_t token = 0;  // index in the block
  int head = 0;            // query head of the group
  int channel = 0;         // channel of V
  std::int64_t position = 0;  // the token's position (attention_positions)
  double candidate = 0, truth = 0, golden = 0;  // golden: the correctly rounded value of the candidate's dtype
  double abs_error = 0;
  double allowed = 0;    // the criterion's bound at this element
  double magnitude = 0;  // sum_j p_j |V_jc| (ERROR_MODEL.md 16.1); 0 unless a class criterion
  double score = 0;      // abs_error / allowed (exact: ulps from the golden value); > 1 fails (exact: > 0)
  bool saturated = false;  // the bound reached the magnitude: not tested, whatever the score
};

struct AttentionOutputsReport {
  std::string golden_name, candidate_name;  // "attention_out.f32", the candidate tensor (or the kernel's)
  io::TensorDType dtype = io::TensorDType::f32;
  std::vector<std::int64_t> shape;  // [T][G][Dv]
  std::int64_t elements = 0;
  std::string block;  // the manifest's argument, "causal:100:64:16"
  // Under the verdict criterion: every element is exactly one of passed, failed, not tested (saturated).
  std::int64_t passed = 0, failed = 0, not_tested = 0;
  std::int64_t identical = 0;  // equal to the golden value of the same dtype
  std::int64_t nonfinite = 0;  // NaN / Inf candidate outputs (the truth is always finite): failures
  double max_abs_error = 0;    // over finite candidates
  std::vector<ScoreClassResult> classes;  // every output class, strictest first (class criteria only)
  ropecheck::Verdict verdict = ropecheck::Verdict::pass;
  std::string reason;  // one line, empty for pass
  double worst_score = 0;
  std::vector<OutputElement> worst;  // highest score first, then lower index

  nlohmann::json to_json() const;
  std::string summary(const Criterion& criterion) const;  // the terminal block
};

// The candidate's outputs `cand` ([T][G][Dv] values of `dtype`, already decoded) against golden tensor
// `golden_name` ("attention_out.<dt>") of `g`, under `criterion`; worst_count worst elements listed;
// `threads` as CheckOptions (the result does not depend on it). InputError when the set's attention file
// is unusable or `cand` has the wrong size.
AttentionOutputsReport check_attention_outputs(const golden::GoldenSet& g, const std::string& golden_name,
                                               const std::string& candidate_name, io::TensorDType dtype,
                                               std::span<const double> cand, const Criterion& criterion, int worst_count,
                                               int threads);

// The set's attention output tensors ("attention_out.<dt>", manifest order; empty without --attention).
std::vector<std::string> attention_output_names(const golden::GoldenSet& g);

// The block's parameters as a fused kernel takes them (kut::RopeAttentionCall): group, scale, soft-cap,
// mask, sinks, value_dim from the manifest's "attention" record and the sinks tensor. InputError when the
// set has no attention block or its record is unusable.
AttentionParams attention_params_of(const golden::GoldenSet& g);

}  // namespace ropecheck::checker
