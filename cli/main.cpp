// ropecheck: thin command-line front end over the library modules.
#include <cstdio>
#include <vector>

#include <fmt/core.h>

#include "commands.hpp"
#include "ropecheck/golden/tensor.hpp"
#include "ropecheck/core/spec.hpp"

#ifndef ROPECHECK_VERSION
#define ROPECHECK_VERSION "unknown"
#endif

int main(int argc, char** argv) {
  CLI::App app{"ropecheck: exact references and property tests for RoPE and sinusoidal position encodings"};
  app.set_version_flag("--version", std::string("ropecheck ") + ROPECHECK_VERSION);
  app.require_subcommand(1);
  const std::vector<ropecheck::cli::Command> commands = {
      ropecheck::cli::add_presets_command(app),
      ropecheck::cli::add_spec_command(app),
      ropecheck::cli::add_golden_command(app),
      ropecheck::cli::add_check_command(app),
      ropecheck::cli::add_props_command(app),
      ropecheck::cli::add_drift_command(app),
  };

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // Usage errors are unusable input: one line, exit 2.
    fmt::print(stderr, "ropecheck: error: {}\n", e.what());
    return 2;
  }
  try {
    for (const auto& c : commands)
      if (c.app->parsed()) return c.run();
  } catch (const ropecheck::golden::TensorError& e) {
    fmt::print(stderr, "ropecheck: error: {}\n", e.what());
    return 2;
  } catch (const ropecheck::SpecError& e) {
    fmt::print(stderr, "ropecheck: error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "ropecheck: error: {}\n", e.what());
    return 2;
  }
  return 2;
}
