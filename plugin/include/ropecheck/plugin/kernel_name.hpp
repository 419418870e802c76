// `check --kernel NAME`: the kernel under test a name stands for, and how the report describes it.
//   builtin:RECIPE       ropecheck's fast CPU kernel of that recipe (kut/builtin_sources.hpp)
//   builtin-cuda:RECIPE  ropecheck's CUDA kernel of that recipe (kut/cuda_source.hpp); without a GPU
//                        only under the test-only switch ROPECHECK_CUDA_EMULATION=1 (host emulation)
//   anything else        a kernel plugin library (plugin_kernel.hpp)
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "ropecheck/plugin/client.hpp"
#include "ropecheck/kernels/recipe.hpp"
#include "ropecheck/kernels/rope_kernels.hpp"
#include "ropecheck/kut/kernel_under_test.hpp"

namespace ropecheck::plugin {

// "PREFIX:RECIPE" -> the recipe; nullopt when `kernel` does not start with "PREFIX:". Throws
// InputError for the prefix followed by an unknown recipe (the message lists the known ones).
std::optional<kernels::Recipe> parse_recipe_kernel(std::string_view prefix, std::string_view kernel);
inline std::optional<kernels::Recipe> parse_builtin_kernel(std::string_view kernel) {
  return parse_recipe_kernel("builtin", kernel);
}

struct KernelSourceOptions {
  kernels::KernelOptions cpu;   // the CPU kernels' threads / path
  PluginClientOptions plugin;   // isolation of a plugin
};

struct KernelSource {
  std::unique_ptr<kut::KernelUnderTest> kernel;
  std::string title;      // the report header's first line, before ": N output tensors"
  nlohmann::json source;  // the JSON report's candidate_source (the run's notes and failures are added)
};

// Throws InputError (unusable input, one line starting "--kernel NAME: ") for an unknown recipe,
// a CUDA kernel without a device (or in a build without CUDA), a plugin that does not load.
KernelSource open_kernel_source(std::string_view name, const KernelSourceOptions& options = {});

}  // namespace ropecheck::plugin
