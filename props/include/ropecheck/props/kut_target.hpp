// A kernel under test (kut/kernel_under_test.hpp) as a property-suite target: the one adapter from
// the suite's doubles ([tokens][heads][head_dim], a Position per token) to typed storage, for every
// source (ropecheck's CPU and CUDA kernels, C-ABI plugins).
//
// Inputs are passed as f32 (the suite's inputs are bf16-exact); outputs are requested in the target's
// dtype and decoded exactly. Frequencies are resolved without a run-time sequence length, as the suite
// fixes for every target. A call the kernel answers unsupported (or a dtype or entry point it does not
// declare) makes the property skip; a failed call (a plugin that crashed, hung, ...) reads as NaN
// outputs and is reported through take_failures(), which also lets the kernel be called again
// (KernelUnderTest::forgive) for the next property. Negative positions are generated only when the
// kernel declares them.
#pragma once

#include <functional>
#include <memory>

#include "ropecheck/kernels/recipe.hpp"
#include "ropecheck/kut/kernel_under_test.hpp"
#include "ropecheck/props/target.hpp"

namespace ropecheck::props {

// The class a kernel claims for its outputs in a dtype (ropecheck's own kernels: kernel_claimed_class).
using ClassClaim = std::function<accuracy::AccuracyClass(DType)>;

// `info`'s name, description, accuracy and dtype are the caller's; negative_positions comes from the
// kernel. With `every_dtype`, with_output(d) gives the same kernel storing its outputs in d (it answers
// UNSUPPORTED for the dtypes it does not implement); without, with_output gives nullptr. With `claim`,
// the target's class in each dtype is claim(dtype) (info.accuracy is ignored); without, info.accuracy in all.
std::unique_ptr<Target> make_kut_target(std::shared_ptr<kut::KernelUnderTest> kernel, TargetInfo info,
                                        bool every_dtype = false, ClassClaim claim = {});

// The class ropecheck's kernel (CPU or CUDA) of this recipe claims with outputs stored in `storage`:
//   accurate        f32: f32-reduced; f16, bf16, f64: fp64-angle (the storage rounding hides the f32
//                   sin / cos, ERROR_MODEL.md section 10)
//   hf and the known-bad recipes derived from it (bf16 / f16 inverse frequencies or positions,
//   fast-sincos): f32, f64: fp32-angle; f16: f16-table; bf16: bf16-table (hf rotates in the storage dtype)
//   meta, ggml      fp32-angle
//   bf16-table      bf16-table;  f16-table: f16-table
// The known-bad recipes claim what the recipe they break claims, so the suite shows them failing it.
accuracy::AccuracyClass kernel_claimed_class(kernels::Recipe recipe, DType storage);

}  // namespace ropecheck::props
