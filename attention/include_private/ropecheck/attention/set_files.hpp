// The attention files a golden set carries (golden/GOLDEN_FORMAT.md, "Attention scores" and "Attention
// blocks"): the engine's correctly rounded values as described tensors with the manifest's record, so
// that golden/ stores them without knowing what a score is. Inputs are given (golden/ generates them).
//
// score file "scores" (role "score"), G query heads sharing one key head, N pairs:
//   score_positions i64 [N, 2]   (query position, key position) of each pair
//   score_q f32 [G, D], score_k f32 [D]   the same vectors at every position
//   scores.<dt> [G, N]           t(m, n) (spec.hpp) of each head and pair
// attention file "attention" (role "attention"), a block of T tokens:
//   attention_positions i64 [T], attention_q f32 [T, G, D], attention_k f32 [T, D], attention_v f32 [T, Dv],
//   attention_sinks f64 [G] (with sinks), attention_out.<dt> [T, G, Dv]   o_i (spec.hpp) of each token and head
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "ropecheck/attention/pairs.hpp"
#include "ropecheck/attention/spec.hpp"
#include "ropecheck/core/dtype.hpp"
#include "ropecheck/io/described_file.hpp"

namespace ropecheck::attention {

// What both files share: the rotation, the attention problem (group, scale, soft-cap, sinks; the block's
// mask comes from the Block), the dtypes to round to and the engine's worker threads.
struct SetFileContext {
  const RopeSpec* rope = nullptr;
  std::optional<std::int64_t> seq_len;
  AttentionSpec attention;
  std::span<const DType> dtypes;
  int threads = 1;
};

// q: G * D values, k: D values. Throws SpecError for an invalid spec.
io::DescribedFile score_file(const SetFileContext& c, const PairSet& pairs, std::span<const float> q,
                             std::span<const float> k);
// The most bytes score_file holds at once (values in every dtype, as doubles and stored, and one chunk
// of the engine's tokens).
double score_file_memory(std::int64_t pairs, int group, std::size_t dtypes);

// q: T * G * D values, k: T * D, v: T * Dv (Dv = value_dim(c.attention, *c.rope)).
io::DescribedFile attention_file(const SetFileContext& c, const Block& block, std::span<const float> q,
                                 std::span<const float> k, std::span<const float> v);
double attention_file_memory(const Block& block, int group, int head_dim, int value_dim, std::size_t dtypes);

}  // namespace ropecheck::attention
