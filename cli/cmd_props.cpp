// `ropecheck props`: runs the property suite (props/PROPERTIES.md) against a kernel (the one kernel grammar,
// plugin/kernel_name.hpp) or a registered target (the reference, hf-fp32, the self-test's mutants), prints one line per property and exits 0 (every property tested and held), 1 (a property
// failed: the counterexample and the reproduce command are printed; or, with --baseline, a margin grew
// past --max-growth), 3 (nothing failed but some property was not tested: every case declined, or
// saturated bounds; core/verdict.hpp) or 2 (unusable input, a baseline of another setup included).
#include <chrono>
#include <cmath>
#include <map>
#include <cstdlib>
#include <optional>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "commands.hpp"
#include "props_part.hpp"
#include "props_stores.hpp"
#include "junit.hpp"
#include "ropecheck/props/rapidcheck_seed.hpp"
#include "numeric_options.hpp"
#include "props_diagnosis.hpp"
#include "ropecheck/core/spec_json.hpp"
#include "ropecheck/io/atomic_output.hpp"
#include "props_targets.hpp"
#include "ropecheck/io/tensor.hpp"
#include "ropecheck/props/mutants.hpp"
#include "ropecheck/props/registry.hpp"
#include "ropecheck/props/suite.hpp"
#include "ropecheck/props/suite_baseline.hpp"
#include "spec_source.hpp"

