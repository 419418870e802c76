// The built-in CPU source of kernels under test (kernel_under_test.hpp): ropecheck's own fast CPU
// kernels (kernels/rope_kernels.hpp), one kernel per precision recipe (kernels/recipe.hpp). The other
// two sources: the CUDA kernels (kut/cuda_source.hpp) and C-ABI plugins (golden/plugin_kernel.hpp).
#pragma once

#include <memory>
#include <string>

#include "ropecheck/kernels/recipe.hpp"
#include "ropecheck/kernels/rope_kernels.hpp"
#include "ropecheck/kut/kernel_under_test.hpp"

namespace ropecheck::kut {

// The built-in recipe a kernel computes (KernelUnderTest::recipe_rows): drift samples its angle and
// f32 trig rows through kernels::recipe_angle_row / recipe_cos_sin_row, the recipe's shared row code.
struct RecipeRows {
  kernels::Recipe recipe;
};

// The fast CPU kernel of `recipe`: every entry point, every output dtype, negative positions. Named
// "builtin:RECIPE (avx512)" / "(portable)". A spec the kernels cannot run is answered unsupported
// with the kernels' message.
std::unique_ptr<KernelUnderTest> make_cpu_kernel(kernels::Recipe recipe, const kernels::KernelOptions& options = {});
std::string cpu_kernel_name(kernels::Recipe recipe, const kernels::KernelOptions& options = {});

}  // namespace ropecheck::kut
