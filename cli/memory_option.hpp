// --max-memory, for every command that estimates its size before allocating (golden, spec, drift, merge:
// io/memory_budget.hpp): the limit a run's estimate is held to, instead of the machine's memory; check
// sizes its blocks of tokens to it (its own option text: a default of 1 GiB).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "ropecheck/core/spec.hpp"
#include "ropecheck/io/memory_budget.hpp"

namespace ropecheck::cli {

inline void add_max_memory_option(CLI::App& cmd, std::string& text) {
  cmd.add_option("--max-memory", text,
                 "refuse runs estimated to need more memory than this (bytes, or 512M, 64G; default: the machine's)");
}

// The limit in bytes; 0 (the machine's memory) when the option was not given.
inline std::uint64_t max_memory_bytes(const std::string& text) {
  if (text.empty()) return 0;
  const std::optional<std::uint64_t> m = io::parse_byte_size(text);
  if (!m) throw SpecError("--max-memory: '" + text + "' is not a size (bytes, or 512M, 64G, 1T)");
  return *m;
}

}  // namespace ropecheck::cli
