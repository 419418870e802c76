// Kernels under test that the property suite cannot make by itself (props must not depend on golden or
// on the CUDA runtime): a kernel plugin (`ropecheck props --kernel LIB.so`) and ropecheck's CUDA
// kernels (`ropecheck props --target cuda:RECIPE`), both behind props' one generic target
// (props/kut_target.hpp).
#pragma once

#include <filesystem>
#include <memory>

#include "ropecheck/plugin/client.hpp"
#include "ropecheck/props/target.hpp"

namespace ropecheck::cli {

// Loads the plugin (the plugin client: isolation, load errors as one-line InputError) as a Target
// named "plugin:NAME" that claims `accuracy` with outputs requested in `dtype`; with_output offers
// every ABI dtype (the plugin answers UNSUPPORTED for those it does not implement).
std::unique_ptr<props::Target> make_plugin_target(const std::filesystem::path& library,
                                                  accuracy::AccuracyClass accuracy = accuracy::AccuracyClass::fp32_angle,
                                                  DType dtype = DType::f32, const plugin::PluginClientOptions& options = {});

// Registers "cuda:<recipe>" (f32 outputs) and "cuda:<recipe>-bf16out" for every recipe: ropecheck's
// CUDA kernel claiming the class of the CPU kernel of the same recipe and dtype
// (props::kernel_claimed_class). Making one without a GPU throws one line, "--target cuda:hf: no
// CUDA device (...)" (or "... built without CUDA"), unless ROPECHECK_CUDA_EMULATION=1 (host emulation).
void register_cuda_targets();

}  // namespace ropecheck::cli
