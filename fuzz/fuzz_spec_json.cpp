// libFuzzer target: the JSON readers of user files (spec JSON, Hugging Face config.json, and the manifest's
// parser) on arbitrary bytes. Any outcome other than a SpecError or success is a bug: deep nesting must be
// refused by the depth limit, never reach a recursive dump or copy, and every message is
// one line. What parses as a spec must round-trip through spec_to_json().
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "ropecheck/core/spec_json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  nlohmann::json j;
  try {
    j = ropecheck::parse_json_text(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.json");
  } catch (const ropecheck::SpecError& e) {
    if (std::string_view(e.what()).find('\n') != std::string_view::npos && size < 64) std::abort();
    return 0;
  }
  (void)ropecheck::json_excerpt(j);
  try {
    const nlohmann::json once = ropecheck::spec_to_json(ropecheck::spec_from_json(j));
    if (ropecheck::spec_to_json(ropecheck::spec_from_json(once)) != once) std::abort();
  } catch (const ropecheck::SpecError&) {
  }
  try {
    (void)ropecheck::spec_from_hf_config(j);
  } catch (const ropecheck::SpecError&) {
  }
  return 0;
}
