// ropecheck._core: the C++ libraries as a Python extension module (nanobind). Thin: every decision
// (spec import, golden values, the checker's verdicts) is the library's; the pure-Python layer in
// python/ropecheck/ turns arrays into tensors and reports into objects.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <map>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include <cstdlib>
#include <iostream>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "ropecheck/accuracy/error_model.hpp"
#include "ropecheck/core/one_line.hpp"
#include "ropecheck/core/spec.hpp"
#include "ropecheck/core/spec_json.hpp"
#include "ropecheck/io/atomic_output.hpp"
#include "ropecheck/checker/run_check.hpp"
#include "ropecheck/golden/golden_set.hpp"
#include "ropecheck/golden/golden_writer.hpp"
#include "ropecheck/golden/hf_config_file.hpp"
#include "ropecheck/io/memory_budget.hpp"
#include "ropecheck/io/sha256.hpp"
#include "ropecheck/io/tensor.hpp"
#include "ropecheck/drift/sweep.hpp"
#include "ropecheck/drift/writers.hpp"
#include "ropecheck/kut/kernel_under_test.hpp"
#include "ropecheck/plugin/kernel_name.hpp"
#include "ropecheck/props/kut_target.hpp"
#include "ropecheck/props/rapidcheck_seed.hpp"
#include "ropecheck/props/suite.hpp"
#include "ropecheck/reference/presets.hpp"
#include "ropecheck/reference/resolve.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace ropecheck::python {
namespace {

using Bytes = nb::ndarray<nb::numpy, const std::uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using BytesIn = nb::ndarray<const std::uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

struct Spec {
  EncodingSpec spec;
};

struct Golden {
  golden::GoldenSet set;
};

std::string spec_json(const Spec& s) { return spec_to_json(s.spec).dump(); }

std::optional<RopeLayout> layout_of(const std::string& layout) {
  if (layout.empty()) return std::nullopt;
  if (layout == "half_split") return RopeLayout::half_split;
  if (layout == "interleaved") return RopeLayout::interleaved;
  throw SpecError("layout must be half_split or interleaved, got '" + layout + "'");
}

// A Hugging Face config file, recorded as `ropecheck --hf-config` records it (golden/hf_config_file.hpp),
// so that a golden set written from Python has the CLI's bytes.
std::tuple<Spec, std::vector<std::string>> hf_config_file(const std::string& path, const std::string& layout,
                                                          const std::string& layer_type, bool strict) {
  HfImportOptions opt;
  opt.layer_type = layer_type;
  opt.strict = strict;
  opt.layout = layout_of(layout);
  std::vector<std::string> ignored;
  EncodingSpec spec = golden::load_recorded_hf_config(path, opt, &ignored);
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

std::vector<DType> dtypes_of(const std::vector<std::string>& names) {
  std::vector<DType> out;
  for (const std::string& n : names) {
    const std::optional<DType> d = parse_dtype(n);
    if (!d) throw SpecError("dtypes: unknown dtype '" + n + "' (known: f64, f32, f16, bf16)");
    out.push_back(*d);
  }
  if (out.empty()) throw SpecError("dtypes: empty list");
  return out;
}

// Writes a golden set with golden::write_golden_set, the function `ropecheck golden` calls; returns
// the manifest as JSON text.
std::string write_golden(const Spec& spec, const std::string& positions, const std::string& out,
                         const std::vector<std::string>& dtypes, int heads, std::uint64_t seed, const std::string& format,
                         std::optional<std::int64_t> seq_len, int threads, bool overwrite, std::uint64_t max_memory) {
  if (heads < 1 || heads > 4096) throw SpecError("heads: must be in [1, 4096], got " + std::to_string(heads));
  if (format != "safetensors" && format != "npy")
    throw SpecError("format: must be safetensors or npy, got '" + format + "'");
  if (seq_len && (*seq_len < 1 || *seq_len > kMaxPosition))
    throw SpecError("seq_len: must be in [1, 2^53], got " + std::to_string(*seq_len));
  if (threads < 0 || threads > 1024) throw SpecError("threads: must be in [0, 1024], got " + std::to_string(threads));
  golden::GoldenOptions g;
  g.spec = spec.spec;
  g.positions = parse_positions(positions);
  g.out = out;
  g.dtypes = dtypes_of(dtypes);
  g.heads = heads;
  g.seed = seed;
  g.format = format == "npy" ? io::FileFormat::npz : io::FileFormat::safetensors;
  g.seq_len = seq_len;
  g.threads = threads;
  g.overwrite = overwrite;
  g.max_memory = max_memory;
  nb::gil_scoped_release release;
  return golden::write_golden_set(g).manifest.dump();
}

// Copies a loaded set's files (manifest first) to `out`, through the same atomic folder output the
// writer uses: the copy is the set's bytes, so byte-identical to what `ropecheck golden` wrote.
void save_golden(const Golden& g, const std::string& out, bool overwrite) {
  nb::gil_scoped_release release;
  io::OutputFolder::Options o;
  o.overwrite = overwrite;
  o.create_parents = true;
  o.option = "save";
  o.command = "save";
  io::OutputFolder folder(out, o);
  std::vector<std::string> names = {"manifest.json"};
  for (const golden::ManifestFile& f : g.set.files()) names.push_back(f.file);
  for (const std::string& name : names) {
    const std::filesystem::path p = g.set.dir() / name;
    std::ifstream in(p, std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    if (!in.good() && !in.eof()) throw InputError("save: cannot read " + p.string());
    folder.write(name, bytes.str());
  }
  folder.commit();
}

// One candidate tensor: name, dtype, shape and its bytes (little-endian, row-major; the caller made
// them contiguous). The checker reads them in place.
using CandidateIn = std::tuple<std::string, std::string, std::vector<std::int64_t>, BytesIn>;

struct CheckResult {
  std::string json;     // the CLI's --report JSON
  std::string summary;  // the CLI's terminal report
  std::string verdict;  // pass, fail, not-tested
};

// `ropecheck check` from Python, through the checker's one entry point (checker/run_check.hpp): the
// candidate is the arrays given, or the kernel `kernel` names (plugin/kernel_name.hpp) run on the golden
// inputs; `baseline` an earlier report's path.
CheckResult check(const Golden& g, const std::vector<CandidateIn>& candidates, const std::string& kernel,
                  const std::string& cls, std::optional<double> max_ulp, std::optional<double> atol,
                  std::optional<double> rtol, const std::vector<std::string>& only,
                  const std::map<std::string, std::string>& name_map, int worst, int threads, const std::string& source_json,
                  std::optional<bool> diagnose, const std::string& baseline, double max_growth) {
  checker::CheckRequest r;
  r.options.criterion =
      checker::parse_criterion(cls.empty() ? std::nullopt : std::optional<std::string>(cls), max_ulp, atol, rtol, true);
  r.options.only = only;
  r.options.name_map = name_map;
  if (worst < 0 || worst > 100000) throw InputError("worst: must be in [0, 100000], got " + std::to_string(worst));
  r.options.worst_count = worst;
  if (threads < 0 || threads > 1024) throw InputError("threads: must be in [0, 1024], got " + std::to_string(threads));
  r.options.threads = threads;
  using D = checker::CheckRequest::Diagnose;  // as `ropecheck check`: a failing check is diagnosed unless False
  r.diagnose = !diagnose ? D::if_failing : (*diagnose ? D::always : D::never);
  if (!(max_growth >= 1 && std::isfinite(max_growth))) throw InputError("max_growth: must be a finite number >= 1");
  r.max_growth = max_growth;
  if (!baseline.empty()) r.baseline = checker::read_check_baseline(baseline);
  checker::check_request(g.set, r);
  if (!kernel.empty()) {
    plugin::OpenOptions ko;
    ko.cpu.threads = threads;
    plugin::OpenedKernel k = plugin::open_kernel(plugin::parse_kernel_name(kernel, "kernel"), ko, "kernel");
    nb::gil_scoped_release release;
    const checker::CheckOutcome out = checker::run_check(g.set, checker::kernel_candidate(std::move(k.kernel), k.title, std::move(k.source)), r);
    return {out.to_json().dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n", out.summary(),
            std::string(to_string(out.verdict))};
  }
  checker::Candidate c;
  c.source = parse_json_text(source_json, "candidate source");
  std::vector<checker::TensorView> views;  // the arrays read in place: the caller holds them during the call
  for (const auto& [name, dtype, shape, bytes] : candidates) {
    const std::optional<io::TensorDType> dt = io::parse_tensor_dtype(dtype);
    if (!dt) throw InputError("candidate '" + name + "': unsupported dtype '" + dtype + "'");
    views.push_back({{name, *dt, shape}, {bytes.data(), bytes.size()}});
  }
  c.blocks = checker::memory_candidate(std::move(views));
  nb::gil_scoped_release release;
  const checker::CheckOutcome out = checker::run_check(g.set, std::move(c), r);
  return {out.to_json().dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n", out.summary(),
          std::string(to_string(out.verdict))};
}

// A Python callable as a kernel under test, so that the property suite (and anything else that calls
// kernels through kut/kernel_under_test.hpp) can judge it. `call(x, dtype, shape, positions, input,
// out_dtype)` gets x's bytes (uint8) and returns the output's bytes; the Python layer (_props.py)
// turns them into arrays and calls the user's kernel. A Python exception is a failed call (its message
// says what was raised); NotImplementedError is "unsupported".
class PythonKernel final : public kut::KernelUnderTest {
 public:
  PythonKernel(nb::callable call, std::string name, std::vector<DType> dtypes, bool negative_positions)
      : call_(std::move(call)) {
    info_.name = std::move(name);
    info_.description = "Python callable " + info_.name;
    info_.capabilities.rope_apply = true;
    info_.capabilities.output_dtypes = std::move(dtypes);
    info_.capabilities.negative_positions = negative_positions;
    info_.external = true;
  }
  ~PythonKernel() override {
    nb::gil_scoped_acquire gil;
    call_.reset();
  }
  const kut::Info& info() const override { return info_; }

  kut::CallResult rope_apply(const kut::RopeApplyCall& c) override {
    using Status = kut::CallResult::Status;
    const RopeSpec& rope = c.problem.spec->rope;
    const std::size_t tokens = c.problem.positions.size();
    nb::gil_scoped_acquire gil;
    try {
      const bool mrope = rope.mrope != MropeMode::none;
      std::vector<std::int64_t> pos;
      for (const Position& p : c.problem.positions) {
        pos.push_back(p.t);
        if (mrope) {
          pos.push_back(p.h);
          pos.push_back(p.w);
        }
      }
      const std::size_t pos_shape[2] = {tokens, 3};
      nb::ndarray<nb::numpy, std::int64_t> positions(pos.data(), mrope ? 2 : 1, pos_shape, nb::handle());
      const nb::ndarray<nb::numpy, const std::uint8_t, nb::ndim<1>> x(c.x.bytes.data(), {c.x.bytes.size()}, nb::handle());
      const std::vector<std::int64_t> shape = {static_cast<std::int64_t>(tokens), c.heads, rope.head_dim};
      // The arrays above view this call's buffers: the Python layer copies what it keeps.
      nb::object out = call_(x, std::string(to_string(c.x.dtype)), shape, positions, std::string(c.input),
                             std::string(to_string(c.out.dtype)), Spec{*c.problem.spec});
      const auto bytes = nb::cast<nb::ndarray<const std::uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>>(out);
      if (bytes.size() != c.out.bytes.size())
        return {Status::failed, "returned " + std::to_string(bytes.size()) + " bytes, expected " + std::to_string(c.out.bytes.size())};
      std::memcpy(c.out.bytes.data(), bytes.data(), bytes.size());
      return {};
    } catch (nb::python_error& e) {
      // The exception's type and message (its traceback stays out of the one-line report).
      const bool unsupported = e.matches(PyExc_NotImplementedError);
      std::string what = nb::cast<std::string>(nb::str(e.value()));
      if (!unsupported) what = nb::cast<std::string>(nb::handle(e.type()).attr("__name__")) + ": " + what;
      what = one_line(what);
      if (what.size() > 400) what = what.substr(0, 400) + "...";
      return {unsupported ? Status::unsupported : Status::failed, what};
    } catch (const std::exception& e) {
      return {Status::failed, one_line(e.what())};
    }
  }
  kut::CallResult rope_cos_sin(const kut::RopeTableCall&) override {
    return {kut::CallResult::Status::unsupported, "a Python kernel has no cos / sin entry point"};
  }
  kut::CallResult sinusoidal(const kut::SinusoidalCall&) override {
    return {kut::CallResult::Status::unsupported, "a Python kernel has no sinusoidal entry point"};
  }

 private:
  nb::callable call_;
  kut::Info info_;
};

struct PropsResult {
  std::string json;     // what `ropecheck props --report` writes
  std::string summary;  // one line per property (SuiteReport::summary)
  std::string verdict;
};

// The property suite on a Python kernel. `reproduce(property, seed, cases, max_position, dtype)`
// gives each failed property's reproduce line (the Python call that reruns it alone).
PropsResult run_props(nb::callable call, const std::string& name, const std::optional<Spec>& spec, const std::string& cls,
                      const std::vector<std::string>& dtypes, int cases, std::uint64_t seed, std::int64_t max_position,
                      const std::vector<std::string>& only, bool negative_positions, nb::callable reproduce) {
  if (cases < 1) throw SpecError("cases: must be >= 1, got " + std::to_string(cases));
  if (max_position < 0 || max_position > kMaxPosition)
    throw SpecError("max_pos: must be in [0, 2^53], got " + std::to_string(max_position));
  const std::optional<accuracy::AccuracyClass> c = accuracy::parse_accuracy_class(cls);
  if (!c) throw SpecError("cls: unknown class '" + cls + "'");
  const std::vector<DType> dts = dtypes_of(dtypes);
  auto kernel = std::make_shared<PythonKernel>(std::move(call), name, dts, negative_positions);
  props::TargetInfo info{name, kernel->info().description, *c, dts.front(), negative_positions};
  std::unique_ptr<props::Target> target = props::make_kut_target(kernel, info, true);
  props::set_rapidcheck_seed(seed);
  props::SuiteOptions so;
  so.cases = cases;
  so.seed = seed;
  so.max_position = max_position;
  so.only = only;
  so.dtypes = dts;
  props::SuiteReport rep;
  {
    nb::gil_scoped_release release;  // the kernel takes it back for each call
    try {
      rep = props::run_suite(*target, spec ? &spec->spec : nullptr, so);
    } catch (const std::invalid_argument& e) {
      throw SpecError(e.what());
    }
  }
  const nlohmann::json j = rep.to_json([&](const props::ReproduceRecord& r) {
    return nb::cast<std::string>(reproduce(r.property, r.seed, r.cases, r.max_position, r.dtype));
  });
  return {j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n", rep.summary(),
          std::string(to_string(rep.verdict()))};
}

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

void register_errors(nb::module_& m) {
  static nb::exception<InputError> input_error(m, "InputError", PyExc_ValueError);
  static nb::exception<SpecError> spec_error(m, "SpecError", input_error);
  // Registered last, so tried first: every library error becomes one of the two, with the CLI's
  // one-line message; Python exceptions raised inside callbacks pass through unchanged.
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const nb::python_error&) {
      throw;
    } catch (const nb::builtin_exception&) {
      throw;
    } catch (const SpecError& e) {
      PyErr_SetString(spec_error.ptr(), one_line(e.what()).c_str());
    } catch (const std::bad_alloc&) {
      PyErr_SetString(input_error.ptr(), "out of memory: the request needs more memory than this process can get");
    } catch (const std::exception& e) {
      PyErr_SetString(input_error.ptr(), one_line(e.what()).c_str());
    }
  });
}

}  // namespace
}  // namespace ropecheck::python

