// `merge --diagnose`: the diagnosis one run of `check` adds to a failing report (check_rediagnose.hpp).
#include "check_rediagnose.hpp"

#include "ropecheck/checker/run_check.hpp"
#include "ropecheck/io/sha256.hpp"
#include "ropecheck/plugin/kernel_name.hpp"

namespace ropecheck::cli {

std::optional<checker::Diagnosis> rediagnose_check(const checker::CheckReport& rep, const nlohmann::json& run,
                                                  const nlohmann::json& source, int threads) {
  if (rep.verdict != Verdict::fail || run.value("kernel_failed", false)) return std::nullopt;  // as one run
  const std::string kind = source.value("kind", "");
  const std::string file = kind == "file" ? source.value("path", "") : "";
  const std::string kernel =
      kind == "kernel" ? source.value("path", "") : (kind == "builtin" || kind == "cuda" ? source.value("name", "") : "");
  if (file.empty() && kernel.empty())
    throw InputError("merge --diagnose: the parts do not say which candidate to read again (candidate_source " +
                     source.dump() + ")");
  const std::optional<checker::CandidateLayout> layout = checker::parse_candidate_layout(run.value("layout", "thd"));
  if (!layout) throw InputError("merge --diagnose: the parts name an unknown --layout");
  const golden::GoldenSet g = golden::load_golden_set(rep.golden_dir);
  if (golden::golden_fingerprint(g) != rep.golden_fingerprint)
    throw InputError("merge --diagnose: " + rep.golden_dir + " is not the golden set the parts checked (its fingerprint differs)");
  checker::Candidate c;
  if (!file.empty()) {
    c = checker::read_candidate_file(file, g);
    if (run.contains("candidate") && io::sha256_file(file) != run["candidate"].value("sha256", ""))
      throw InputError("merge --diagnose: " + file + " is not the candidate the parts checked (its SHA-256 differs)");
  } else {
    plugin::OpenOptions ko;
    ko.cpu.threads = threads;
    plugin::OpenedKernel k = plugin::open_kernel(kind == "kernel" ? plugin::plugin_kernel(kernel) : plugin::parse_kernel_name(kernel), ko);
    c = checker::run_kernel_candidate(*k.kernel, k.title, std::move(k.source), g);
  }
  checker::apply_candidate_layout(c.tensors, *layout);
  checker::DiagnoseOptions dopt;
  dopt.threads = threads;
  return checker::diagnose(g, c.tensors, rep, dopt, false);
}

}  // namespace ropecheck::cli
