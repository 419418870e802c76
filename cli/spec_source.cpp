#include "spec_source.hpp"

#include <filesystem>
#include <iostream>
#include <vector>

#include "ropecheck/io/hf_config_file.hpp"
#include "ropecheck/reference/presets.hpp"
#include "ropecheck/core/spec_json.hpp"

namespace ropecheck::cli {
namespace {

// A key name from the config may hold control characters: keep the warning on one line.
std::string one_line(const std::string& s) {
  std::string out;
  for (const char c : s) out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  return out;
}

}  // namespace

void SpecSource::add_options(CLI::App& app) {
  app.add_option("--preset", preset, "model preset name (see `ropecheck presets`)");
  app.add_option("--hf-config", hf_config, "Hugging Face config.json to import");
  app.add_option("--spec", spec_file, "spec JSON file (core/SPEC_FORMAT.md)");
  app.add_option("--layout", layout, "with --hf-config: override the inferred layout (half_split|interleaved)");
  app.add_option("--layer-type", layer_type,
                 "with --hf-config whose rope_parameters are nested by layer type: which one")
      ->capture_default_str();
  app.add_flag("--strict", strict,
               "with --hf-config: a RoPE key ropecheck does not understand or use is an error (exit 2), not a warning");
}

EncodingSpec SpecSource::load() const {
  const int given = !preset.empty() + !hf_config.empty() + !spec_file.empty();
  if (given != 1) throw SpecError("give exactly one of --preset, --hf-config, --spec");
  if (!layout.empty() && hf_config.empty()) throw SpecError("--layout only applies to --hf-config");
  if (!preset.empty()) return load_preset(preset);
  if (!spec_file.empty()) return load_spec_file(spec_file);
  HfImportOptions opt;
  opt.layer_type = layer_type;
  opt.strict = strict;
  if (layout == "half_split")
    opt.layout = RopeLayout::half_split;
  else if (layout == "interleaved")
    opt.layout = RopeLayout::interleaved;
  else if (!layout.empty())
    throw SpecError("--layout must be half_split or interleaved, got '" + layout + "'");
  std::vector<std::string> ignored;
  EncodingSpec spec = io::load_recorded_hf_config(hf_config, opt, &ignored);
  for (const std::string& w : ignored) std::cerr << "ropecheck: warning: --hf-config: " << one_line(w) << "\n";
  return spec;
}

}  // namespace ropecheck::cli