NB_MODULE(_core, m) {
  using namespace ropecheck;
  using namespace ropecheck::python;
  m.doc() = "ropecheck's C++ libraries (spec, golden sets, checker, property suite, drift)";
  register_errors(m);

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

  m.def("write_golden", &write_golden, "spec"_a, "positions"_a, "out"_a, "dtypes"_a, "heads"_a = 1, "seed"_a = 0,
        "format"_a = "safetensors", "seq_len"_a = nb::none(), "threads"_a = 0, "overwrite"_a = false,
        "max_memory"_a = 0);

  nb::class_<Golden>(m, "GoldenSet")
      .def_prop_ro("dir", [](const Golden& g) { return g.set.dir().string(); })
      .def_prop_ro("manifest", [](const Golden& g) { return g.set.manifest().dump(); })
      .def_prop_ro("spec", [](const Golden& g) { return Spec{g.set.spec()}; })
      .def_prop_ro("dtypes", [](const Golden& g) { return g.set.dtypes(); })
      .def_prop_ro("tokens", [](const Golden& g) { return g.set.tokens(); })
      .def_prop_ro("heads", [](const Golden& g) { return g.set.heads(); })
      .def_prop_ro("attention_factor", [](const Golden& g) { return g.set.attention_factor(); })
      .def("tensors",
           [](const Golden& g) {
             std::vector<std::tuple<std::string, std::string, std::vector<std::int64_t>, std::string>> out;
             for (const golden::ManifestTensor& t : g.set.tensors())
               out.emplace_back(t.name, std::string(io::to_string(t.dtype)), t.shape, t.role);
             return out;
           })
      // The tensor's bytes, without a copy: a read-only view (of the mapped file, for safetensors) that
      // keeps the set alive.
      .def("tensor_bytes",
           [](nb::handle self, const std::string& name) {
             const Golden& g = nb::cast<const Golden&>(self);
             std::span<const std::uint8_t> b;
             {
               nb::gil_scoped_release release;  // the first use of a file hashes it
               b = g.set.tensor_bytes(name);
             }
             return Bytes(b.data(), {b.size()}, self);
           },
           "name"_a);
  m.def("load_golden", [](const std::string& dir) {
    nb::gil_scoped_release release;
    return Golden{golden::load_golden_set(dir)};
  }, "dir"_a);

  m.def("save_golden", &save_golden, "golden"_a, "out"_a, "overwrite"_a = false);

  nb::class_<PropsResult>(m, "PropsResult")
      .def_ro("json", &PropsResult::json)
      .def_ro("summary", &PropsResult::summary)
      .def_ro("verdict", &PropsResult::verdict);
  m.def("props", &run_props, "call"_a, "name"_a, "spec"_a.none(), "cls"_a, "dtypes"_a, "cases"_a, "seed"_a,
        "max_position"_a, "only"_a, "negative_positions"_a, "reproduce"_a);
  m.def("property_names", [] {
    std::vector<std::string> names;
    for (const props::PropertyInfo& p : props::list_properties()) names.push_back(p.name);
    return names;
  });

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

  nb::class_<CheckResult>(m, "CheckResult")
      .def_ro("json", &CheckResult::json)
      .def_ro("summary", &CheckResult::summary)
      .def_ro("verdict", &CheckResult::verdict);
  m.def("check", &check, "golden"_a, "candidates"_a, "kernel"_a = "", "cls"_a = "", "max_ulp"_a = nb::none(),
        "atol"_a = nb::none(), "rtol"_a = nb::none(), "only"_a = std::vector<std::string>{},
        "name_map"_a = std::map<std::string, std::string>{}, "worst"_a = 10, "threads"_a = 0,
        "source"_a = "{\"kind\": \"python\"}", "diagnose"_a = nb::none(), "baseline"_a = "", "max_growth"_a = 2.0);
}
