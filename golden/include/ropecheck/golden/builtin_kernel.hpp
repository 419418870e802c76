// ropecheck's own fast CPU kernels (kernels/rope_kernels.hpp) run on a golden set's inputs, the way
// run_kernel_plugin() runs a C ABI plugin, so that `ropecheck check --kernel builtin:<recipe>` and
// tests check them with the same checker.
//
// For every output dtype of the set (f64 and the listed ones): RoPE sets get q_rot.<dt>, k_rot.<dt>
// (rope_apply on the f32 inputs q and k, output rounded once to dt) and cos.<dt>, sin.<dt>
// (rope_cos_sin_table); sinusoidal sets get pe.<dt> (sinusoidal_table). Frequencies are resolved with
// the set's sequence length (manifest), multimodal sets pass the t / h / w streams.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "ropecheck/golden/golden_set.hpp"
#include "ropecheck/golden/plugin.hpp"
#include "ropecheck/kernels/recipe.hpp"
#include "ropecheck/kernels/rope_kernels.hpp"

namespace ropecheck::golden {

// "builtin:<recipe>" -> the recipe; nullopt when `kernel` does not start with "builtin:". Throws
// TensorError for "builtin:" followed by an unknown recipe (the message lists the known ones).
std::optional<kernels::Recipe> parse_builtin_kernel(std::string_view kernel);

// A one-line name for reports: "builtin:accurate (avx512)" / "(portable)".
std::string builtin_kernel_name(kernels::Recipe recipe, const kernels::KernelOptions& options = {});

// Runs the kernel on every output of the set. TensorError (one line) when the kernels cannot run the
// set's spec (the SpecError's message) or the set lacks a tensor. `notes` stays empty: the built-in
// kernels support every dtype and spec the golden writer produces.
KernelRun run_builtin_kernel(kernels::Recipe recipe, const GoldenSet& golden, const kernels::KernelOptions& options = {});

}  // namespace ropecheck::golden
