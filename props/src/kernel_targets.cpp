// The fast CPU kernels as property-suite targets (kernel_targets.hpp): the CPU source of kernels under
// test (kut/builtin_sources.hpp) behind the one generic target (kut_target.hpp).
#include "ropecheck/props/kernel_targets.hpp"

#include <string>

#include "ropecheck/kernels/rope_kernels.hpp"
#include "ropecheck/kut/builtin_sources.hpp"
#include "ropecheck/props/kut_target.hpp"
#include "ropecheck/props/registry.hpp"
#include "ropecheck/core/spec.hpp"

namespace ropecheck::props {
using namespace ropecheck::accuracy;  // the error model is this module's vocabulary
namespace k = ropecheck::kernels;

std::string storage_suffix(DType t) {
  switch (t) {
    case DType::f16: return "-f16out";
    case DType::bf16: return "-bf16out";
    case DType::f64: return "-f64out";
    default: return "";
  }
}

AccuracyClass kernel_claimed_class(k::Recipe recipe, DType storage) {
  switch (recipe) {
    case k::Recipe::accurate: return storage == DType::f32 ? AccuracyClass::f32_reduced : AccuracyClass::fp64_angle;
    case k::Recipe::meta:
    case k::Recipe::ggml: return AccuracyClass::fp32_angle;
    case k::Recipe::bf16_table: return AccuracyClass::bf16_table;
    case k::Recipe::f16_table: return AccuracyClass::f16_table;
    default:  // hf and the known-bad recipes built on it: hf rounds its tables and rotation to the storage dtype
      return storage == DType::bf16 ? AccuracyClass::bf16_table
                                    : (storage == DType::f16 ? AccuracyClass::f16_table : AccuracyClass::fp32_angle);
  }
}

std::unique_ptr<Target> make_kernel_target(k::Recipe recipe, DType storage, bool portable) {
  TargetInfo info;
  info.name = "kernel:" + std::string(k::to_string(recipe)) + storage_suffix(storage);
  info.description = "fast CPU kernel (" + std::string(portable ? "portable path" : "default path") + "), recipe " +
                     std::string(k::to_string(recipe)) + ", output " + std::string(to_string(storage)) + " (class " +
                     std::string(to_string(kernel_claimed_class(recipe, storage))) + ")" +
                     (k::recipe_info(recipe).known_bad ? ", KNOWN BAD" : "");
  info.accuracy = kernel_claimed_class(recipe, storage);
  info.dtype = storage;
  k::KernelOptions opts;
  opts.threads = 1;
  opts.portable = portable;
  return make_kut_target(kut::make_cpu_kernel(recipe, opts), std::move(info));
}

void register_kernel_targets() {
  for (const k::RecipeInfo& r : k::recipes())
    for (DType t : {DType::f32, DType::bf16}) {
      const k::Recipe rec = r.recipe;
      register_target(
          "kernel:" + std::string(r.name) + storage_suffix(t), [rec, t] { return make_kernel_target(rec, t); },
          "fast CPU kernel, recipe " + std::string(r.name) + ", output " + std::string(to_string(t)) + " (class " +
              std::string(to_string(kernel_claimed_class(rec, t))) + ")" + (r.known_bad ? ", known bad" : "") + ": " +
              std::string(r.description));
    }
}

}  // namespace ropecheck::props
