// Subcommands of the `ropecheck` executable. Each registers itself on the app and returns
// the function that runs it (exit code: 0 ok, 1 check failed, 2 unusable input).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "ropecheck/plugin/client.hpp"
#include "ropecheck/plugin/kernel_name.hpp"

namespace ropecheck::cli {

using Runner = std::function<int()>;

struct Command {
  CLI::App* app;  // the subcommand
  Runner run;     // called when it was given
};

// The kernel grammar as --help says it, the same for check, props and drift (plugin/kernel_name.hpp).
inline constexpr const char* kKernelGrammar =
    "builtin:RECIPE (ropecheck's fast CPU kernel), cuda:RECIPE (its CUDA kernel: needs a GPU; "
    "ROPECHECK_CUDA_EMULATION=1 runs the CUDA code on the host, for tests), or a kernel plugin "
    "[plugin:]LIB.so[:OPTIONS] (a shared library implementing ropecheck/kernel_abi.h, abi/KERNEL_ABI.md)";

// Notes for stderr that main() prints after the command ran (never before an exit-2 error, which stays
// the only line on stderr): old spellings of kernel names.
inline std::vector<std::string>& deferred_notes() {
  static std::vector<std::string> notes;
  return notes;
}

// A kernel name read from option `option`; an old spelling's note is deferred (deferred_notes).
inline plugin::KernelName kernel_name(std::string_view name, std::string_view option) {
  plugin::KernelName n = plugin::parse_kernel_name(name, option);
  if (!n.deprecation.empty()) deferred_notes().push_back(std::string(option) + " " + n.deprecation);
  return n;
}

// --kernel-timeout and --in-process, for every command that runs kernel plugins (check, props,
// drift): how the plugin client (plugin/client.hpp) runs them.
inline void add_kernel_isolation_options(CLI::App& cmd, plugin::PluginClientOptions& o) {
  cmd.add_option("--kernel-timeout", o.timeout_s,
                 fmt::format("seconds one kernel-plugin call may take before it counts as hung and the check fails "
                             "(default {:g})", plugin::kDefaultKernelTimeout))
      ->check(CLI::Range(0.001, 1e6));
  cmd.add_flag("--in-process", o.in_process,
               "load and call a kernel plugin inside ropecheck instead of an isolated host process (for gdb, valgrind, "
               "sanitizers; a crash or hang of the kernel is then ropecheck's)");
}

Command add_presets_command(CLI::App& app);
Command add_spec_command(CLI::App& app);
Command add_golden_command(CLI::App& app);
Command add_check_command(CLI::App& app);
Command add_props_command(CLI::App& app);
Command add_drift_command(CLI::App& app);
Command add_merge_command(CLI::App& app);

}  // namespace ropecheck::cli
