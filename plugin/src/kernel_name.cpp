#include "ropecheck/plugin/kernel_name.hpp"

#include <filesystem>
#include <stdexcept>
#include <system_error>

#include <fmt/format.h>

#include "ropecheck/core/input_error.hpp"
#include "ropecheck/core/one_line.hpp"
#include "ropecheck/kut/builtin_sources.hpp"
#include "ropecheck/kut/cuda_source.hpp"
#include "ropecheck/kut/kernel_names.hpp"
#include "ropecheck/plugin/plugin_kernel.hpp"

namespace ropecheck::plugin {
namespace {

namespace k = ropecheck::kernels;

std::string known_recipes() {
  std::string known;
  for (const k::RecipeInfo& r : k::recipes()) known += (known.empty() ? "" : ", ") + std::string(r.name);
  return known;
}

k::Recipe recipe_of(std::string_view recipe, std::string_view kind, std::string_view given, std::string_view option) {
  if (const std::optional<k::Recipe> r = k::parse_recipe(recipe)) return *r;
  throw InputError(std::string(option) + " " + sanitize(given) + ": unknown " + std::string(kind) + " recipe " +
                   quote_name(recipe) + " (known: " + known_recipes() + ")");
}

// "kernel:hf-bf16out" -> the recipe and the output dtype of props' old target names.
std::pair<std::string_view, std::optional<DType>> storage_suffix(std::string_view recipe) {
  for (const auto& [suffix, dt] : {std::pair{"-bf16out", DType::bf16}, std::pair{"-f16out", DType::f16},
                                   std::pair{"-f64out", DType::f64}})
    if (recipe.ends_with(suffix)) return {recipe.substr(0, recipe.size() - std::string_view(suffix).size()), dt};
  return {recipe, DType::f32};
}

}  // namespace

std::string KernelName::canonical() const {
  switch (kind) {
    case Kind::builtin: return kut::builtin_kernel_name(recipe);
    case Kind::cuda: return kut::cuda_kernel_name(recipe);
    case Kind::plugin: return std::string(kut::kPluginPrefix) + library;
  }
  return {};
}

KernelName parse_kernel_name(std::string_view name, std::string_view option) {
  KernelName n;
  n.given = std::string(name);
  const auto after = [&](std::string_view prefix) { return name.substr(prefix.size()); };
  const auto note = [&](const KernelName& k) {
    return fmt::format("'{}' is spelled '{}' now{} (the old spelling goes away in the next release)", name, k.canonical(),
                       k.storage && *k.storage != DType::f32 ? " with --dtype " + std::string(to_string(*k.storage)) : "");
  };
  // Spellings of the previous release, accepted with a deprecation note: builtin-cuda:R, kernel:R[-DTout], R.
  constexpr std::string_view kOldCuda = "builtin-cuda:", kOldProps = "kernel:";
  if (name.starts_with(kut::kBuiltinPrefix)) {
    n.recipe = recipe_of(after(kut::kBuiltinPrefix), "built-in", name, option);
  } else if (name.starts_with(kut::kCudaPrefix) || name.starts_with(kOldCuda)) {
    n.kind = KernelName::Kind::cuda;
    const bool old = name.starts_with(kOldCuda);
    n.recipe = recipe_of(after(old ? kOldCuda : kut::kCudaPrefix), "CUDA", name, option);
    if (old) n.deprecation = note(n);
  } else if (name.starts_with(kOldProps)) {
    const auto [recipe, dtype] = storage_suffix(after(kOldProps));
    n.recipe = recipe_of(recipe, "built-in", name, option);
    n.storage = dtype;
    n.deprecation = note(n);
  } else if (name.starts_with(kut::kPluginPrefix)) {
    n.kind = KernelName::Kind::plugin;
    n.library = std::string(after(kut::kPluginPrefix));
    if (n.library.empty()) throw InputError(std::string(option) + " plugin: needs a library path (plugin:LIB.so)");
  } else if (std::error_code ec; k::parse_recipe(name) && !std::filesystem::exists(std::string(name), ec)) {
    n.recipe = *k::parse_recipe(name);
    n.deprecation = note(n);
  } else {
    n.kind = KernelName::Kind::plugin;
    n.library = std::string(name);
    if (n.library.empty()) throw InputError(std::string(option) + ": empty kernel name");
    // A bare word is a mistyped recipe far more often than a library in the working folder without a suffix.
    if (std::error_code ec2; name.find_first_of("/.:") == std::string_view::npos && !std::filesystem::exists(n.library, ec2))
      throw InputError(std::string(option) + " " + sanitize(name) + ": neither a recipe (" + known_recipes() +
                       ") nor a kernel library (builtin:RECIPE, cuda:RECIPE, plugin:LIB.so)");
  }
  return n;
}

KernelName builtin_kernel(k::Recipe recipe) {
  KernelName n;
  n.recipe = recipe;
  n.given = n.canonical();
  return n;
}

KernelName plugin_kernel(std::string library) {
  KernelName n;
  n.kind = KernelName::Kind::plugin;
  n.library = std::move(library);
  n.given = n.canonical();
  return n;
}

OpenedKernel open_kernel(const KernelName& name, const OpenOptions& options, std::string_view option) {
  OpenedKernel s;
  s.label = name.canonical();
  const std::string recipe(k::to_string(name.recipe));
  if (name.kind == KernelName::Kind::builtin) {
    s.kernel = kut::make_cpu_kernel(name.recipe, options.cpu);
    s.title = fmt::format("kernel '{}': ropecheck's fast CPU kernel, recipe {}", s.kernel->info().name,
                          k::recipe_info(name.recipe).description);
    s.source = {{"kind", "builtin"}, {"name", name.canonical()}, {"recipe", recipe}, {"cpu_path", std::string(k::cpu_path())}};
    return s;
  }
  if (name.kind == KernelName::Kind::cuda) {
    try {
      s.kernel = kut::make_cuda_kernel(name.recipe);
    } catch (const std::runtime_error& e) {
      throw InputError(std::string(option) + " " + sanitize(name.given) + ": " + e.what());
    }
    // The kernel is named "cuda:RECIPE (WHERE)": the device's name and compute capability, or "host emulation".
    const std::string& n = s.kernel->info().name;
    const std::size_t open = n.find(" (");
    const std::string device = open == std::string::npos ? n : n.substr(open + 2, n.size() - open - 3);
    s.title = fmt::format("kernel '{}': {}", n, s.kernel->info().description);
    s.source = {{"kind", "cuda"},       {"name", name.canonical()}, {"recipe", recipe},
                {"device", device},     {"emulated", kut::cuda_emulation_requested()}};
    return s;
  }
  std::unique_ptr<PluginKernel> p = load_plugin_kernel(name.library, options.plugin);
  const KernelPlugin& plugin = p->plugin();
  s.title = fmt::format("kernel '{}' ({}), kernel ABI version {}", plugin.name(), name.library, plugin.abi_version());
  s.label = std::string(kut::kPluginPrefix) + plugin.name();
  s.source = {{"kind", "kernel"},
              {"path", name.library},
              {"name", plugin.name()},
              {"abi_version", plugin.abi_version()},
              {"isolated", plugin.isolated()},
              {"capabilities", plugin.capabilities()},
              {"failures", nlohmann::json::array()}};
  s.kernel = std::move(p);
  return s;
}

}  // namespace ropecheck::plugin
