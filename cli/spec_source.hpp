// The spec-selecting options every command shares: --preset | --hf-config | --spec.
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "ropecheck/core/spec.hpp"

namespace ropecheck::cli {

struct SpecSource {
  std::string preset;
  std::string hf_config;
  std::string spec_file;
  std::string layout;      // override for --hf-config
  std::string layer_type = "full_attention";

  void add_options(CLI::App& app);
  // Exactly one source must be given; throws SpecError otherwise.
  EncodingSpec load() const;
};

}  // namespace ropecheck::cli
