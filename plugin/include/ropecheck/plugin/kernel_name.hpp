// Kernels under test by name: the one grammar `check --kernel`, `props --kernel`, `drift --recipes` /
// `--compare` and the Python package read, parsed here and nowhere else.
//
//   builtin:RECIPE            ropecheck's fast CPU kernel of that precision recipe (kut/builtin_sources.hpp)
//   cuda:RECIPE               ropecheck's CUDA kernel of that recipe (kut/cuda_source.hpp); without a GPU
//                             only under the test-only switch ROPECHECK_CUDA_EMULATION=1 (host emulation)
//   plugin:LIB.so[:OPTIONS]   a kernel plugin (plugin_kernel.hpp, abi/KERNEL_ABI.md); OPTIONS go to its
//   LIB.so[:OPTIONS]          ropecheck_kernel_configure. Anything that is not one of the forms above
//                             is a library path.
//
// Old spellings still work for one release, with a one-line note (KernelName::deprecation):
// `builtin-cuda:R` (cuda:R), `kernel:R` and `kernel:R-bf16out` / `-f16out` / `-f64out` (props' old
// target names: builtin:R with that output dtype), and a bare recipe name `R` (drift's: builtin:R).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "ropecheck/core/dtype.hpp"
#include "ropecheck/kernels/recipe.hpp"
#include "ropecheck/kernels/rope_kernels.hpp"
#include "ropecheck/kut/kernel_under_test.hpp"
#include "ropecheck/plugin/client.hpp"

namespace ropecheck::plugin {

struct KernelName {
  enum class Kind { builtin, cuda, plugin };
  Kind kind = Kind::builtin;
  kernels::Recipe recipe{};  // builtin, cuda
  std::string library;       // plugin: the library's path (with its OPTIONS: load_kernel_plugin splits them)
  std::string given;         // as written
  // An old spelling's output dtype (kernel:R-bf16out), for props; nullopt otherwise.
  std::optional<DType> storage;
  // One line for stderr when `given` is an old spelling ("... is builtin:hf now"), else empty.
  std::string deprecation;

  // The canonical spelling: "builtin:hf", "cuda:hf", "plugin:LIB.so[:OPTIONS]".
  std::string canonical() const;
  bool is_recipe() const { return kind != Kind::plugin; }  // builtin or cuda
};

// Parses `name`; InputError "OPTION NAME: ..." for an unknown recipe after builtin: / cuda:, or an empty
// library after plugin:. A bare recipe name is read as builtin:RECIPE unless a file of that name exists.
KernelName parse_kernel_name(std::string_view name, std::string_view option = "--kernel");

// The names of a recipe's CPU kernel (builtin:RECIPE) and of a plugin library (plugin:LIB.so), made
// without spelling a prefix: what a caller that already has the recipe or the path uses.
KernelName builtin_kernel(kernels::Recipe recipe);
KernelName plugin_kernel(std::string library);

struct OpenOptions {
  kernels::KernelOptions cpu;  // the CPU kernels' threads / path
  PluginClientOptions plugin;  // a plugin's isolation
};

struct OpenedKernel {
  std::unique_ptr<kut::KernelUnderTest> kernel;
  std::string title;      // the check report's first line, before ": N output tensors"
  std::string label;      // short, for tables: the canonical name, or "plugin:" and the name the plugin reports
  nlohmann::json source;  // the JSON report's candidate_source
};

// The kernel a name stands for. InputError (unusable input, one line starting "OPTION NAME: ") for a
// CUDA kernel without a device (or in a build without CUDA) and a plugin that does not load.
OpenedKernel open_kernel(const KernelName& name, const OpenOptions& options = {}, std::string_view option = "--kernel");

}  // namespace ropecheck::plugin
