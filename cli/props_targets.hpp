// A kernel by name (plugin/kernel_name.hpp) as a property-suite target: where props and the kernel factory
// meet, so that props itself links neither plugins nor the CUDA runtime (`ropecheck props --kernel NAME`).
#pragma once

#include <memory>
#include <optional>

#include "ropecheck/accuracy/error_model.hpp"
#include "ropecheck/plugin/kernel_name.hpp"
#include "ropecheck/props/target.hpp"

namespace ropecheck::cli {

// The kernel as a target offering every output dtype (with_output; a dtype the kernel does not implement
// is answered unsupported), first in `dtype`. Its class: `claimed` (--class) in every dtype, else for
// ropecheck's own kernels the class of their recipe in each dtype (props::kernel_claimed_class), for a
// plugin fp32-angle. Named "builtin:RECIPE" / "cuda:RECIPE", or "plugin:" and the name the plugin reports.
// InputError as plugin::open_kernel.
std::unique_ptr<props::Target> kernel_target(const plugin::KernelName& name, std::optional<accuracy::AccuracyClass> claimed,
                                             DType dtype, const plugin::PluginClientOptions& isolation);

}  // namespace ropecheck::cli
