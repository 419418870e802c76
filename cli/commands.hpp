// Subcommands of the `ropecheck` executable. Each registers itself on the app and returns
// the function that runs it (exit code: 0 ok, 1 check failed, 2 unusable input).
#pragma once

#include <functional>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "ropecheck/plugin/client.hpp"

namespace ropecheck::cli {

using Runner = std::function<int()>;

struct Command {
  CLI::App* app;  // the subcommand
  Runner run;     // called when it was given
};

// --kernel-timeout and --in-process, for every command that runs kernel plugins (check, props,
// drift): how the plugin client (golden/plugin_client.hpp) runs them.
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
Command add_drift_command(CLI::App& app);  // drift_command.cpp
Command add_merge_command(CLI::App& app);

}  // namespace ropecheck::cli
