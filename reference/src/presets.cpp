#include "ropecheck/reference/presets.hpp"

#include <algorithm>

#include "ropecheck/core/spec_json.hpp"

namespace ropecheck {

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const auto& [name, text] : detail::embedded_presets()) names.emplace_back(name);
  // The files are embedded in file-name order, where "deepseek-v3-mla.json" sorts before "deepseek-v3.json".
  std::sort(names.begin(), names.end());
  return names;
}

std::string_view preset_json_text(std::string_view name) {
  for (const auto& [n, text] : detail::embedded_presets())
    if (n == name) return text;
  std::string known;
  for (const auto& [n, text] : detail::embedded_presets()) known += (known.empty() ? "" : ", ") + std::string(n);
  throw SpecError("unknown preset '" + std::string(name) + "' (known: " + known + ")");
}

EncodingSpec load_preset(std::string_view name) {
  const std::string_view text = preset_json_text(name);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw SpecError("preset '" + std::string(name) + "' is malformed JSON: " + e.what());
  }
  EncodingSpec spec = spec_from_json(j);
  if (spec.name != name)
    throw SpecError("preset '" + std::string(name) + "': 'name' is \"" + spec.name + "\", expected the file name");
  return spec;
}

}  // namespace ropecheck
