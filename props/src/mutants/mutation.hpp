// The mutants' parts (props/mutants.hpp): the bugs, and the hf-fp32 kernel's steps with each bug's knob,
// one file per group of mistakes; with no knob turned every step is the kernel's own
// (kernels/src/scalar_recipes.cpp), bit for bit. Compiled as one unit (mutants_unit.cpp).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ropecheck/core/dtype.hpp"
#include "ropecheck/core/spec.hpp"
#include "ropecheck/kernels/scalar_recipes.hpp"
#include "ropecheck/props/target.hpp"

namespace ropecheck::props::mutation {

namespace k = ropecheck::kernels;

inline std::size_t idx(std::int64_t v) { return static_cast<std::size_t>(v); }

enum class Bug {
  wrong_pairing,
  off_by_one_position,
  wrong_base,
  bf16_inv_freq,
  f16_table,
  bf16_positions,
  sin_sign_flipped,
  cos_sin_swapped,
  partial_wrong_channels,
  yarn_ramp_reversed,
  llama3_exclusive_edges,
  crude_sincos,
  attention_factor_twice,
  mrope_sections_swapped,
  dynamic_static_ntk,
  longrope_long_factors,
  k_head_offset,
  attention_factor_dropped,
  bf16_truncating_store,
  k_position_slip,
};

// Frequency mistakes (frequency_mistakes.cpp): the inverse frequencies and attention factor the kernel uses.
k::RopeFrequenciesF32 mutant_frequencies(Bug bug, const RopeSpec& r);

// Position mistakes (position_mistakes.cpp): the position of pair j's stream, as the kernel reads and holds it.
std::int64_t mutant_stream_position(Bug bug, const RopeSpec& r, const Position& p, int j);
float mutant_position(Bug bug, std::int64_t p);
// The position the q or k path (input "q" / "k") adds to every token's (k_position_slip: 1 on the k path).
std::int64_t mutant_position_slip(Bug bug, std::string_view input);

// Table and storage mistakes (table_mistakes.cpp): {cos, sin} of an angle with the attention factor
// folded in, and the store of a result in dtype dt.
std::pair<float, float> mutant_table(Bug bug, float theta, float att);
float mutant_store(Bug bug, float v, DType dt);

// Layout mistakes (layout_mistakes.cpp), in the apply loops that call the steps above.
void mutant_rope_apply(Bug bug, std::string_view input, const RopeSpec& r, std::span<const Position> positions,
                       int heads, std::span<const float> x, std::span<float> out, DType dt);
void mutant_sinusoidal(Bug bug, const SinusoidalSpec& spec, std::span<const std::int64_t> positions,
                       std::span<float> out, DType dt);

// The catalogue (catalogue.cpp): every mutant, in a fixed order, and the spec a user meets it with.
struct MutantDef {
  Bug bug;
  const char* name;
  const char* description;
  const char* where;
  const char* preset;
  std::int64_t max_position;
  const char* known_gap = "";
  DType dtype = DType::f32;
};

const std::vector<MutantDef>& mutant_defs();
EncodingSpec mutant_spec(const MutantDef& d);

// The targets (targets.cpp): a mutant as a props target, and the output dtype's name suffix.
std::unique_ptr<Target> make_bug_target(const MutantDef& d);
std::string dtype_suffix(DType out);

}  // namespace ropecheck::props::mutation
