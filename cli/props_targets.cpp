#include "props_targets.hpp"

#include <string>

#include "ropecheck/plugin/plugin_kernel.hpp"
#include "ropecheck/props/kut_target.hpp"

namespace ropecheck::cli {

std::unique_ptr<props::Target> kernel_target(const plugin::KernelName& name, std::optional<accuracy::AccuracyClass> claimed,
                                             DType dtype, const plugin::PluginClientOptions& isolation) {
  plugin::OpenOptions ko;
  ko.cpu.threads = 1;  // the suite's calls are small: one thread, no pool to start per call
  ko.plugin = isolation;
  plugin::OpenedKernel k = plugin::open_kernel(name, ko);
  props::TargetInfo info;
  info.name = name.canonical();
  info.description = k.title;
  if (name.kind == plugin::KernelName::Kind::plugin) {
    info.name = k.label;
    info.description = "kernel plugin " + name.library;
  }
  info.dtype = dtype;
  info.accuracy = claimed.value_or(accuracy::AccuracyClass::fp32_angle);
  props::ClassClaim claim;
  if (!claimed && name.is_recipe()) claim = [r = name.recipe](DType d) { return props::kernel_claimed_class(r, d); };
  return props::make_kut_target(std::move(k.kernel), std::move(info), true, std::move(claim));
}

}  // namespace ropecheck::cli
