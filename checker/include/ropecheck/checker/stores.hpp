// The check of a candidate's quantized stores against a golden set's stores file (golden/GOLDEN_FORMAT.md,
// "Quantized stores"; CHECK_REPORT.md, "Quantized stores"): each code and each scale group judged with
// the store classes of accuracy/quantized_store.hpp (ERROR_MODEL.md section 15) under the criterion's
// rotation class. Three-valued: a code the class cannot decide (a tie, or one within the budget of a
// decision boundary) is not tested when the candidate's value is within the budget plus one step of the
// exact value, failed otherwise; never passed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropecheck/accuracy/error_model.hpp"
#include "ropecheck/core/quantized_store_spec.hpp"
#include "ropecheck/core/verdict.hpp"
#include "ropecheck/golden/golden_set.hpp"

namespace ropecheck::checker {

struct Criterion;

// A candidate's store of one output, as stored: the codes' bytes (FP8 codes, GGML blocks, MLX's uint32
// words little-endian) and, where the store has them, its scales' and biases' bytes (FP8: f32 scales;
// MLX: scales and biases in the store's scale dtype).
struct StoreCandidate {
  std::string golden_name;  // "q_rot.e4m3fn"
  std::string name;         // the candidate's tensor
  std::vector<std::uint8_t> codes, scales, biases;
};

// One element of a store: where it sits and how the candidate's code compares.
struct StoreElement {
  std::int64_t index = 0;  // flat, row-major in [tokens, heads, head_dim]
  std::int64_t token = 0;
  int head = 0, channel = 0;
  int golden_code = 0, candidate_code = 0;  // FP8 bit pattern, q8_0 int8, q4_0 / MLX unsigned code
  double candidate = 0;  // the candidate's stored value (its code with its own scale and bias)
  double exact = 0;      // the exact rotated value (the set's f64 copy)
  double budget = 0;     // the class's error budget of the element's scale group
  double margin = 0;     // the golden code's margin: budget < margin decides it
  ropecheck::Verdict verdict = ropecheck::Verdict::pass;
};

// One store mistake (reference/store_mistakes.hpp) held against a failing store: the store recomputed
// with the mistake from the set's exact values in binary32, compared code by code and scale by scale
// with the candidate's (checker/DIAGNOSIS.md, "Quantized stores").
struct StoreHypothesis {
  std::string id, title, source;
  std::int64_t failing = 0, failing_explained = 0;  // the failing codes and scale groups; those it reproduces
  std::int64_t compared = 0, agreeing = 0;          // every code and scale group; those equal to it
  bool matches = false;
};
struct StoreDiagnosis {
  std::int64_t failing = 0;           // failed codes + failed scale groups
  std::optional<std::string> match;   // the id of the matching mistake
  std::string conclusion;             // one line
  std::vector<StoreHypothesis> ranked;
  std::vector<std::string> unchanged;  // mistakes that write this set's correct store (cannot show here)
};

// One store of one output: every element and every scale group exactly one of passed, failed, not tested.
struct StoreCheck {
  std::string golden_name, candidate_name;  // "q_rot.e4m3fn", the candidate's tensor
  std::string store;                        // the --stores item it was written from: "e4m3fn:saturate:per-token"
  std::int64_t elements = 0, passed = 0, failed = 0, not_tested = 0;
  std::int64_t groups = 0, groups_passed = 0, groups_failed = 0, groups_not_tested = 0;  // scales (and biases)
  ropecheck::Verdict verdict = ropecheck::Verdict::pass;
  std::vector<StoreElement> worst;  // failed elements first, then not-tested ones, each in index order
  std::optional<StoreDiagnosis> diagnosis;  // failed stores only
};

struct StoresReport {
  accuracy::AccuracyClass accuracy_class = accuracy::kDefaultAccuracyClass;  // the rotation class judged under
  std::vector<StoreCheck> stores;
  ropecheck::Verdict verdict = ropecheck::Verdict::pass;
  std::string reason;  // one line, empty for pass

  nlohmann::json to_json() const;
  std::string summary() const;  // the terminal block
};

// The set's store tensors a candidate answers ("q_rot.e4m3fn", "k_rot.q8_0", ...: the codes; their scales,
// biases and margins are companions), manifest order; empty for a set written without --stores.
std::vector<std::string> store_outputs(const golden::GoldenSet& g);
// The candidate tensors a store needs beside its codes, as suffixes of its name: {".scale"} for FP8,
// {".scales", ".biases"} for MLX affine, none for GGML blocks.
std::vector<std::string> store_companions(const golden::GoldenSet& g, const std::string& golden_name);
// The store a golden store tensor was written with (its manifest record), as --stores parses it;
// InputError for a record that names none.
quant::StoreSpec store_spec(const golden::GoldenSet& g, const std::string& golden_name);

// The candidate's stores judged under the criterion's class (a max-ulp or tolerance criterion: the
// default class, kDefaultAccuracyClass); worst_count elements listed per store. InputError (one line)
// when a candidate's bytes do not hold the golden store's shape.
StoresReport check_stores(const golden::GoldenSet& g, const std::vector<StoreCandidate>& candidates,
                          const Criterion& criterion, int worst_count);

}  // namespace ropecheck::checker
