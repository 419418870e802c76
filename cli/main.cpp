// ropecheck: thin command-line front end over the library modules.
#include <cstdio>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/core.h>

#include "commands.hpp"
#include "ropecheck/golden/tensor.hpp"
#include "ropecheck/core/spec.hpp"

#ifndef ROPECHECK_VERSION
#define ROPECHECK_VERSION "unknown"
#endif

namespace {

// An exit-2 message is one line whatever it echoes: control characters (a newline or ESC inside a
// file name, tensor name or JSON value) and bytes that are not UTF-8 are written as escapes.
std::string one_line(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  const auto hex = [&](unsigned char c) { out += fmt::format("\\x{:02x}", c); };
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\n') { out += "\\n"; ++i; continue; }
    if (c == '\r') { out += "\\r"; ++i; continue; }
    if (c == '\t') { out += "\\t"; ++i; continue; }
    if (c < 0x20 || c == 0x7f) { hex(c); ++i; continue; }
    if (c < 0x80) { out += static_cast<char>(c); ++i; continue; }
    // A well-formed UTF-8 sequence is kept; anything else byte by byte as \xHH.
    const std::size_t n = c >= 0xf0 && c < 0xf5 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
    bool ok = n > 0 && i + n <= s.size();
    for (std::size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
    if (!ok) { hex(c); ++i; continue; }
    out.append(s.substr(i, n));
    i += n;
  }
  return out;
}

int usage_error(std::string_view what) {
  std::fflush(stdout);
  fmt::print(stderr, "ropecheck: error: {}\n", one_line(what));
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
      if (c.app->parsed()) return c.run();
  } catch (const std::bad_alloc&) {
    // A size no estimate caught (golden estimates first: --max-memory): still one line, exit 2.
    return usage_error("out of memory: the request needs more memory than this process can get");
  } catch (const std::exception& e) {  // TensorError, SpecError and the rest: unusable input
    return usage_error(e.what());
  }
  return 2;
}
