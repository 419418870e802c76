// Subcommands of the `ropecheck` executable. Each registers itself on the app and returns
// the function that runs it (exit code: 0 ok, 1 check failed, 2 unusable input).
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace ropecheck::cli {

using Runner = std::function<int()>;

struct Command {
  CLI::App* app;  // the subcommand
  Runner run;     // called when it was given
};

Command add_presets_command(CLI::App& app);
Command add_spec_command(CLI::App& app);
Command add_golden_command(CLI::App& app);
Command add_check_command(CLI::App& app);
Command add_props_command(CLI::App& app);
Command add_drift_command(CLI::App& app);  // drift_command.cpp

}  // namespace ropecheck::cli
