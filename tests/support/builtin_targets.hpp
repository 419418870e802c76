// ropecheck's fast CPU kernels as property-suite targets in tests, made as `ropecheck props --kernel
// builtin:RECIPE` makes them (cli/props_targets.cpp): the kernel under test behind props' generic target,
// claiming the class the error model gives its recipe in each output dtype.
#pragma once

#include <memory>
#include <string>

#include "ropecheck/kernels/recipe.hpp"
#include "ropecheck/kernels/rope_kernels.hpp"
#include "ropecheck/kut/builtin_sources.hpp"
#include "ropecheck/props/kut_target.hpp"

namespace ropecheck::test {

// The kernel of `recipe` storing its outputs in `storage`, on one thread; `portable` forces the portable path.
inline std::unique_ptr<props::Target> builtin_target(kernels::Recipe recipe, DType storage = DType::f32,
                                                     bool portable = false) {
  kernels::KernelOptions o;
  o.threads = 1;
  o.portable = portable;
  std::shared_ptr<kut::KernelUnderTest> k = kut::make_cpu_kernel(recipe, o);
  props::TargetInfo info;
  info.name = "builtin:" + std::string(kernels::to_string(recipe));
  info.description = k->info().name + ": " + k->info().description;
  info.dtype = storage;
  return props::make_kut_target(std::move(k), std::move(info), false,
                                [recipe](DType d) { return props::kernel_claimed_class(recipe, d); });
}

}  // namespace ropecheck::test
