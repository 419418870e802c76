// `ropecheck check` from Python, through the checker's one entry point.
#include "bindings.hpp"

#include <cmath>
#include <map>
#include <tuple>

#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "ropecheck/checker/kv_cache.hpp"
#include "ropecheck/checker/run_check.hpp"
#include "ropecheck/core/spec_json.hpp"
#include "ropecheck/io/tensor.hpp"
#include "ropecheck/plugin/kernel_name.hpp"

namespace ropecheck::python {
using namespace nb::literals;
namespace {

using BytesIn = nb::ndarray<const std::uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

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
// inputs; `baseline` an earlier report's path; `declined` a Python kernel's reason for declining every
// output (the check is then not tested, as for a plugin that answers UNSUPPORTED).
CheckResult check(const Golden& g, const std::vector<CandidateIn>& candidates, const std::string& kernel,
                  const std::string& cls, std::optional<double> max_ulp, std::optional<double> atol,
                  std::optional<double> rtol, const std::vector<std::string>& only,
                  const std::map<std::string, std::string>& name_map, int worst, int threads, const std::string& source_json,
                  std::optional<bool> diagnose, const std::string& baseline, double max_growth,
                  const std::string& declined) {
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
    const checker::CheckOutcome out =
        checker::run_check(g.set, checker::kernel_candidate(std::move(k.kernel), k.title, std::move(k.source)), r);
    return {out.to_json().dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n", out.summary(),
            std::string(to_string(out.verdict))};
  }
  checker::Candidate c;
  c.source = parse_json_text(source_json, "candidate source");
  c.declined = declined;
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

// `ropecheck check --kv-cache` from Python: the cache tensors (k_cache, optionally v_cache, sentinel and
// the kernel's own metadata) read as the CLI reads them from a file, judged by checker::check_kv_cache.
CheckResult check_kv_cache(const Golden& g, const std::vector<CandidateIn>& tensors, const std::string& cls,
                           std::optional<double> max_ulp, std::optional<double> atol, std::optional<double> rtol,
                           int worst, int threads, std::optional<bool> diagnose) {
  checker::CheckRequest r;
  r.options.criterion =
      checker::parse_criterion(cls.empty() ? std::nullopt : std::optional<std::string>(cls), max_ulp, atol, rtol, true);
  if (worst < 0 || worst > 100000) throw InputError("worst: must be in [0, 100000], got " + std::to_string(worst));
  r.options.worst_count = worst;
  if (threads < 0 || threads > 1024) throw InputError("threads: must be in [0, 1024], got " + std::to_string(threads));
  r.options.threads = threads;
  using D = checker::CheckRequest::Diagnose;
  r.diagnose = !diagnose ? D::if_failing : (*diagnose ? D::always : D::never);
  checker::check_request(g.set, r);
  std::vector<io::Tensor> ts;  // copied: a cache is small, and io::Tensor owns its bytes
  for (const auto& [name, dtype, shape, bytes] : tensors) {
    const std::optional<io::TensorDType> dt = io::parse_tensor_dtype(dtype);
    if (!dt) throw InputError("kv_cache '" + name + "': unsupported dtype '" + dtype + "'");
    io::Tensor t{name, *dt, shape, std::vector<std::uint8_t>(bytes.data(), bytes.data() + bytes.size())};
    io::validate(t);
    ts.push_back(std::move(t));
  }
  const checker::KvCacheCandidate c = checker::kv_cache_candidate(ts, g.set, "kv_cache");
  nb::gil_scoped_release release;
  const checker::KvCacheReport out = checker::check_kv_cache(g.set, c, r);
  return {out.to_json().dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n", out.summary(),
          std::string(to_string(out.verdict))};
}

}  // namespace

void bind_check(nb::module_& m) {
  nb::class_<CheckResult>(m, "CheckResult")
      .def_ro("json", &CheckResult::json)
      .def_ro("summary", &CheckResult::summary)
      .def_ro("verdict", &CheckResult::verdict);
  m.def("check", &check, "golden"_a, "candidates"_a, "kernel"_a = "", "cls"_a = "", "max_ulp"_a = nb::none(),
        "atol"_a = nb::none(), "rtol"_a = nb::none(), "only"_a = std::vector<std::string>{},
        "name_map"_a = std::map<std::string, std::string>{}, "worst"_a = 10, "threads"_a = 0,
        "source"_a = "{\"kind\": \"python\"}", "diagnose"_a = nb::none(), "baseline"_a = "", "max_growth"_a = 2.0,
        "declined"_a = "");
  m.def("check_kv_cache", &check_kv_cache, "golden"_a, "tensors"_a, "cls"_a = "", "max_ulp"_a = nb::none(),
        "atol"_a = nb::none(), "rtol"_a = nb::none(), "worst"_a = 10, "threads"_a = 0, "diagnose"_a = nb::none());
}

}  // namespace ropecheck::python
