// The property suite from Python: a Python callable as a kernel under test, judged by the suite.
#include "bindings.hpp"

#include <cstring>
#include <memory>
#include <stdexcept>

#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "ropecheck/accuracy/error_model.hpp"
#include "ropecheck/core/one_line.hpp"
#include "ropecheck/kut/kernel_under_test.hpp"
#include "ropecheck/props/kut_target.hpp"
#include "ropecheck/props/rapidcheck_seed.hpp"
#include "ropecheck/props/suite.hpp"

namespace ropecheck::python {
using namespace nb::literals;
namespace {

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

}  // namespace

void bind_props(nb::module_& m) {
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
}

}  // namespace ropecheck::python
