#include "props_targets.hpp"

#include <stdexcept>
#include <string>

#include "ropecheck/plugin/plugin_kernel.hpp"
#include "ropecheck/kut/cuda_source.hpp"
#include "ropecheck/props/kernel_targets.hpp"
#include "ropecheck/props/kut_target.hpp"
#include "ropecheck/props/registry.hpp"

namespace ropecheck::cli {

std::unique_ptr<props::Target> make_plugin_target(const std::filesystem::path& library, accuracy::AccuracyClass accuracy,
                                                  DType dtype, const plugin::PluginClientOptions& options) {
  std::shared_ptr<plugin::PluginKernel> kernel = plugin::load_plugin_kernel(library, options);
  props::TargetInfo info;
  info.name = "plugin:" + kernel->plugin().name();
  info.description = "kernel plugin " + library.string();
  info.accuracy = accuracy;
  info.dtype = dtype;
  return props::make_kut_target(std::move(kernel), std::move(info), true);
}

void register_cuda_targets() {
  namespace k = ropecheck::kernels;
  for (const k::RecipeInfo& r : k::recipes())
    for (DType t : {DType::f32, DType::bf16}) {
      const k::Recipe rec = r.recipe;
      const std::string name = "cuda:" + std::string(r.name) + props::storage_suffix(t);
      const accuracy::AccuracyClass cls = props::kernel_claimed_class(rec, t);
      props::register_target(
          name,
          [rec, t, name, cls] {
            std::shared_ptr<kut::KernelUnderTest> kernel;
            try {
              kernel = kut::make_cuda_kernel(rec);
            } catch (const std::runtime_error& e) {
              throw std::runtime_error("--target " + name + ": " + e.what());
            }
            props::TargetInfo info;
            info.name = name;
            info.description = kernel->info().description + ", output " + std::string(to_string(t)) + " (class " +
                               std::string(accuracy::to_string(cls)) + ")";
            info.accuracy = cls;
            info.dtype = t;
            return props::make_kut_target(std::move(kernel), std::move(info));
          },
          "CUDA kernel (needs a GPU), recipe " + std::string(r.name) + ", output " + std::string(to_string(t)) + " (class " +
              std::string(accuracy::to_string(cls)) + ")" + (r.known_bad ? ", known bad" : "") + ": " +
              std::string(r.description));
    }
}

}  // namespace ropecheck::cli
