// `ropecheck props`: runs the property suite (props/PROPERTIES.md) against a named target or a kernel
// plugin, prints one line per property and exits 0 (all pass), 1 (a property failed: the
// counterexample and the reproduce command are printed) or 2 (unusable input).
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "commands.hpp"
#include "ropecheck/golden/plugin_target.hpp"
#include "ropecheck/golden/tensor.hpp"
#include "ropecheck/props/mutants.hpp"
#include "ropecheck/props/registry.hpp"
#include "ropecheck/props/suite.hpp"
#include "spec_source.hpp"

namespace ropecheck::cli {
namespace {

struct PropsCliOptions {
  std::string target, kernel, report, only, accuracy_class = "fp32-angle", dtype;
  int cases = 100;
  std::uint64_t seed = 20261121;
  std::int64_t max_pos = 0;
  bool list_targets = false, list_properties = false, self_test = false;
  SpecSource source;
};

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

// `--self-test`: every mutant (props/mutants.hpp) must be caught by some property on its own spec
// and positions, and the correct hf-fp32 kernel must pass the same runs.
int run_self_test(const PropsCliOptions& o) {
  props::SelfTestOptions st;
  st.cases = o.cases;
  st.seed = o.seed;
  const props::SelfTestReport rep = props::run_self_test(st);
  fmt::print("{}", rep.table());
  fmt::print("{}\n", rep.passed() ? "self-test passed: every mutant caught, hf-fp32 never failed"
                                   : "self-test FAILED");
  return rep.passed() ? 0 : 1;
}

int run_props(const PropsCliOptions& o) {
  props::register_builtin_targets();  // hf-fp32, hf-fp32-f16out, hf-fp32-bf16out, mutant:NAME
  if (o.self_test) {
    if (!o.target.empty() || !o.kernel.empty()) throw SpecError("--self-test takes no --target / --kernel");
    if (o.cases < 1) throw SpecError("--cases must be >= 1, got " + std::to_string(o.cases));
    ::setenv("RC_PARAMS", ("seed=" + std::to_string(o.seed)).c_str(), 1);
    return run_self_test(o);
  }
  if (o.list_targets) {
    for (const auto& [name, desc] : props::target_descriptions()) fmt::print("{:<20} {}\n", name, desc);
    return 0;
  }
  if (o.list_properties) {
    for (const auto& p : props::list_properties()) fmt::print("{:<20} {}\n{:<20}   tolerance: {}\n", p.name, p.statement, "", p.tolerance);
    return 0;
  }
  if (o.target.empty() == o.kernel.empty()) throw SpecError("give exactly one of --target NAME, --kernel LIB.so");
  if (o.cases < 1) throw SpecError("--cases must be >= 1, got " + std::to_string(o.cases));
  if (o.max_pos < 0) throw SpecError("--max-pos must be >= 0, got " + std::to_string(o.max_pos));
  // --dtype: a comma-separated list narrowing the output dtypes run (default: every one the target offers
  // and implements; SuiteOptions::dtypes).
  std::vector<DType> dtypes;
  for (const std::string& name : split_commas(o.dtype)) {
    const auto dt = parse_dtype(name);
    if (!dt) throw SpecError("--dtype: unknown dtype '" + name + "' (f64, f32, f16, bf16)");
    dtypes.push_back(*dt);
  }
  if (!o.dtype.empty() && dtypes.empty()) throw SpecError("--dtype: empty list");
  std::unique_ptr<props::Target> target;
  if (!o.target.empty()) {
    target = props::make_target(o.target);
    if (!target) {
      std::string known;
      for (const auto& n : props::target_names()) known += (known.empty() ? "" : ", ") + n;
      throw SpecError("--target: unknown target '" + o.target + "' (known: " + known + ")");
    }
  } else {
    const auto cls = props::parse_accuracy_class(o.accuracy_class);
    if (!cls) throw SpecError("--class: unknown class '" + o.accuracy_class + "'");
    target = golden::make_plugin_target(o.kernel, *cls, dtypes.empty() ? DType::f32 : dtypes.front());
  }
  const bool has_spec = !o.source.preset.empty() || !o.source.hf_config.empty() || !o.source.spec_file.empty();
  std::optional<EncodingSpec> spec;
  if (has_spec) spec = o.source.load();
  props::SuiteOptions so;
  so.cases = o.cases;
  so.seed = o.seed;
  so.max_position = o.max_pos;
  so.only = split_commas(o.only);
  so.dtypes = dtypes;
  // RapidCheck prints its configuration on first use; make it show the seed actually used.
  ::setenv("RC_PARAMS", ("seed=" + std::to_string(o.seed)).c_str(), 1);
  props::SuiteReport rep;
  try {
    rep = props::run_suite(*target, spec ? &*spec : nullptr, so);
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    throw SpecError((what.rfind("unknown property", 0) == 0 ? "--only: " : "--dtype: ") + what);
  }
  fmt::print("target {} ({}), spec {}, seed {}, {} cases per property\n", rep.target,
             props::to_string(target->info().accuracy), rep.spec, rep.seed, o.cases);
  fmt::print("{}", rep.summary());
  for (const auto& n : rep.dtype_notes) fmt::print("  {}\n", n);
  std::string source_opts;
  if (!o.source.preset.empty()) source_opts = " --preset " + o.source.preset;
  if (!o.source.spec_file.empty()) source_opts = " --spec " + o.source.spec_file;
  if (!o.source.hf_config.empty()) source_opts = " --hf-config " + o.source.hf_config;
  for (auto& out : rep.outcomes) {
    if (!o.kernel.empty()) {  // the runner knows the target name, not how it was given
      const auto pos = out.reproduce.find("--target " + rep.target);
      if (pos != std::string::npos) out.reproduce.replace(pos, 9 + rep.target.size(), "--kernel " + o.kernel + " --class " + o.accuracy_class);
    }
    if (!source_opts.empty()) {
      for (const char* k : {" --preset ", " --spec "}) {
        const auto p = out.reproduce.find(k);
        if (p != std::string::npos) {
          const auto end = out.reproduce.find(" --only", p);
          out.reproduce.replace(p, end - p, source_opts);
          break;
        }
      }
    }
    for (const auto& n : out.notes)
      if (n.rfind("failing spec", 0) != 0) fmt::print("  {}: {}\n", out.property, n);
  }
  for (const auto& out : rep.outcomes) {
    if (out.passed) continue;
    fmt::print("\nFAIL {} (output {}): {}\n  counterexample: {}\n", out.property, out.dtype, out.statement, out.counterexample);
    if (out.failing_position) fmt::print("  failing position: {}\n", *out.failing_position);
    for (const auto& n : out.notes)
      if (n.rfind("failing spec", 0) == 0) fmt::print("  {}\n", n);
    fmt::print("  reproduce: {}\n", out.reproduce);
  }
  if (!o.report.empty()) {
    std::ofstream f(o.report);
    if (!f) throw SpecError("--report: cannot write " + o.report);
    f << rep.to_json().dump(2) << "\n";
  }
  fmt::print("{}\n", rep.passed() ? "all properties hold" : "a property failed");
  return rep.passed() ? 0 : 1;
}

}  // namespace

Command add_props_command(CLI::App& app) {
  auto o = std::make_shared<PropsCliOptions>();
  CLI::App* sub = app.add_subcommand("props", "run the property suite against a target or a kernel plugin");
  sub->add_option("--target", o->target, "a registered target (see --list-targets)");
  sub->add_option("--kernel", o->kernel, "a kernel plugin (golden/KERNEL_ABI.md)");
  sub->add_option("--class", o->accuracy_class, "with --kernel: the accuracy class it claims")->capture_default_str();
  sub->add_option("--dtype", o->dtype,
                  "output dtypes to run, comma-separated (f64, f32, f16, bf16); default: every one the target offers "
                  "(a kernel plugin: each it does not answer UNSUPPORTED; a named target: its own)");
  o->source.add_options(*sub);
  sub->add_option("--cases", o->cases, "cases per property")->capture_default_str();
  sub->add_option("--seed", o->seed, "RapidCheck seed")->capture_default_str();
  sub->add_option("--max-pos", o->max_pos, "largest position generated (0: 2^24)")->capture_default_str();
  sub->add_option("--report", o->report, "write the JSON report here");
  sub->add_option("--only", o->only, "comma-separated property names (see --list-properties)");
  sub->add_flag("--list-targets", o->list_targets, "list the targets and exit");
  sub->add_flag("--list-properties", o->list_properties, "list the properties and exit");
  sub->add_flag("--self-test", o->self_test,
               "run the suite on every built-in mutant (each must be caught) and on hf-fp32 (must pass)");
  return {sub, [o] { return run_props(*o); }};
}

}  // namespace ropecheck::cli
