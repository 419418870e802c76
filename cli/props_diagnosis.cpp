// props counterexamples replayed as a golden-set check and diagnosed (props_diagnosis.hpp).
#include "props_diagnosis.hpp"

#include <stdlib.h>

#include <filesystem>
#include <system_error>

#include <fmt/core.h>

#include "ropecheck/golden/golden_set.hpp"
#include "ropecheck/golden/golden_writer.hpp"
#include "ropecheck/checker/kernel_run.hpp"
#include "ropecheck/plugin/kernel_name.hpp"

namespace ropecheck::cli {

namespace {

// A temporary folder removed on scope exit.
struct ScratchDir {
  std::filesystem::path path;
  ScratchDir() {
    std::string t = (std::filesystem::temp_directory_path() / "ropecheck_props_diagnosis.XXXXXX").string();
    if (::mkdtemp(t.data()) == nullptr) throw InputError("cannot create a temporary folder for the diagnosis in " + t);
    path = t;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

std::optional<CounterexampleDiagnosis> diagnose_counterexample(const plugin::KernelName& kernel, const EncodingSpec& spec,
                                                               std::int64_t position, DType dtype,
                                                               accuracy::AccuracyClass accuracy_class,
                                                               const plugin::PluginClientOptions& plugin) {
  if (spec.family != Family::rope || position < 0) return std::nullopt;
  const ScratchDir dir;
  golden::GoldenOptions go;
  go.spec = spec;
  go.positions = parse_positions(position == 0 ? "0" : fmt::format("log:{}:2", position));
  go.dtypes = dtype == DType::f64 ? std::vector<DType>{} : std::vector<DType>{dtype};
  go.heads = 2;
  go.out = dir.path / "set";
  golden::write_golden_set(go);
  const golden::GoldenSet g = golden::load_golden_set(go.out);
  plugin::OpenOptions ko;
  ko.plugin = plugin;
  plugin::OpenedKernel ks = plugin::open_kernel(kernel, ko);
  const checker::KernelRun run = checker::run_kernel(*ks.kernel, g);
  if (!run.declined.empty()) return std::nullopt;  // nothing to replay: the kernel declines this set
  checker::CheckOptions co;
  co.criterion = checker::Criterion::of_class(accuracy_class);
  const std::string dt(to_string(dtype));
  for (const char* base : {"cos", "sin", "q_rot", "k_rot"}) co.only.push_back(std::string(base) + "." + dt);
  CounterexampleDiagnosis out{go.positions.argument, checker::check_candidate(g, run.tensors, co), {}};
  out.diagnosis = checker::diagnose(g, run.tensors, out.check);
  return out;
}

}  // namespace ropecheck::cli
