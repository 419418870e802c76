// Storage properties (props/PROPERTIES.md, "Storage properties"): ropecheck's own fused recipes
// (rotate -> quantize, kernels/rope_quantize.hpp; Q/K RMSNorm -> rotate, kernels/qk_norm.hpp) judged by
// RapidCheck properties whose tolerances are the store classes of ERROR_MODEL.md section 15 and the norm
// term of section 17. Private to the build tree (like mutants.hpp): the mistakes are the kernels' injected
// ones, for `props --stores` and the tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ropecheck/core/quantized_store_spec.hpp"
#include "ropecheck/core/spec.hpp"
#include "ropecheck/core/verdict.hpp"
#include "ropecheck/kernels/qk_norm.hpp"
#include "ropecheck/kernels/recipe.hpp"
#include "ropecheck/kernels/rope_quantize.hpp"

namespace ropecheck::props {

// The recipe under test: the rotation recipe (binary32 outputs, its class kernel_claimed_class(recipe,
// f32)) and the mistakes injected into its store and its norm stage.
struct StoreRecipe {
  kernels::Recipe recipe = kernels::Recipe::hf;
  kernels::StoreMistake store_mistake = kernels::StoreMistake::none;
  kernels::NormMistake norm_mistake = kernels::NormMistake::none;
};

struct StorePropsOptions {
  int cases = 20;
  std::uint64_t seed = 20261121;
  std::int64_t max_position = std::int64_t{1} << 20;
};

struct StorePropertyOutcome {
  std::string property;  // "store_shift" or "norm_invariance"
  std::string store;     // the --stores item judged ("" for norm_invariance)
  Verdict verdict = Verdict::pass;
  int cases = 0;
  double worst_margin = 0;
  std::int64_t saturated = 0, bounds = 0;  // class bounds saturated (not tested) of those evaluated
  std::string counterexample;              // the failing case (verdict fail)
  std::uint64_t seed = 0;
};

// "store_shift", "norm_invariance".
const std::vector<std::string>& store_property_names();

// store_shift: the logits of the dequantized stores of f(q, m), f(k, n) equal the exact q^T R(n-m) k
// and do not change under a shift of m and n, within the dot-product bound of the per-element store
// tolerance (class bound + one step of the store and of its data-derived scale). std::invalid_argument
// when the spec is not RoPE or its head_dim does not suit the store.
StorePropertyOutcome run_store_shift(const EncodingSpec& spec, const quant::StoreSpec& store, const StoreRecipe& recipe,
                                     const StorePropsOptions& options);

// norm_invariance: per head, the norm of the normalized-then-rotated binary32 head (before any store)
// equals att sqrt(head_dim) |f . x| / sqrt(|x|^2 + head_dim eps) (pass-through channels without att),
// within the norm term (section 17) plus the angle-free rotation bound (section 14). The spec's q_norm
// stage (eps, weight form) when it has one, else a drawn stage; weights drawn when the spec gives none.
StorePropertyOutcome run_norm_invariance(const EncodingSpec& spec, const StoreRecipe& recipe,
                                         const StorePropsOptions& options);

}  // namespace ropecheck::props
