// `ropecheck drift` from Python, and the names the Python layer reads from the libraries (accuracy
// classes, kernel names); registered here to keep the module's order, which is its stub's (_core.pyi).
#include "bindings.hpp"

#include <stdexcept>
#include <utility>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "ropecheck/accuracy/error_model.hpp"
#include "ropecheck/drift/sweep.hpp"
#include "ropecheck/drift/writers.hpp"
#include "ropecheck/plugin/kernel_name.hpp"

namespace ropecheck::python {
using namespace nb::literals;
namespace {

// `ropecheck drift` without the output folder: the same sweep (drift::run_drift) and the same file
// contents (drift/DRIFT.md), returned as text for the Python layer to turn into arrays.
struct DriftOutput {
  std::string json, positions_csv, bins_csv, breakdown_csv, uniqueness_csv, summary;
};

DriftOutput run_drift(const Spec& spec, const std::vector<std::string>& candidates, const std::string& dtype,
                      std::int64_t max_pos, int heads, std::uint64_t seed, bool uniqueness, int window, int per_octave,
                      std::optional<std::int64_t> seq_len, int threads, std::uint64_t max_memory,
                      const std::string& command_line) {
  const std::optional<DType> dt = parse_dtype(dtype);
  if (!dt) throw SpecError("dtype: unknown dtype '" + dtype + "' (f64, f32, f16, bf16)");
  if (candidates.empty()) throw SpecError("recipes: empty list");
  std::vector<plugin::KernelName> names;
  for (const std::string& c : candidates) names.push_back(plugin::parse_kernel_name(c, "recipes"));
  if (heads < 1 || heads > 64) throw SpecError("heads: must be in [1, 64], got " + std::to_string(heads));
  drift::DriftOptions d;
  d.sampling.max_pos = max_pos;
  d.sampling.window = window;
  d.sampling.per_octave = per_octave;
  d.storage = *dt;
  d.seq_len = seq_len;
  d.heads = heads;
  d.seed = seed;
  d.uniqueness = uniqueness;
  d.threads = threads;
  d.max_memory = max_memory;
  drift::DriftResult r;
  {
    nb::gil_scoped_release release;
    try {
      r = drift::run_drift(spec.spec, names, d);
    } catch (const std::invalid_argument& e) {
      throw SpecError(e.what());
    }
  }
  return {drift::to_json(r, command_line).dump(2), drift::positions_csv(r), drift::bins_csv(r), drift::breakdown_csv(r),
          drift::uniqueness_csv(r), drift::summary_markdown(r, command_line)};
}

}  // namespace

void bind_drift(nb::module_& m) {
  nb::class_<DriftOutput>(m, "DriftOutput")
      .def_ro("json", &DriftOutput::json)
      .def_ro("positions_csv", &DriftOutput::positions_csv)
      .def_ro("bins_csv", &DriftOutput::bins_csv)
      .def_ro("breakdown_csv", &DriftOutput::breakdown_csv)
      .def_ro("uniqueness_csv", &DriftOutput::uniqueness_csv)
      .def_ro("summary", &DriftOutput::summary);
  m.def(
      "accuracy_classes",
      [] {
        std::vector<std::string> out;
        for (accuracy::AccuracyClass c : accuracy::kAccuracyClasses) out.emplace_back(accuracy::to_string(c));
        return out;
      },
      "the accuracy classes' names, strictest first (accuracy/ERROR_MODEL.md)");
  m.def("kernel_name",
        [](const std::string& name, const std::string& option) {
          const plugin::KernelName n = plugin::parse_kernel_name(name, option);
          return std::make_pair(n.canonical(), n.deprecation);
        },
        "name"_a, "option"_a = "kernel", "(canonical spelling, deprecation note or '') of a kernel name (plugin/kernel_name.hpp)");
  m.def("drift", &run_drift, "spec"_a, "candidates"_a, "dtype"_a, "max_pos"_a, "heads"_a, "seed"_a, "uniqueness"_a,
        "window"_a, "per_octave"_a, "seq_len"_a.none(), "threads"_a, "max_memory"_a, "command_line"_a);
}

}  // namespace ropecheck::python
