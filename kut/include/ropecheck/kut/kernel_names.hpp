// The kernel-name grammar's prefixes, spelled once: the factory (plugin/kernel_name.hpp) parses and
// prints names with them, and the built-in CPU and CUDA kernels name themselves with them (below the
// factory: the built-in kernels library exported through the ABI reports its names without it).
#pragma once

#include <string>
#include <string_view>

#include "ropecheck/kernels/recipe.hpp"

namespace ropecheck::kut {

inline constexpr std::string_view kBuiltinPrefix = "builtin:";  // ropecheck's fast CPU kernel of a recipe
inline constexpr std::string_view kCudaPrefix = "cuda:";        // its CUDA kernel
inline constexpr std::string_view kPluginPrefix = "plugin:";    // a kernel library (optional before LIB.so)

// "builtin:hf", "cuda:hf": a recipe's kernel by its canonical name.
inline std::string builtin_kernel_name(kernels::Recipe r) { return std::string(kBuiltinPrefix).append(kernels::to_string(r)); }
inline std::string cuda_kernel_name(kernels::Recipe r) { return std::string(kCudaPrefix).append(kernels::to_string(r)); }

}  // namespace ropecheck::kut