namespace ropecheck::cli {
namespace {

struct PropsCliOptions {
  std::string junit;
  std::string target, kernel, report, only, accuracy_class, dtype, baseline;
  std::string shard;  // --shard I/N: --report is the part file
  std::string stores;  // --stores LIST: the storage properties instead of the suite (props_stores.hpp)
  double max_growth = 2;
  int cases = 100;
  std::uint64_t seed = 20261121;
  std::int64_t max_pos = 0;
  bool list_targets = false, list_properties = false, self_test = false, no_diagnose = false;
  SpecSource source;
  plugin::PluginClientOptions plugin;
};

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

// The `ropecheck props` line that reruns one outcome alone, with the target and the spec given as
// this run was given them (a kernel with its class; the preset, spec file or HF config).
std::string reproduce_command(const props::ReproduceRecord& r, const PropsCliOptions& o,
                              const std::optional<plugin::KernelName>& kernel) {
  std::string s = "ropecheck props";
  if (!kernel) s += " --target " + r.target;
  else {  // as given, unless given in an old spelling
    const std::string name = kernel->deprecation.empty() ? kernel->given : kernel->canonical();
    if (kernel->is_recipe() && o.accuracy_class.empty()) s += " --kernel " + name;  // its recipe's class per dtype
    else s += " --kernel " + name + " --class " + (o.accuracy_class.empty() ? "fp32-angle" : o.accuracy_class);
  }
  if (!o.source.hf_config.empty())
    s += " --hf-config " + o.source.hf_config;
  else if (!o.source.spec_file.empty())
    s += " --spec " + o.source.spec_file;
  else if (!o.source.preset.empty())
    s += " --preset " + o.source.preset;
  else if (r.spec_source == props::ReproduceRecord::SpecSource::preset)
    s += " --preset " + r.spec_name;
  else if (r.spec_source == props::ReproduceRecord::SpecSource::given)
    s += " --spec SPEC.json";
  s += fmt::format(" --only {} --seed {} --cases {}", r.property, r.seed, r.cases);
  if (r.max_position > 0) s += fmt::format(" --max-pos {}", r.max_position);
  return s + " --dtype " + r.dtype;
}

using props::set_rapidcheck_seed;

// `--self-test`: every mutant (props/mutants.hpp) must be caught by some property on its own spec
// and positions, and the correct hf-fp32 kernel must pass the same runs.
int run_self_test(const PropsCliOptions& o) {
  if (!o.target.empty() || !o.kernel.empty()) throw SpecError("--self-test takes no --target / --kernel");
  if (!o.shard.empty()) throw SpecError("--shard: not with --self-test (it runs whole)");
  if (o.cases < 1) throw SpecError("--cases must be >= 1, got " + std::to_string(o.cases));
  set_rapidcheck_seed(o.seed);
  props::SelfTestOptions st;
  st.cases = o.cases;
  st.seed = o.seed;
  const props::SelfTestReport rep = props::run_self_test(st);
  fmt::print("{}", rep.table());
  fmt::print("{}\n", rep.passed() ? "self-test passed: every mutant caught, hf-fp32 never failed"
                                   : "self-test FAILED");
  return rep.passed() ? 0 : 1;
}

// What the suite runs against: a kernel (made once the dtypes are known) or a registered target.
struct PropsSubject {
  std::optional<plugin::KernelName> kernel;
  std::unique_ptr<props::Target> target;
};

// The kernel, or a registered target; props' old target names for kernels (kernel:R, cuda:R and their
// -bf16out forms) are read as the kernels they name.
PropsSubject props_subject(const PropsCliOptions& o) {
  if (o.target.empty() == o.kernel.empty()) throw SpecError("give exactly one of --kernel NAME, --target NAME");
  PropsSubject subject;
  std::optional<plugin::KernelName>& kernel = subject.kernel;
  if (!o.kernel.empty()) {
    kernel = kernel_name(o.kernel, "--kernel");
  } else if (!(subject.target = props::make_target(o.target))) {
    std::string known;
    for (const auto& n : props::target_names()) known += (known.empty() ? "" : ", ") + n;
    const std::string unknown = "--target: unknown target '" + o.target + "' (known: " + known + "; kernels: --kernel NAME)";
    try {
      kernel = plugin::parse_kernel_name(o.target, "--target");
    } catch (const InputError&) {
      throw SpecError(unknown);
    }
    if (kernel->kind == plugin::KernelName::Kind::plugin) throw SpecError(unknown);
    deferred_notes().push_back("--target " + (kernel->deprecation.empty() ? "'" + o.target + "': kernels are given with --kernel now"
                                                                           : kernel->deprecation));
  }
  return subject;
}

// The options' values and combinations, and the destinations written, checked before the suite runs;
// returns --shard's shard.
std::optional<Shard> check_props_options(const PropsCliOptions& o, bool has_kernel) {
  if (!has_kernel && !o.accuracy_class.empty()) throw SpecError("--class: only with --kernel (a named target claims its own)");
  if (o.cases < 1) throw SpecError("--cases must be >= 1, got " + std::to_string(o.cases));
  if (o.max_pos < 0) throw SpecError("--max-pos must be >= 0, got " + std::to_string(o.max_pos));
  if (o.max_pos > kMaxPosition)  // every other position input stops at 2^53 too
    throw SpecError("--max-pos must be at most 2^53 = 9007199254740992, got " + std::to_string(o.max_pos));
  std::optional<Shard> shard;
  if (!o.shard.empty()) {
    shard = parse_shard(o.shard);
    if (o.report.empty()) throw SpecError("--shard needs --report PART.json (the part `ropecheck merge` joins)");
    if (!o.baseline.empty() || !o.junit.empty())
      throw SpecError(std::string(o.baseline.empty() ? "--junit" : "--baseline") +
                      ": not with --shard (a part is not a verdict on the whole run)");
  }
  if (!o.report.empty()) io::check_file_destination(o.report, "--report");  // before the suite runs
  if (!o.junit.empty()) io::check_file_destination(o.junit, "--junit");
  if (!(o.max_growth >= 1 && std::isfinite(o.max_growth)))
    throw SpecError("--max-growth: must be a finite number >= 1, got " + fmt::format("{}", o.max_growth));
  return shard;
}

// --dtype: a comma-separated list narrowing the output dtypes run (default: every one the target offers
// and implements; SuiteOptions::dtypes).
std::vector<DType> props_dtypes(const PropsCliOptions& o, const std::optional<plugin::KernelName>& kernel) {
  std::vector<DType> dtypes;
  for (const std::string& name : split_commas(o.dtype)) {
    const auto dt = parse_dtype(name);
    if (!dt) throw SpecError("--dtype: unknown dtype '" + name + "' (f64, f32, f16, bf16)");
    dtypes.push_back(*dt);
  }
  if (!o.dtype.empty() && dtypes.empty()) throw SpecError("--dtype: empty list");
  if (kernel && kernel->storage && dtypes.empty()) dtypes = {*kernel->storage};  // kernel:R-bf16out: bf16 only
  return dtypes;
}

// Before the run: a baseline of another setup is refused without running anything.
void require_baseline_setup(const props::SuiteBaseline& baseline, const props::Target& target,
                            const std::optional<EncodingSpec>& spec, const props::SuiteOptions& so) {
  std::vector<std::string> names = so.only;
  if (names.empty())
    for (const auto& p : props::list_properties()) names.push_back(p.name);
  props::require_same_setup(baseline, props::suite_header(target, spec ? &*spec : nullptr, so), names);
}

// The suite; an unknown --only property or an unusable --dtype is unusable input (exit 2).
props::SuiteReport run_props_suite(props::Target& target, const std::optional<EncodingSpec>& spec,
                                   const props::SuiteOptions& so) {
  try {
    return props::run_suite(target, spec ? &*spec : nullptr, so);
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    throw SpecError((what.rfind("unknown property", 0) == 0 ? "--only: " : "--dtype: ") + what);
  }
}

// The header line, one line per property and the notes (a failing spec's note is printed with its
// failure).
void print_props_summary(const props::SuiteReport& rep, const props::Target& target, int cases) {
  fmt::print("target {} ({}), spec {}, seed {}, {} cases per property\n", rep.target,
             accuracy::to_string(target.info().accuracy), rep.spec, rep.seed, cases);
  fmt::print("{}", rep.summary());
  for (const auto& n : rep.dtype_notes) fmt::print("  {}\n", n);
  for (const auto& out : rep.outcomes) {
    for (const auto& n : out.notes)
      if (n.rfind("failing spec", 0) != 0) fmt::print("  {}: {}\n", out.property, n);
  }
}

// A failed property: its counterexample, failing position and spec, and the command that reruns it.
// Returns the failing spec's JSON ("" when the note gives none).
std::string print_failed_outcome(const props::PropertyOutcome& out, const PropsCliOptions& o,
                                 const std::optional<plugin::KernelName>& kernel) {
  fmt::print("\nFAIL {} (output {}): {}\n  counterexample: {}\n", out.property, out.dtype, out.statement, out.counterexample);
  if (out.failing_position) fmt::print("  failing position: {}\n", *out.failing_position);
  std::string spec_json;
  for (const auto& n : out.notes)
    if (n.rfind("failing spec", 0) == 0) {
      fmt::print("  {}\n", n);
      spec_json = n.substr(std::string("failing spec: ").size());
    }
  fmt::print("  reproduce: {}\n", reproduce_command(out.reproduce, o, kernel));
  return spec_json;
}

// The class the outcome in output dtype `d` was judged with.
accuracy::AccuracyClass claimed_class(props::Target& target, DType d) {
  const std::unique_ptr<props::Target> t = d == target.info().dtype ? nullptr : target.with_output(d);
  return t ? t->info().accuracy : target.info().accuracy;
}

// Every failed property printed; with `diag_kernel`, its counterexample replayed as a golden-set check
// and diagnosed (props_diagnosis.hpp): each distinct (spec, position, dtype) once, at most three per
// run. Returns outcome index -> its "diagnosis".
std::map<std::size_t, nlohmann::json> report_failures(const props::SuiteReport& rep, const PropsCliOptions& o,
                                                      const std::optional<plugin::KernelName>& kernel,
                                                      const std::optional<plugin::KernelName>& diag_kernel,
                                                      props::Target& target, const std::optional<EncodingSpec>& spec) {
  std::map<std::size_t, nlohmann::json> diagnoses;  // outcome index -> its "diagnosis"
  std::map<std::string, std::string> diagnosed;       // (spec, position, dtype) -> conclusion printed
  for (std::size_t i = 0; i < rep.outcomes.size(); ++i) {
    const auto& out = rep.outcomes[i];
    if (out.verdict != ropecheck::Verdict::fail) continue;
    const std::string spec_json = print_failed_outcome(out, o, kernel);
    if (out.kernel_failed && diag_kernel) {  // replaying a crash or a hang only costs it again (a timeout each)
      fmt::print("  diagnosis: none (the kernel failed; its outputs are no values to diagnose)\n");
      continue;
    }
    if (!diag_kernel || !out.failing_position || (spec_json.empty() && !spec)) continue;
    const std::string key = spec_json + "@" + std::to_string(*out.failing_position) + "@" + out.dtype;
    if (const auto it = diagnosed.find(key); it != diagnosed.end()) {
      fmt::print("  diagnosis: as above ({})\n", it->second);
      continue;
    }
    if (diagnosed.size() >= 3) continue;
    const EncodingSpec failing = spec_json.empty() ? *spec : spec_from_json(nlohmann::json::parse(spec_json));
    const std::optional<CounterexampleDiagnosis> d =
        diagnose_counterexample(*diag_kernel, failing, *out.failing_position, *parse_dtype(out.dtype),
                                claimed_class(target, *parse_dtype(out.dtype)), o.plugin);
    if (!d) continue;
    fmt::print("  counterexample replayed as a check of its spec at positions {} (same kernel, class {}): {}\n  {}",
               d->positions, accuracy::to_string(claimed_class(target, *parse_dtype(out.dtype))),
               to_string(d->check.verdict), d->diagnosis.summary().substr(1));
    diagnosed[key] = d->diagnosis.conclusion;
    nlohmann::json dj = d->diagnosis.to_json();
    dj["positions"] = d->positions;
    dj["check_verdict"] = std::string(to_string(d->check.verdict));
    diagnoses[i] = std::move(dj);
  }
  return diagnoses;
}

// --report: the JSON report with the diagnoses and the baseline comparison, as a part with --shard.
// Atomic: a full disk or a kill never leaves a partial report.
void write_props_report(const PropsCliOptions& o, const props::SuiteReport& rep,
                        const std::optional<plugin::KernelName>& kernel,
                        std::map<std::size_t, nlohmann::json> diagnoses,
                        const std::optional<props::SuiteComparison>& cmp, const std::optional<Shard>& shard) {
  nlohmann::json j = rep.to_json([&](const props::ReproduceRecord& r) { return reproduce_command(r, o, kernel); });
  for (auto& [i, dj] : diagnoses) j["properties"][i]["diagnosis"] = std::move(dj);
  if (cmp) j["baseline"] = cmp->to_json();
  if (shard) j = props_part_json(j, *shard, rep.verdict());
  io::write_file_atomically(o.report, j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n",
                                "--report");
}

// --junit: one testcase per property and dtype, and one for the baseline comparison when it failed.
void write_props_junit(const PropsCliOptions& o, const props::SuiteReport& rep,
                       const std::optional<plugin::KernelName>& kernel,
                       const std::optional<props::SuiteComparison>& cmp,
                       std::chrono::steady_clock::time_point started) {
  const nlohmann::json j = rep.to_json([&](const props::ReproduceRecord& r) { return reproduce_command(r, o, kernel); });
  std::vector<JunitCase> cases = props_junit_cases(j);
  if (cmp && !cmp->pass())
    cases.push_back({"ropecheck.props." + rep.target, "baseline", Verdict::fail, "a margin grew past --max-growth", cmp->summary()});
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - started;
  io::write_file_atomically(o.junit, junit_xml("ropecheck props", cases, took.count()), "--junit");
}

// The run's last lines: a part's note, then the verdict `v` (and which properties were not tested).
void print_props_verdict(const props::SuiteReport& rep, Verdict v, const std::optional<Shard>& shard) {
  if (shard) fmt::print("PART {} of the properties: not a verdict on the whole run: `ropecheck merge` the {} parts\n",
                        shard->text(), shard->count);
  if (v == Verdict::pass) {
    fmt::print("all properties hold\n");
  } else if (v == Verdict::fail) {
    fmt::print("a property failed\n");
  } else {
    std::string names;
    for (const auto& out : rep.outcomes)
      if (rep.counts(out) && out.verdict == Verdict::not_tested &&
          (", " + names + ", ").find(", " + out.property + ", ") == std::string::npos)  // once, whatever the dtypes
        names += (names.empty() ? "" : ", ") + out.property;
    const std::optional<std::int64_t> sat = rep.saturated_from();
    fmt::print("NOT TESTED: no property failed, but these were not tested: {}{}\n", names,
               sat ? fmt::format("; class {} not tested from position {} (saturated bounds)",
                                 accuracy::to_string(rep.accuracy_class), *sat)
                   : std::string());
  }
}

// --stores: the options the storage properties read; the first suite-only one given is refused.
PropsStoresArgs stores_args(const PropsCliOptions& o) {
  PropsStoresArgs a{o.stores, o.kernel, o.target, o.only, o.report, o.cases, o.seed, o.max_pos, "", &o.source};
  const std::pair<bool, const char*> suite_only[] = {{!o.dtype.empty(), "--dtype"}, {!o.accuracy_class.empty(), "--class"},
                                                     {!o.baseline.empty(), "--baseline"}, {!o.shard.empty(), "--shard"},
                                                     {!o.junit.empty(), "--junit"}, {o.self_test, "--self-test"}};
  for (const auto& [given, name] : suite_only)
    if (given && a.incompatible.empty()) a.incompatible = name;
  return a;
}

int run_props(const PropsCliOptions& o) {
  const auto started = std::chrono::steady_clock::now();
  props::register_builtin_targets();  // hf-fp32, hf-fp32-f16out, hf-fp32-bf16out, mutant:NAME
  if (o.self_test) return run_self_test(o);
  if (o.list_targets) {
    for (const auto& [name, desc] : props::target_descriptions()) fmt::print("{:<20} {}\n", name, desc);
    return 0;
  }
  if (o.list_properties) {
    for (const auto& p : props::list_properties()) fmt::print("{:<20} {}\n{:<20}   tolerance: {}\n", p.name, p.statement, "", p.tolerance);
    return 0;
  }
  if (!o.stores.empty()) return run_props_stores(stores_args(o));
  PropsSubject subject = props_subject(o);
  const std::optional<plugin::KernelName>& kernel = subject.kernel;
  std::unique_ptr<props::Target>& target = subject.target;
  const std::optional<Shard> shard = check_props_options(o, kernel.has_value());
  std::optional<props::SuiteBaseline> baseline;
  if (!o.baseline.empty()) baseline = props::read_suite_baseline(o.baseline);
  const std::vector<DType> dtypes = props_dtypes(o, kernel);
  if (kernel) {
    std::optional<accuracy::AccuracyClass> cls;
    if (!o.accuracy_class.empty() && !(cls = accuracy::parse_accuracy_class(o.accuracy_class)))
      throw SpecError("--class: unknown class '" + o.accuracy_class + "'");
    target = kernel_target(*kernel, cls, dtypes.empty() ? DType::f32 : dtypes.front(), o.plugin);
  }
  // Where a CUDA kernel runs (a device, or the host emulation), so that nobody mistakes one for the other.
  if (kernel && kernel->kind == plugin::KernelName::Kind::cuda) fmt::print("{}\n", target->info().description);
  const bool has_spec = !o.source.preset.empty() || !o.source.hf_config.empty() || !o.source.spec_file.empty();
  std::optional<EncodingSpec> spec;
  if (has_spec) spec = o.source.load();
  props::SuiteOptions so;
  so.cases = o.cases;
  so.seed = o.seed;
  so.max_position = o.max_pos;
  so.only = split_commas(o.only);
  so.dtypes = dtypes;
  if (shard) so.shard = *shard;
  set_rapidcheck_seed(o.seed);
  if (baseline) require_baseline_setup(*baseline, *target, spec, so);
  const props::SuiteReport rep = run_props_suite(*target, spec, so);
  std::optional<props::SuiteComparison> cmp;  // before any output: a baseline of another setup is exit 2
  if (baseline) cmp = props::compare_with_baseline(rep, *baseline, o.max_growth);
  print_props_summary(rep, *target, o.cases);
  // A part is not diagnosed: the run's three diagnoses are chosen across every property (as a check part).
  const std::optional<plugin::KernelName> diag_kernel = o.no_diagnose || shard ? std::nullopt : kernel;
  std::map<std::size_t, nlohmann::json> diagnoses = report_failures(rep, o, kernel, diag_kernel, *target, spec);
  if (!o.report.empty()) write_props_report(o, rep, kernel, std::move(diagnoses), cmp, shard);
  if (!o.junit.empty()) write_props_junit(o, rep, kernel, cmp, started);
  const Verdict v = rep.verdict();
  print_props_verdict(rep, v, shard);
  if (cmp) fmt::print("{}", cmp->summary());
  if (cmp && !cmp->pass()) return exit_code(Verdict::fail);  // a regression fails whatever else held
  return exit_code(v);
}

}  // namespace

Command add_props_command(CLI::App& app) {
  auto o = std::make_shared<PropsCliOptions>();
  CLI::App* sub = app.add_subcommand("props", "run the property suite against a target or a kernel plugin");
  sub->add_option("--kernel", o->kernel, std::string("the kernel to test: ") + kKernelGrammar);
  sub->add_option("--target", o->target,
                  "a registered target instead of a kernel: the exact reference, hf-fp32, a self-test mutant (see "
                  "--list-targets)");
  sub->add_option("--class", o->accuracy_class,
                  "with --kernel: the accuracy class it claims (default: for builtin: and cuda: the class the error "
                  "model gives the recipe in each output dtype; for a plugin fp32-angle)");
  sub->add_option("--dtype", o->dtype,
                  "output dtypes to run, comma-separated (f64, f32, f16, bf16); default: every one the target offers "
                  "(a kernel plugin: each it does not answer UNSUPPORTED; a named target: its own)");
  o->source.add_options(*sub);
  sub->add_option("--cases", o->cases, "cases per property")->capture_default_str();
  sub->add_option("--seed", o->seed, "RapidCheck seed")->capture_default_str()->check(unsigned_64());
  sub->add_option("--max-pos", o->max_pos, "largest position generated (0: 2^24)")->capture_default_str();
  sub->add_option("--report", o->report, "write the JSON report here");
  sub->add_option("--shard", o->shard,
                  "I/N: run only shard I of N of the properties (split in N contiguous ranges, every output dtype) and "
                  "write a part to --report; `ropecheck merge` joins the N parts into the report one run writes "
                  "(props/PROPERTIES.md, \"Sharded runs\")");
  sub->add_option("--junit", o->junit,
                  "write JUnit XML for CI systems here: one testcase per property and dtype, not tested = skipped");
  sub->add_option("--baseline", o->baseline,
                  "an earlier --report of the same spec, seed, cases, class and dtype: fail (exit 1) when a property's "
                  "worst or RMS margin grew by more than --max-growth (props/PROPERTIES.md)");
  sub->add_option("--max-growth", o->max_growth, "with --baseline: the growth factor allowed (>= 1)")
      ->capture_default_str()
      ->needs("--baseline");
  add_kernel_isolation_options(*sub, o->plugin);
  sub->add_flag("--no-diagnose", o->no_diagnose,
                "skip the diagnosis of failing counterexamples (replayed as a golden-set check of the same kernel; "
                "checker/DIAGNOSIS.md)");
  sub->add_option("--only", o->only, "comma-separated property names (see --list-properties)");
  sub->add_option("--stores", o->stores,
                  "run the storage properties store_shift and norm_invariance of --kernel builtin:RECIPE instead of the "
                  "suite, storing into each item of this list (golden --stores' items: e4m3fn, e5m2, q8_0, q4_0, int4gG, "
                  "int8gG; props/PROPERTIES.md, \"Storage properties\"); spec default llama-3.1-8b, positions up to 2^20");
  sub->add_flag("--list-targets", o->list_targets, "list the targets and exit");
  sub->add_flag("--list-properties", o->list_properties, "list the properties and exit");
  sub->add_flag("--self-test", o->self_test,
               "run the suite on every built-in mutant (each must be caught) and on hf-fp32 (must pass)");
  return {sub, [o] { return run_props(*o); }};
}

}  // namespace ropecheck::cli
