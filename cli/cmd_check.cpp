// `ropecheck check`: compares a candidate (tensor file, or a kernel run on the golden inputs: golden/kernel_source.hpp)
// with a golden set and prints the checker's report (checker/CHECK_REPORT.md, abi/KERNEL_ABI.md).
//
// Exit codes: 0 everything asked for was tested and the criterion holds everywhere (and, with
// --baseline, no error grew past --max-growth), 1 it is violated (or an error grew: golden/baseline.hpp),
// 3 nothing failed but something asked for was not tested (a golden output without a candidate
// tensor, or elements whose class bound is at its cap; narrow with --only), 2 unusable input (a baseline
// of another set, criterion or tensors included) (bad options, a
// golden set that fails its manifest or hashes, an unreadable candidate, mismatched names / shapes /
// dtypes, a plugin that cannot be loaded). A plugin call that crashes, hangs, exits or breaks its
// buffers is a failure (exit 1) naming what happened (golden/plugin_client.hpp). With exit 2 nothing is written: stdout stays
// empty, --report is not created, and stderr has one line "ropecheck: error: ...". With --shard I/N the
// same codes are the verdict on that part's tokens only; `ropecheck merge` of the parts gives the run's.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include <fmt/core.h>

#include "check_rediagnose.hpp"
#include "commands.hpp"
#include "junit.hpp"
#include "ropecheck/checker/baseline.hpp"
#include "ropecheck/io/atomic_output.hpp"
#include "ropecheck/checker/kernel_run.hpp"
#include "ropecheck/plugin/kernel_name.hpp"
#include "ropecheck/checker/check_part.hpp"
#include "ropecheck/checker/checker.hpp"
#include "ropecheck/checker/diagnose.hpp"
#include "ropecheck/golden/golden_set.hpp"
#include "ropecheck/io/npy.hpp"
#include "ropecheck/io/safetensors.hpp"
#include "ropecheck/io/sha256.hpp"
#include "ropecheck/accuracy/error_model.hpp"

