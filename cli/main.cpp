// ropecheck: thin command-line front end over the library modules.
#include <cstdio>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/core.h>

#include "commands.hpp"
#include "ropecheck/io/tensor.hpp"
#include "ropecheck/core/one_line.hpp"
#include "ropecheck/core/spec.hpp"

#ifndef ROPECHECK_VERSION
#define ROPECHECK_VERSION "unknown"
#endif

namespace {

int usage_error(std::string_view what) {
  std::fflush(stdout);
  fmt::print(stderr, "ropecheck: error: {}\n", ropecheck::one_line(what));
  return 2;
}

}  // namespace

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
      ropecheck::cli::add_merge_command(app),
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
    return usage_error(e.what());
  }
  try {
    for (const auto& c : commands)
      if (c.app->parsed()) {
        const int rc = c.run();
        std::fflush(stdout);
        for (const std::string& n : ropecheck::cli::deferred_notes()) fmt::print(stderr, "ropecheck: note: {}\n", n);
        return rc;
      }
  } catch (const std::bad_alloc&) {
    // A size no estimate caught (golden estimates first: --max-memory): still one line, exit 2.
    return usage_error("out of memory: the request needs more memory than this process can get");
  } catch (const std::exception& e) {  // InputError, SpecError and the rest: unusable input
    return usage_error(e.what());
  }
  return 2;
}
