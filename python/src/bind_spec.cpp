// Specs from Python: presets, spec JSON and files, Hugging Face configs (recorded as the CLI records
// them), the resolved spec, and byte sizes as the CLI reads them.
#include "bindings.hpp"

#include <tuple>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "ropecheck/core/spec_json.hpp"
#include "ropecheck/io/hf_config_file.hpp"
#include "ropecheck/io/memory_budget.hpp"
#include "ropecheck/reference/presets.hpp"
#include "ropecheck/reference/resolve.hpp"

namespace ropecheck::python {
using namespace nb::literals;
namespace {

std::string spec_json(const Spec& s) { return spec_to_json(s.spec).dump(); }

std::optional<RopeLayout> layout_of(const std::string& layout) {
  if (layout.empty()) return std::nullopt;
  if (layout == "half_split") return RopeLayout::half_split;
  if (layout == "interleaved") return RopeLayout::interleaved;
  throw SpecError("layout must be half_split or interleaved, got '" + layout + "'");
}

// A Hugging Face config file, recorded as `ropecheck --hf-config` records it (io/hf_config_file.hpp),
// so that a golden set written from Python has the CLI's bytes.
std::tuple<Spec, std::vector<std::string>> hf_config_file(const std::string& path, const std::string& layout,
                                                          const std::string& layer_type, bool strict) {
  HfImportOptions opt;
  opt.layer_type = layer_type;
  opt.strict = strict;
  opt.layout = layout_of(layout);
  std::vector<std::string> ignored;
  EncodingSpec spec = io::load_recorded_hf_config(path, opt, &ignored);
  return {Spec{std::move(spec)}, ignored};
}

std::tuple<Spec, std::vector<std::string>> hf_config_text(const std::string& text, const std::string& name,
                                                          const std::string& layout, const std::string& layer_type,
                                                          bool strict) {
  HfImportOptions opt;
  opt.name = name;
  opt.layer_type = layer_type;
  opt.strict = strict;
  opt.layout = layout_of(layout);
  std::vector<std::string> ignored;
  EncodingSpec spec = spec_from_hf_config(parse_json_text(text, name), opt, &ignored);
  return {Spec{std::move(spec)}, ignored};
}

}  // namespace

void bind_spec(nb::module_& m) {
  nb::class_<Spec>(m, "Spec")
      .def("to_json", &spec_json, "the spec as JSON text (core/SPEC_FORMAT.md)")
      .def_prop_ro("name", [](const Spec& s) { return s.spec.name; })
      .def_prop_ro("family", [](const Spec& s) { return std::string(to_string(s.spec.family)); })
      .def("resolve",
           [](const Spec& s, std::optional<std::int64_t> seq_len, int digits) {
             if (digits < 40 || digits > 1000) throw SpecError("digits: must be in [40, 1000], got " + std::to_string(digits));
             if (seq_len && (*seq_len < 1 || *seq_len > kMaxPosition))
               throw SpecError("seq_len: must be in [1, 2^53], got " + std::to_string(*seq_len));
             return resolve_spec(s.spec, seq_len, digits).to_json().dump();
           },
           "seq_len"_a = nb::none(), "digits"_a = 45,
           "what `ropecheck spec --json` prints: frequencies and attention factor as decimal strings");

  m.def("preset_names", &preset_names);
  m.def("load_preset", [](const std::string& name) { return Spec{load_preset(name)}; }, "name"_a);
  m.def("spec_from_json", [](const std::string& text) { return Spec{spec_from_json(parse_json_text(text, "spec"))}; },
        "text"_a);
  m.def("spec_from_file", [](const std::string& path) { return Spec{load_spec_file(path)}; }, "path"_a);
  m.def("hf_config_file", &hf_config_file, "path"_a, "layout"_a = "", "layer_type"_a = "full_attention",
        "strict"_a = false);
  m.def("hf_config_text", &hf_config_text, "text"_a, "name"_a = "hf-config", "layout"_a = "",
        "layer_type"_a = "full_attention", "strict"_a = false);
  m.def("parse_byte_size", [](const std::string& text) { return io::parse_byte_size(text); }, "text"_a);
}

}  // namespace ropecheck::python
