// ropecheck's own fused RoPE + attention recipes: a rotation recipe (rope_kernels.hpp) followed by the
// attention arithmetic its accuracy class stands for (accuracy/ERROR_MODEL.md 16.2), for one GQA group:
// G query heads sharing one key / value head. What `builtin:RECIPE`'s fused entry point computes
// (kut::KernelUnderTest::rope_attention), and the candidate tests/attention/test_recipes.cpp holds to the
// score and output classes.
//
// The computation, dt the output dtype (the activation dtype): q and k rotated by the recipe and held in
// dt; then in the accumulation format Acc with intermediates held in `mid` (attention_arithmetic): the
// dot product left to right, rounded to mid; the scale (rounded to mid) applied, rounded to mid; the
// soft-cap as cap * tanh(s / cap), each step rounded to mid; the score stored in dt; the softmax with the
// row's largest logit (and the sink's) subtracted, exp in Acc, the probabilities rounded to mid, the
// weighted sum of V in Acc left to right, the output stored in dt. (Hugging Face's eager attention with
// bf16 activations, for mid = bf16.) No FMA contraction (the library is built with -ffp-contract=off).
#pragma once

#include <optional>

#include "ropecheck/core/attention_params.hpp"
#include "ropecheck/core/dtype.hpp"
#include "ropecheck/kernels/recipe.hpp"
#include "ropecheck/kernels/rope_kernels.hpp"

namespace ropecheck::kernels {

// The attention arithmetic of a recipe at output dtype dt (ERROR_MODEL.md 16.2's table): accumulations
// in binary64 or f32, intermediates (scores, probabilities) held in `mid`. The rule: accurate accumulates
// in binary64 unless dt is f32 (f32-reduced); the table recipes hold their table dtype; hf and the
// recipes derived from it hold bf16 / f16 activations in their dtype (eager attention); every other case
// holds f32, or binary64 for f64 output. tests/attention/test_recipes.cpp asserts the classes of the
// cases kernels/RECIPES.md places in one.
struct AttentionArithmetic {
  bool f64_accumulation = false;
  DType mid = DType::f32;
};
AttentionArithmetic attention_arithmetic(Recipe recipe, DType dt);

// Rotation and attention of a block of T tokens, all contiguous: q [T][G][D] (queries at q_positions),
// k [T][1][D] (keys at k_positions: the same block, or another for tests that move the queries), v
// [T][1][Dv], out [T][G][Dv] in dt = out.dtype; scores (nullptr: not wanted) [G][attention_score_count]
// in dt. Visibility is by token index (attention_keys). Throws std::invalid_argument when shapes,
// group, sinks or value_dim do not match.
void rope_attention(const RopePlan& plan, const PositionsView& q_positions, const PositionsView& k_positions,
                    const AttentionParams& a, const TensorView& q, const TensorView& k, const TensorView& v,
                    const TensorView& out, void* scores, const KernelOptions& opts = {});

}  // namespace ropecheck::kernels
