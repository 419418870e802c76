// `ropecheck presets`: one line per embedded model preset.
#include <fmt/core.h>

#include "commands.hpp"
#include <nlohmann/json.hpp>

#include "ropecheck/reference/presets.hpp"

namespace ropecheck::cli {

Command add_presets_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("presets", "list the embedded model presets");
  auto json_out = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json_out, "print the list as JSON");
  return {cmd, [json_out] {
    if (*json_out) {
      nlohmann::json all = nlohmann::json::array();
      for (const std::string& name : preset_names()) all.push_back(nlohmann::json::parse(preset_json_text(name)));
      fmt::print("{}\n", all.dump(2));
      return 0;
    }
    fmt::print("{:<22} {:<10} {:>8} {:>10} {:>10} {:<12} {}\n", "name", "family", "head_dim", "rotary_dim", "base",
               "scaling", "layout");
    for (const std::string& name : preset_names()) {
      const EncodingSpec s = load_preset(name);
      if (s.family == Family::rope) {
        const RopeSpec& r = s.rope;
        std::string layout(to_string(r.layout));
        if (r.mrope != MropeMode::none) layout += fmt::format(" + mrope {}", to_string(r.mrope));
        if (r.rotary_offset != 0) layout += fmt::format(" + slice at {}", r.rotary_offset);
        if (r.key_layout != KeyLayout::per_head) layout += fmt::format(" + {} key", to_string(r.key_layout));
        fmt::print("{:<22} {:<10} {:>8} {:>10} {:>10g} {:<12} {}\n", name, "rope", r.head_dim, r.rotary_dim, r.base,
                   to_string(r.scaling.type), layout);
      } else {
        const SinusoidalSpec& q = s.sinusoidal;
        fmt::print("{:<22} {:<10} {:>8} {:>10} {:>10g} {:<12} {} ({})\n", name, "sinusoidal", q.d_model, "-", q.base,
                   "-", to_string(q.layout), to_string(q.frequencies));
      }
    }
    return 0;
  }};
}

}  // namespace ropecheck::cli
