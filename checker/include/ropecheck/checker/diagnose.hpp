// Differential diagnosis of a failing check (checker/DIAGNOSIS.md): which known RoPE mistake explains
// the candidate. Each hypothesis of the catalogue is the exact computation with one documented mistake
// applied (positions rounded to bf16, the other channel pairing, cos and sin swapped, ...), evaluated
// with the MPFR reference on the failing elements and a fixed-seed sample of the passing ones; a
// hypothesis matches only when every evaluated element lies within the class bound of that mistaken
// truth. Beyond the fixed catalogue, parametric hypotheses (a position offset, a base, a scaling factor,
// an attention factor, a rotary width) are fitted to the candidate's own outputs in binary64 and then
// judged exactly like the others. Shape and convention slips (a [batch, heads, seq, head_dim] tensor, a cat(freqs, freqs) table)
// are named before the numeric check, with the remedy (shape_slip, apply_candidate_layout).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropecheck/accuracy/error_model.hpp"
#include "ropecheck/checker/checker.hpp"
#include "ropecheck/golden/golden_set.hpp"
#include "ropecheck/io/tensor.hpp"

namespace ropecheck::checker {

// A documented mistake: the exact computation with these changes applied. Fields compose (a kernel
// with two mistakes is the composition of two hypotheses).
struct Mistake {
  std::optional<DType> position_rounding;  // positions rounded to this dtype before the angle
  std::int64_t position_shift = 0;         // p + shift
  std::optional<int> position_wrap_bits;   // 16 or 32: positions cast to a signed integer that wide (wrapped)
  std::optional<DType> freq_rounding;      // inverse frequencies rounded to this dtype
  bool reciprocal_freq = false;            // 1 / w used as the inverse frequency (periods for frequencies)
  std::optional<double> base;              // rope_theta replaced
  std::optional<double> factor;            // the scaling factor replaced (linear, yarn, llama3)
  std::optional<double> attention;         // the attention factor replaced by this value
  std::optional<int> rotary_dim;           // the rotary width replaced (prefix-partial RoPE)
  bool swap_longrope_factors = false;      // LongRoPE: the other factor list (and its mscale)
  bool flip_layout = false;                // half-split <-> interleaved pairing
  bool ignore_scaling = false;             // plain base frequencies, attention factor 1
  bool flip_truncate = false;              // YaRN: correction range rounded <-> not rounded
  bool flip_mrope_mode = false;            // chunked <-> interleaved mrope sections
  bool swap_hw_streams = false;            // mrope: h and w streams exchanged
  bool swap_cos_sin = false;
  bool negate_sin = false;
  // MLA (a rotary slice inside the head, a k_pe key; DIAGNOSIS.md "MLA"): the slice placed at another
  // offset; the whole head rotated (qk_head_dim taken as the rotary width: q_nope rotated too); the
  // pass-through channels multiplied by YaRN's get_mscale(factor, mscale); every token's key rotated at
  // the set's first position (k_pe broadcast along the sequence instead of the heads).
  std::optional<int> rotary_offset;
  bool whole_head = false;
  bool passthrough_mscale = false;
  bool first_position = false;
  // The Q/K RMSNorm stage before the rotation (sets with q_norm / k_norm; DIAGNOSIS.md "Q/K RMSNorm"):
  // eps omitted, the weight omitted, w and 1 + w confused, the mean over the token's whole row (every
  // head), the sum divided by head_dim / 2.
  enum class Norm { keep, eps_omitted, weight_omitted, weight_form_swapped, whole_row, mean_over_pairs } norm = Norm::keep;
  // yarn_mscale: get_mscale(factor, mscale) folded in alone, not divided by get_mscale(factor, mscale_all_dim).
  enum class Att { keep, missing, squared, folded_in_table, yarn_mscale } att = Att::keep;
  // Not a mistake of the formula: the kernel computes the exact formula in a looser class.
  std::optional<accuracy::AccuracyClass> judged_class;