namespace ropecheck::cli {
namespace {

namespace fs = std::filesystem;

struct CheckCliOptions {
  std::string golden_dir;
  std::string candidate;
  std::string kernel;
  std::vector<std::string> maps;
  std::string only;
  std::string accuracy_class;
  double max_ulp = 0;
  double atol = 0, rtol = 0;
  std::string report;
  std::string junit;
  std::string baseline;
  double max_growth = 2;
  int worst = 10;
  int threads = 0;
  bool diagnose = false, no_diagnose = false;
  std::string layout = "thd";
  std::string shard;
  plugin::PluginClientOptions plugin;
  CLI::Option* class_opt = nullptr;
  CLI::Option* max_ulp_opt = nullptr;
  CLI::Option* atol_opt = nullptr;
};

std::string recipe_names() {
  std::string s;
  for (const kernels::RecipeInfo& r : kernels::recipes()) s += (s.empty() ? "" : ", ") + std::string(r.name);
  return s;
}

std::string class_names() {
  std::string s;
  for (accuracy::AccuracyClass c : accuracy::kAccuracyClasses) s += (s.empty() ? "" : ", ") + std::string(accuracy::to_string(c));
  return s;
}

// Lower-case extension of a file name (".safetensors", ".npy", ".npz").
std::string extension_of(const fs::path& p) {
  std::string e = p.extension().string();
  for (char& c : e) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return e;
}

// A candidate tensor larger than the golden set's largest tensor can never match one, so an .npz member
// declaring more is refused before it is inflated (plus room for the .npy header).
std::uint64_t largest_candidate_member(const golden::GoldenSet& g) {
  std::uint64_t largest = 0;
  for (const golden::ManifestTensor& t : g.tensors()) {
    double n = static_cast<double>(io::dtype_size(t.dtype));
    for (std::int64_t d : t.shape) n *= static_cast<double>(d);
    largest = std::max(largest, static_cast<std::uint64_t>(std::min(n, 0x1p62)));
  }
  return largest + (std::uint64_t{1} << 16);
}

std::vector<io::Tensor> read_candidate(const fs::path& p, const golden::GoldenSet& g) {
  std::error_code ec;
  if (!fs::exists(p, ec)) throw InputError("--candidate " + p.string() + ": no such file");
  if (!fs::is_regular_file(p, ec)) throw InputError("--candidate " + p.string() + ": not a regular file");
  const std::string ext = extension_of(p);
  if (ext == ".safetensors") return io::read_safetensors(p);
  if (ext == ".npz") return io::read_npz(p, true, largest_candidate_member(g));
  if (ext == ".npy") return {io::read_npy(p)};  // named after the file stem
  throw InputError("--candidate " + p.string() + ": unknown file type '" + ext +
                    "' (expected .safetensors, .npy or .npz)");
}

checker::Criterion criterion_of(const CheckCliOptions& o) {
  if (o.class_opt->count() > 0) {
    const std::optional<accuracy::AccuracyClass> c = accuracy::parse_accuracy_class(o.accuracy_class);
    if (!c) throw InputError("--class: unknown class '" + o.accuracy_class + "' (known: " + class_names() + ")");
    return checker::Criterion::of_class(*c);
  }
  if (o.max_ulp_opt->count() > 0) {
    if (!(o.max_ulp >= 0)) throw InputError("--max-ulp: must be a non-negative number, got " + fmt::format("{}", o.max_ulp));
    return checker::Criterion::of_max_ulp(o.max_ulp);
  }
  if (o.atol_opt->count() > 0) {
    if (!(o.atol >= 0 && std::isfinite(o.atol))) throw InputError("--atol: must be a finite non-negative number");
    if (!(o.rtol >= 0 && std::isfinite(o.rtol))) throw InputError("--rtol: must be a finite non-negative number");
    return checker::Criterion::of_tolerance(o.atol, o.rtol);
  }
  return checker::Criterion::of_class(accuracy::kDefaultAccuracyClass);
}

std::map<std::string, std::string> name_map_of(const std::vector<std::string>& maps) {
  std::map<std::string, std::string> m;
  for (const std::string& item : maps) {
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
      throw InputError("--map '" + item + "': expected GOLDEN_NAME=CANDIDATE_NAME (e.g. q_rot.bf16=query_out)");
    const std::string g = item.substr(0, eq), c = item.substr(eq + 1);
    if (!m.emplace(g, c).second) throw InputError("--map: golden output '" + g + "' is mapped twice");
  }
  return m;
}

// The candidate of a check: a tensor file, or a kernel run on the golden inputs (its header lines, its
// candidate_source, whether a plugin call failed), laid out as ropecheck's [tokens, heads, head_dim].
struct LoadedCandidate {
  std::vector<io::Tensor> tensors;
  std::vector<std::string> header;
  nlohmann::json source;
  bool kernel_failed = false;
};

LoadedCandidate load_candidate(const std::string& file, const std::string& kernel, const golden::GoldenSet& g, int threads,
                               const plugin::PluginClientOptions& plugin, checker::CandidateLayout layout) {
  LoadedCandidate c;
  if (!kernel.empty()) {
    plugin::KernelSourceOptions ko;
    ko.cpu.threads = threads;
    ko.plugin = plugin;
    plugin::KernelSource ks = plugin::open_kernel_source(kernel, ko);
    checker::KernelRun run = checker::run_kernel(*ks.kernel, g);
    c.header.push_back(fmt::format("{}: {} output tensors", ks.title, run.tensors.size()));
    for (const std::string& n : run.notes) c.header.push_back("note: " + n);
    nlohmann::json failures = nlohmann::json::array();
    for (const checker::KernelFailure& f : run.failures) {
      c.header.push_back("KERNEL FAILURE: " + f.message);
      failures.push_back({{"outputs", f.outputs}, {"message", f.message}});
    }
    c.kernel_failed = !run.failures.empty();
    c.source = std::move(ks.source);
    c.source["notes"] = run.notes;
    if (c.source.contains("failures") || c.kernel_failed) c.source["failures"] = failures;
    c.tensors = std::move(run.tensors);
  } else {
    c.tensors = read_candidate(file, g);
    c.source = {{"kind", "file"}, {"path", file}};
  }
  checker::apply_candidate_layout(c.tensors, layout);
  return c;
}

}  // namespace

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
  LoadedCandidate c = load_candidate(file, kernel, g, threads, plugin::PluginClientOptions{}, *layout);
  if (!file.empty() && run.contains("candidate") && io::sha256_file(file) != run["candidate"].value("sha256", ""))
    throw InputError("merge --diagnose: " + file + " is not the candidate the parts checked (its SHA-256 differs)");
  checker::DiagnoseOptions dopt;
  dopt.threads = threads;
  return checker::diagnose(g, c.tensors, rep, dopt, false);
}

