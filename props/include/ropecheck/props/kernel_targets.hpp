// The fast CPU kernels (kernels/rope_kernels.hpp) as property-suite targets, one per precision recipe
// (kernels/recipe.hpp) and storage dtype: "kernel:<recipe>" (f32 outputs) and "kernel:<recipe>-bf16out"
// (bf16 outputs), so that `ropecheck props --target kernel:accurate` runs every property against
// ropecheck's own kernels.
//
// Each target claims the accuracy class the error model derives for its recipe and storage dtype
// (accuracy/ERROR_MODEL.md), and the suite's tolerances follow from that claim. The known-bad recipes
// claim what the recipe they break claims (hf's class), so the suite shows them failing it.
#pragma once

#include <memory>
#include <string>

#include "ropecheck/kernels/recipe.hpp"
#include "ropecheck/props/target.hpp"

namespace ropecheck::props {

// The class a kernel target of this recipe and storage dtype claims:
//   accurate        f32: f32-reduced; f16, bf16, f64: fp64-angle (the storage rounding hides the f32
//                   sin / cos, ERROR_MODEL.md section 10)
//   hf and the known-bad recipes derived from it (bf16 / f16 inverse frequencies or positions,
//   fast-sincos): f32, f64: fp32-angle; f16: f16-table; bf16: bf16-table (hf rotates in the storage dtype)
//   meta, ggml      fp32-angle
//   bf16-table      bf16-table;  f16-table: f16-table
accuracy::AccuracyClass kernel_claimed_class(kernels::Recipe recipe, DType storage);

// A target name's storage suffix: "" (f32), "-bf16out", "-f16out", "-f64out".
std::string storage_suffix(DType storage);

// The target "kernel:<recipe>" (storage f32) or "kernel:<recipe>-bf16out" / "-f16out" / "-f64out".
// It runs the default CPU path (AVX-512 where available) on one thread; `portable` forces the portable
// path. Specs the kernels cannot run are reported unsupported (the property is skipped).
std::unique_ptr<Target> make_kernel_target(kernels::Recipe recipe, DType storage = DType::f32, bool portable = false);

// Registers "kernel:<recipe>" and "kernel:<recipe>-bf16out" for every recipe (called by
// register_builtin_targets()).
void register_kernel_targets();

}  // namespace ropecheck::props
