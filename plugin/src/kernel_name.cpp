#include "ropecheck/plugin/kernel_name.hpp"

#include <stdexcept>

#include <fmt/format.h>

#include "ropecheck/plugin/plugin_kernel.hpp"
#include "ropecheck/io/tensor.hpp"
#include "ropecheck/kut/builtin_sources.hpp"
#include "ropecheck/kut/cuda_source.hpp"

namespace ropecheck::plugin {

namespace k = ropecheck::kernels;

std::optional<k::Recipe> parse_recipe_kernel(std::string_view prefix, std::string_view kernel) {
  if (!kernel.starts_with(prefix) || kernel.substr(prefix.size(), 1) != ":") return std::nullopt;
  const std::string_view name = kernel.substr(prefix.size() + 1);
  if (const std::optional<k::Recipe> r = k::parse_recipe(name)) return r;
  std::string known;
  for (const k::RecipeInfo& r : k::recipes()) known += (known.empty() ? "" : ", ") + std::string(r.name);
  throw InputError("--kernel " + std::string(kernel) + ": unknown " + (prefix == "builtin" ? "built-in" : std::string(prefix)) +
                    " recipe '" + std::string(name) + "' (known: " + known + ")");
}

KernelSource open_kernel_source(std::string_view name, const KernelSourceOptions& options) {
  KernelSource s;
  if (const std::optional<k::Recipe> r = parse_builtin_kernel(name)) {
    s.kernel = kut::make_cpu_kernel(*r, options.cpu);
    s.title = fmt::format("kernel '{}': ropecheck's fast CPU kernel, recipe {}", s.kernel->info().name,
                          k::recipe_info(*r).description);
    s.source = {{"kind", "builtin"},
                {"name", "builtin:" + std::string(k::to_string(*r))},
                {"recipe", std::string(k::to_string(*r))},
                {"cpu_path", std::string(k::cpu_path())}};
    return s;
  }
  if (const std::optional<k::Recipe> r = parse_recipe_kernel("builtin-cuda", name)) {
    try {
      s.kernel = kut::make_cuda_kernel(*r);
    } catch (const std::runtime_error& e) {
      throw InputError("--kernel " + std::string(name) + ": " + e.what());
    }
    const bool emulated = kut::cuda_emulation_requested();
    // The kernel is named "cuda:RECIPE (WHERE)": the device's name and compute capability, or "host emulation".
    const std::string& n = s.kernel->info().name;
    const std::size_t open = n.find(" (");
    const std::string device = open == std::string::npos ? n : n.substr(open + 2, n.size() - open - 3);
    s.title = fmt::format("kernel '{}': {}", s.kernel->info().name, s.kernel->info().description);
    s.source = {{"kind", "cuda"},
                {"name", "builtin-cuda:" + std::string(k::to_string(*r))},
                {"recipe", std::string(k::to_string(*r))},
                {"device", device},
                {"emulated", emulated}};
    return s;
  }
  std::unique_ptr<PluginKernel> p = load_plugin_kernel(std::string(name), options.plugin);
  const KernelPlugin& plugin = p->plugin();
  s.title = fmt::format("kernel '{}' ({}), kernel ABI version {}", plugin.name(), name, plugin.abi_version());
  s.source = {{"kind", "kernel"},
              {"path", std::string(name)},
              {"name", plugin.name()},
              {"abi_version", plugin.abi_version()},
              {"isolated", plugin.isolated()},
              {"capabilities", plugin.capabilities()},
              {"failures", nlohmann::json::array()}};
  s.kernel = std::move(p);
  return s;
}

}  // namespace ropecheck::plugin
