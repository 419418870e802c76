// A Hugging Face config.json as golden sets and reports record it: by file name and SHA-256 (in the
// spec's source), never by the path as typed, so that the same config reached by a relative or an
// absolute path gives the same bytes and no local path leaks. The CLI's --hf-config and the Python
// package's Spec.from_hf_config(path) both load it here. The import is core's (spec_json.hpp); here,
// the lowest module with SHA-256, the file's hash is added to what it records.
#pragma once

#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "ropecheck/core/spec.hpp"
#include "ropecheck/core/spec_json.hpp"
#include "ropecheck/io/sha256.hpp"

namespace ropecheck::io {

inline EncodingSpec load_recorded_hf_config(const std::filesystem::path& path, HfImportOptions options,
                                            std::vector<std::string>* ignored) {
  options.name = path.filename().string();
  EncodingSpec spec = load_hf_config_file(path, options, ignored);
  try {
    spec.source += ", file " + options.name + " with sha256 " + sha256_file(path);
  } catch (const std::exception& e) {
    throw SpecError(e.what());
  }
  return spec;
}

}  // namespace ropecheck::io
