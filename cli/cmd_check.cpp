// `ropecheck check`: a candidate (a tensor file, or a kernel run on the golden inputs) against a golden
// set; the options are turned into a checker::CheckRequest, the checker runs and finishes it
// (checker/run_check.hpp) and this file prints and writes what it returns (checker/CHECK_REPORT.md).
//
// Exit codes: 0 everything asked for was tested and held (and, with --baseline, no error grew past
// --max-growth), 1 something failed (a violation, a kernel call that crashed / hung / exited / broke its
// buffers, a regression), 3 nothing failed but something asked for was not tested, 2 unusable input.
// With exit 2 nothing is written: stdout stays empty, --report is not created, and stderr has one line
// "ropecheck: error: ...". With --shard I/N the codes are the verdict on that part's tokens only;
// `ropecheck merge` of the parts gives the run's.
#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "check_options.hpp"
#include "check_rediagnose.hpp"
#include "commands.hpp"
#include "junit.hpp"
#include "ropecheck/checker/run_check.hpp"
#include "ropecheck/io/atomic_output.hpp"
#include "memory_option.hpp"

namespace ropecheck::cli {
namespace {

template <typename T>
std::optional<T> given(const CLI::Option* opt, const T& value) {
  return opt->count() > 0 ? std::optional<T>(value) : std::nullopt;
}

}  // namespace

checker::CheckRequest request_of(const CheckCliOptions& o) {
  checker::CheckRequest r;
  r.options.criterion = checker::parse_criterion(given(o.class_opt, o.accuracy_class), given(o.max_ulp_opt, o.max_ulp),
                                                 given(o.atol_opt, o.atol), given(o.atol_opt, o.rtol));
  r.options.name_map = checker::parse_name_map(o.maps);
  for (std::size_t b = 0, e; b <= o.only.size(); b = e + 1) {
    e = std::min(o.only.find(',', b), o.only.size());
    if (e > b) r.options.only.push_back(o.only.substr(b, e - b));
  }
  if (!o.only.empty() && r.options.only.empty()) throw InputError("--only: empty list");
  r.options.worst_count = o.worst;
  r.options.threads = o.threads;
  r.options.max_memory = max_memory_bytes(o.max_memory);  // 0: the check's default (1 GiB)
  const std::optional<checker::CandidateLayout> layout = checker::parse_candidate_layout(o.layout);
  if (!layout) throw InputError("--layout: unknown layout '" + o.layout + "' (known: thd, bshd, bhsd)");
  r.layout = *layout;
  using D = checker::CheckRequest::Diagnose;
  r.diagnose = o.diagnose ? D::always : (o.no_diagnose ? D::never : D::if_failing);
  if (!(o.max_growth >= 1 && std::isfinite(o.max_growth)))
    throw InputError("--max-growth: must be a finite number >= 1, got " + fmt::format("{}", o.max_growth));
  r.max_growth = o.max_growth;
  if (!o.baseline.empty()) r.baseline = checker::read_check_baseline(o.baseline);
  return r;
}

namespace {

// The candidate read a block of tokens at a time during the check (a file in pieces, a kernel per block).
checker::Candidate load_candidate(const std::string& file, const std::optional<plugin::KernelName>& kernel,
                                  const golden::GoldenSet& g, int threads, const plugin::PluginClientOptions& isolation) {
  if (!kernel) return checker::open_candidate_file(file, g);
  plugin::OpenOptions ko;
  ko.cpu.threads = threads;
  ko.plugin = isolation;
  plugin::OpenedKernel k = plugin::open_kernel(*kernel, ko);
  return checker::kernel_candidate(std::move(k.kernel), k.title, std::move(k.source));
}

int run_check_command(const CheckCliOptions& o) {
  if (!o.kv_cache.empty()) return run_kv_cache_check(o);
  if (o.candidate.empty() == o.kernel.empty())
    throw InputError("exactly one of --candidate FILE or --kernel NAME is required");
  std::optional<plugin::KernelName> kernel;  // an unknown recipe before anything is loaded
  if (!o.kernel.empty()) kernel = kernel_name(o.kernel, "--kernel");
  std::optional<Shard> shard;
  if (!o.shard.empty()) {
    shard = parse_shard(o.shard);
    if (o.report.empty()) throw InputError("--shard needs --report PART.json (the part `ropecheck merge` joins)");
    for (const auto& [is_given, name] : {std::pair{!o.baseline.empty(), "--baseline"}, std::pair{!o.junit.empty(), "--junit"},
                                         std::pair{o.diagnose, "--diagnose"}})
      if (is_given)
        throw InputError(std::string(name) + ": not with --shard (a part is not a verdict on the whole run; give it "
                                             "to a run over the whole set)");
  }
  const auto started = std::chrono::steady_clock::now();
  if (!o.report.empty()) io::check_file_destination(o.report, "--report");
  if (!o.junit.empty()) io::check_file_destination(o.junit, "--junit");
  const checker::CheckRequest request = request_of(o);
  // The files' hashes are computed by the check while it reads them (each byte read once), and checked
  // before anything is printed.
  const golden::GoldenSet g = golden::load_golden_set(o.golden_dir, {.hash_files = false});
  checker::check_request(g, request);  // a baseline of another set: before any kernel runs
  if (kernel && !shard && g.manifest().contains("kv_cache")) return run_kernel_kv_check(o, *kernel, g, request);
  checker::Candidate candidate = load_candidate(o.candidate, kernel, g, o.threads, o.plugin);
  if (shard) {
    const nlohmann::json run_options = {{"only", request.options.only}, {"map", o.maps}, {"layout", o.layout}};
    const checker::CheckPartOutcome part = checker::run_check_part(g, std::move(candidate), request, *shard, run_options);
    io::write_file_atomically(o.report, part.part.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n",
                              "--report");
    fmt::print("{}", part.summary);
    std::fflush(stdout);
    return exit_code(part.verdict);
  }
  const checker::CheckOutcome out = checker::run_check(g, std::move(candidate), request);
  const nlohmann::json j = out.to_json();
  if (!o.report.empty())
    io::write_file_atomically(o.report, j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n", "--report");
  if (!o.junit.empty()) {
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - started;
    io::write_file_atomically(o.junit, junit_xml("ropecheck check", check_junit_cases(out), took.count()), "--junit");
  }
  fmt::print("{}", out.summary());
  std::fflush(stdout);
  return exit_code(out.verdict);
}

}  // namespace

Command add_check_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "check",
      "check a candidate (a tensor file, or a kernel run on the golden inputs) against a golden set; "
      "exit 0 pass, 1 fail, 3 not tested (nothing failed, something asked for was not tested), 2 unusable input");
  auto o = std::make_shared<CheckCliOptions>();
  cmd->add_option("--golden", o->golden_dir, "golden set folder (written by `ropecheck golden`)")->required();
  auto* cand = cmd->add_option("--candidate", o->candidate,
                               "candidate tensors: .safetensors, .npz, or .npy (the tensor is named after the file stem)");
  cmd->add_option("--kv-cache", o->kv_cache,
                  "FILE: a candidate KV cache (tensors k_cache, optionally v_cache, sentinel and the kernel's own "
                  "kv_indptr / kv_indices / kv_last_page_len or slot_mapping) of a set written with golden --kv-cache: "
                  "written slots judged as k_rot, the others must keep the sentinel");
  auto* kern = cmd->add_option("--kernel", o->kernel, std::string("kernel run on the golden inputs: ") + kKernelGrammar);
  cand->excludes(kern);
  cmd->add_option("--only", o->only,
                  "TENSORS: comma-separated golden output names (q_rot.bf16) or bases (q_rot): what is asked for "
                  "(default: every golden output; a missing one is not tested, exit 3)");
  cmd->add_option("--map", o->maps, "GOLDEN=CANDIDATE: check candidate tensor CANDIDATE against golden output GOLDEN (repeatable)");
  std::string classes;
  for (accuracy::AccuracyClass c : accuracy::kAccuracyClasses) classes += (classes.empty() ? "" : ", ") + std::string(accuracy::to_string(c));
  o->class_opt = cmd->add_option("--class", o->accuracy_class,
                                 "verdict: the accuracy class every element must satisfy (" + classes + "); default " +
                                     std::string(accuracy::to_string(accuracy::kDefaultAccuracyClass)));
  o->max_ulp_opt = cmd->add_option("--max-ulp", o->max_ulp, "verdict: |candidate - truth| <= N ulp of the candidate's dtype");
  o->atol_opt = cmd->add_option("--atol", o->atol, "verdict: |candidate - truth| <= atol + rtol |truth| (with --rtol)");
  auto* rtol_opt = cmd->add_option("--rtol", o->rtol, "relative part of the --atol criterion (with --atol)");
  o->class_opt->excludes(o->max_ulp_opt)->excludes(o->atol_opt)->excludes(rtol_opt);
  o->max_ulp_opt->excludes(o->atol_opt)->excludes(rtol_opt);
  o->atol_opt->needs(rtol_opt);
  rtol_opt->needs(o->atol_opt);
  cmd->add_option("--report", o->report, "write the full report as JSON to this file (atomically; only when the check ran)");
  cmd->add_option("--junit", o->junit,
                  "write JUnit XML for CI systems to this file: one testcase per tensor, not tested = skipped (atomically)");
  cmd->add_option("--baseline", o->baseline,
                  "an earlier --report of the same golden set and criterion: fail (exit 1) when a tensor's or position "
                  "bin's max or RMS error grew by more than --max-growth (checker/CHECK_REPORT.md)");
  cmd->add_option("--max-growth", o->max_growth, "with --baseline: the growth factor allowed (>= 1)")
      ->capture_default_str()
      ->needs("--baseline");
  cmd->add_option("--worst", o->worst, "worst elements listed per tensor")->capture_default_str()->check(CLI::Range(0, 100000));
  cmd->add_option("--threads", o->threads, "worker threads (default: all cores; results do not depend on it)")
      ->check(CLI::Range(0, 1024));
  auto* diag = cmd->add_flag("--diagnose", o->diagnose,
                             "rank the catalogue of known RoPE mistakes even when the check passes (a failing check is "
                             "always diagnosed; checker/DIAGNOSIS.md)");
  cmd->add_flag("--no-diagnose", o->no_diagnose, "skip the diagnosis of a failing check")->excludes(diag);
  cmd->add_option("--layout", o->layout,
                  "how the candidate's q_rot / k_rot are laid out: thd ([tokens, heads, head_dim], default), bshd or "
                  "bhsd ([1, seq, heads, head_dim] / [1, heads, seq, head_dim], rewritten before the check)")
      ->capture_default_str();
  cmd->add_option("--shard", o->shard,
                  "I/N: check only shard I of N (the golden set's tokens split in N contiguous ranges) and write a part "
                  "report to --report; `ropecheck merge` joins the N parts into the report one run writes "
                  "(checker/CHECK_REPORT.md, \"Sharded checks\")");
  cmd->add_option("--max-memory", o->max_memory,
                  "SIZE: memory the check may use (default 1G; e.g. 512M, 4G): the golden set and the candidate are read "
                  "and checked a block of tokens at a time, blocks sized to stay under it, whatever the set's size; "
                  "the diagnosis of a failing check is skipped when it would need more");
  add_kernel_isolation_options(*cmd, o->plugin);
  return {cmd, [o] { return run_check_command(*o); }};
}

}  // namespace ropecheck::cli