  bool is_identity() const;
  // The composition of two mistakes; nullopt when they change the same thing.
  static std::optional<Mistake> compose(const Mistake& a, const Mistake& b);
};

// The one parameter a hypothesis changes, for the conclusion "base 10000 fits every failing element;
// the spec says 500000".
struct Parameter {
  std::string name;        // "base", "position offset", "scaling factor", "attention factor", "rotary width"
  std::string value;       // the hypothesis's value, as printed
  std::string spec_value;  // the spec's value, as printed
};

struct Hypothesis {
  std::string id;      // "bf16-positions"
  std::string title;   // "positions rounded to bf16"
  std::string source;  // where the mistake is documented
  Mistake mistake;
  std::optional<Parameter> parameter;  // set for the hypotheses stated as one parameter's value
};

// The catalogue, in the order DIAGNOSIS.md lists it (a parameter's spec_value is filled in when it is
// evaluated against a set).
const std::vector<Hypothesis>& diagnosis_catalogue();

struct DiagnoseOptions {
  int max_failing = 512;   // failing elements evaluated per tensor (a fixed-seed sample when more fail)
  int max_passing = 128;   // passing elements evaluated per tensor (a fixed-seed sample)
  std::uint64_t seed = 20261125;
  int threads = 0;         // the scan for failing elements (0: hardware concurrency); results do not depend on it
  bool try_pairs = true;   // when no single hypothesis matches, compose pairs of the partial ones
  bool fit = true;         // fit the parametric hypotheses (offset, base, factor, attention factor, rotary width)
};

struct HypothesisResult {
  std::string id, title, source;
  accuracy::AccuracyClass judged_class = accuracy::AccuracyClass::fp32_angle;  // the bound it was judged with
  std::int64_t failing_evaluated = 0, failing_explained = 0;
  std::int64_t passing_evaluated = 0, passing_explained = 0;
  // Of the evaluated elements, those where the bound around the mistaken truth is saturated (it has
  // reached the element's magnitude): not discriminated, so never counted as explained.
  std::int64_t failing_saturated = 0, passing_saturated = 0;
  double max_ratio = 0;  // max over evaluated, discriminated elements of |candidate - mistaken truth| / class bound
  // Every evaluated element within the bound or not discriminated, at least half of the failing ones
  // discriminated, and at least one explained.
  bool matches = false;
  std::optional<Parameter> parameter;
  double failing_fraction() const;  // failing_explained / failing_evaluated
};

// One parametric family fitted to the candidate: the value the data gives, and what became of it.
struct ParameterFit {
  std::string id;       // the hypothesis id a fit becomes: "fit-base"
  Parameter parameter;  // value: the fitted one ("" when none fits the screen)
  std::string outcome;  // "evaluated", "same as ID" (a catalogue hypothesis computes it), or why not
};

struct Diagnosis {
  bool applicable = true;            // false: sinusoidal set, or no RoPE output checked
  std::string not_applicable_reason;
  accuracy::AccuracyClass judged_class = accuracy::AccuracyClass::fp32_angle;  // what "failing" means here
  std::vector<std::string> tensors;  // the golden outputs diagnosed
  std::int64_t failing_elements = 0;  // outside the judging class, over those tensors
  std::int64_t failing_evaluated = 0, passing_evaluated = 0;
  std::vector<HypothesisResult> ranked;  // applicable hypotheses, best explanation first
  std::vector<HypothesisResult> pairs;   // compositions of two, when no single one matched
  std::vector<ParameterFit> fits;        // the parametric families tried
  std::string conclusion;                // one line
  double seconds = 0;                    // wall time of the diagnosis

  const HypothesisResult* best_match() const;  // rank 1 when it matches
  nlohmann::json to_json() const;
  std::string summary() const;  // the text report's section
};

// Diagnoses the tensors of `report` (the failing ones; every RoPE one with all_tensors).
Diagnosis diagnose(const golden::GoldenSet& golden, const std::vector<io::Tensor>& candidate, const CheckReport& report,
                   const DiagnoseOptions& options = {}, bool all_tensors = false);

// How a candidate's q_rot / k_rot are laid out (--layout): ropecheck's [tokens, heads, head_dim], or with a
// batch dimension of 1 in front.
enum class CandidateLayout { thd, bshd, bhsd };
std::optional<CandidateLayout> parse_candidate_layout(const std::string& s);
// Rewrites 4-D q_rot / k_rot candidate tensors with batch 1 to [tokens, heads, head_dim] (InputError
// when a tensor does not have that form).
void apply_candidate_layout(std::vector<io::Tensor>& candidate, CandidateLayout layout);

// The remedy for a shape mismatch that is a known slip, or "" (one phrase, appended to the mismatch
// message): [batch, heads, seq, head_dim] tensors, cat(freqs, freqs) / repeat_interleave tables.
std::string shape_slip(const std::string& base, const io::Tensor& candidate, const std::vector<std::int64_t>& golden_shape);

}  // namespace ropecheck::checker
