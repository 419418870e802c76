// Model presets: JSON files in reference/presets/, embedded in the library at build time.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ropecheck/core/spec.hpp"

namespace ropecheck {

// Sorted preset names.
std::vector<std::string> preset_names();
// Parsed and validated; throws SpecError for an unknown name (listing the known ones).
EncodingSpec load_preset(std::string_view name);
// The preset's JSON text as shipped.
std::string_view preset_json_text(std::string_view name);

namespace detail {
const std::vector<std::pair<std::string_view, std::string_view>>& embedded_presets();
}

}  // namespace ropecheck