Command add_check_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "check",
      "check a candidate (a tensor file, or a kernel plugin run on the golden inputs) against a golden set; "
      "exit 0 pass, 1 fail, 3 not tested (nothing failed, something asked for was not tested), 2 unusable input");
  auto o = std::make_shared<CheckCliOptions>();
  cmd->add_option("--golden", o->golden_dir, "golden set folder (written by `ropecheck golden`)")->required();
  auto* cand = cmd->add_option("--candidate", o->candidate,
                               "candidate tensors: .safetensors, .npz, or .npy (the tensor is named after the file stem)");
  auto* kern = cmd->add_option("--kernel", o->kernel,
                               "kernel run on the golden inputs: a plugin (shared library implementing ropecheck/kernel_abi.h, "
                               "abi/KERNEL_ABI.md), builtin:RECIPE for ropecheck's own fast CPU kernel with that "
                               "precision recipe (" + recipe_names() + "), or builtin-cuda:RECIPE for its CUDA kernel "
                               "(needs a GPU; ROPECHECK_CUDA_EMULATION=1 runs the CUDA code on the host, for tests)");
  cand->excludes(kern);
  cmd->add_option("--only", o->only,
                  "TENSORS: comma-separated golden output names (q_rot.bf16) or bases (q_rot): what is asked for "
                  "(default: every golden output; a missing one is not tested, exit 3)");
  cmd->add_option("--map", o->maps, "GOLDEN=CANDIDATE: check candidate tensor CANDIDATE against golden output GOLDEN (repeatable)");
  o->class_opt = cmd->add_option("--class", o->accuracy_class,
                                 "verdict: the accuracy class every element must satisfy (" + class_names() + "); default " +
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
  add_kernel_isolation_options(*cmd, o->plugin);

  return {cmd, [o] {
            // Options first: nothing is loaded for a command line that cannot run.
            if (o->candidate.empty() == o->kernel.empty())
              throw InputError("exactly one of --candidate FILE or --kernel LIB.so|builtin:RECIPE|builtin-cuda:RECIPE is required");
            if (!o->kernel.empty()) {  // an unknown recipe before any loading
              (void)plugin::parse_builtin_kernel(o->kernel);
              (void)plugin::parse_recipe_kernel("builtin-cuda", o->kernel);
            }
            checker::CheckOptions opt;
            opt.criterion = criterion_of(*o);
            opt.name_map = name_map_of(o->maps);
            for (std::size_t b = 0, e; b <= o->only.size(); b = e + 1) {
              e = std::min(o->only.find(',', b), o->only.size());
              if (e > b) opt.only.push_back(o->only.substr(b, e - b));
            }
            if (!o->only.empty() && opt.only.empty()) throw InputError("--only: empty list");
            std::optional<Shard> shard;
            if (!o->shard.empty()) {
              shard = parse_shard(o->shard);
              if (o->report.empty()) throw InputError("--shard needs --report PART.json (the part `ropecheck merge` joins)");
              for (const auto& [given, name] : {std::pair{!o->baseline.empty(), "--baseline"}, std::pair{!o->junit.empty(), "--junit"},
                                                std::pair{o->diagnose, "--diagnose"}})
                if (given)
                  throw InputError(std::string(name) + ": not with --shard (a part is not a verdict on the whole run; give it "
                                                        "to a run over the whole set)");
            }
            opt.worst_count = o->worst;
            opt.threads = o->threads;
            const auto started = std::chrono::steady_clock::now();
            if (!o->report.empty()) io::check_file_destination(o->report, "--report");
            if (!o->junit.empty()) io::check_file_destination(o->junit, "--junit");
            if (!(o->max_growth >= 1 && std::isfinite(o->max_growth)))
              throw InputError("--max-growth: must be a finite number >= 1, got " + fmt::format("{}", o->max_growth));
            const std::optional<checker::CandidateLayout> layout = checker::parse_candidate_layout(o->layout);
            if (!layout) throw InputError("--layout: unknown layout '" + o->layout + "' (known: thd, bshd, bhsd)");
            std::optional<checker::CheckBaseline> baseline;
            if (!o->baseline.empty()) baseline = checker::read_check_baseline(o->baseline);

            const golden::GoldenSet g = golden::load_golden_set(o->golden_dir);
            if (baseline) checker::require_same_setup(*baseline, golden::golden_fingerprint(g), opt.criterion);
            LoadedCandidate loaded = load_candidate(o->candidate, o->kernel, g, o->threads, o->plugin, *layout);
            std::vector<io::Tensor>& candidate = loaded.tensors;
            const std::vector<std::string>& header = loaded.header;
            const nlohmann::json& source = loaded.source;
            const bool kernel_failed = loaded.kernel_failed;  // a plugin call failed: its tensors are NaN, the check fails
            if (shard) {
              const checker::CheckPart part = checker::check_candidate_part(g, candidate, opt, *shard);
              // What every part of one run shares besides the set and the criterion: the candidate's identity
              // (a file's content, not its path; a kernel's source without what its run noted) and the options.
              nlohmann::json id = source;
              if (o->kernel.empty()) id = {{"kind", "file"}, {"sha256", io::sha256_file(o->candidate)}};
              id.erase("notes");
              id.erase("failures");
              const nlohmann::json run = {{"candidate", id},          {"only", opt.only}, {"map", o->maps},
                                          {"layout", o->layout},      {"kernel_failed", kernel_failed}};
              io::write_file_atomically(o->report,
                                            checker::part_to_json(part, run, source).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n",
                                            "--report");
              const checker::CheckReport prep = checker::finalize(part);
              for (const std::string& line : header) fmt::print("{}\n", line);
              if (!header.empty()) fmt::print("\n");
              fmt::print("{}", prep.summary());
              fmt::print("PART {}: tokens [{}, {}) of {}; not a verdict on the whole run: `ropecheck merge` the {} parts\n",
                         shard->text(), part.first_token, part.last_token, part.total_tokens, shard->count);
              std::fflush(stdout);
              return exit_code(kernel_failed ? Verdict::fail : prep.verdict);
            }
            const checker::CheckReport rep = checker::check_candidate(g, candidate, opt);
            std::optional<checker::Diagnosis> diagnosis;  // a failing check, or asked for; not a crashed kernel's NaNs
            if (!kernel_failed && !o->no_diagnose && (o->diagnose || rep.verdict == Verdict::fail)) {
              checker::DiagnoseOptions dopt;
              dopt.threads = o->threads;
              diagnosis = checker::diagnose(g, candidate, rep, dopt, o->diagnose);
            }
            std::optional<checker::BaselineComparison> cmp;  // before any output: a mismatch is exit 2
            if (baseline) cmp = checker::compare_with_baseline(rep, *baseline, {o->max_growth, 1.0});

            if (!o->report.empty() || !o->junit.empty()) {
              nlohmann::json j = rep.to_json();
              j["candidate_source"] = source;
              if (cmp) j["baseline"] = cmp->to_json();
              if (diagnosis) j["diagnosis"] = diagnosis->to_json();
              if (kernel_failed) {
                j["pass"] = false;
                j["verdict"] = "fail";
              }
              if (!o->report.empty())
                io::write_file_atomically(o->report, j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n",
                                              "--report");
              if (!o->junit.empty()) {
                std::vector<JunitCase> cases = check_junit_cases(j);
                if (cmp && !cmp->pass()) cases.push_back({"ropecheck.check." + rep.spec_name, "baseline", Verdict::fail,
                                                          "an error grew past --max-growth", cmp->summary()});
                const std::chrono::duration<double> took = std::chrono::steady_clock::now() - started;
                io::write_file_atomically(o->junit, junit_xml("ropecheck check", cases, took.count()), "--junit");
              }
            }
            for (const std::string& line : header) fmt::print("{}\n", line);
            if (!header.empty()) fmt::print("\n");
            fmt::print("{}", rep.summary());
            if (diagnosis) fmt::print("{}", diagnosis->summary());
            if (cmp) fmt::print("{}", cmp->summary());
            std::fflush(stdout);
            if (kernel_failed) {  // a crashed / hung / misbehaving kernel fails the check whatever else held
              if (rep.verdict != Verdict::fail) fmt::print("FAIL: the kernel failed (see KERNEL FAILURE above)\n");
              return exit_code(Verdict::fail);
            }
            if (cmp && !cmp->pass()) return exit_code(Verdict::fail);  // a regression fails whatever else held
            return exit_code(rep.verdict);
          }};
}

}  // namespace ropecheck::cli
