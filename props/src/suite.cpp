// The runner: each property through RapidCheck (explicit seed and case count, shrinking on), the
// report and its JSON.
#include "ropecheck/props/suite.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <map>
#include <stdexcept>

#include <rapidcheck.h>

#include "properties.hpp"
#include "ropecheck/kut/kernel_under_test.hpp"
#include "ropecheck/reference/presets.hpp"

namespace ropecheck::props {
namespace {

class QuietListener final : public rc::detail::TestListener {
 public:
  void onTestCaseFinished(const rc::detail::CaseDescription&) override {}
  void onShrinkTried(const rc::detail::CaseDescription&, bool) override {}
  void onTestFinished(const rc::detail::TestMetadata&, const rc::detail::TestResult&) override {}
};

const detail::PropertyDef& find_def(const std::string& name) {
  for (const auto& d : detail::property_defs())
    if (name == d.name) return d;
  std::string known;
  for (const auto& d : detail::property_defs()) known += std::string(known.empty() ? "" : ", ") + d.name;
  throw std::invalid_argument("unknown property '" + name + "' (known: " + known + ")");
}

std::string fmt_margin(double m) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", m);
  return buf;
}

bool is_preset(const std::string& name) {
  for (const auto& n : preset_names())
    if (n == name) return true;
  return false;
}

}  // namespace

std::vector<PropertyInfo> list_properties() {
  std::vector<PropertyInfo> out;
  for (const auto& d : detail::property_defs()) out.push_back({d.name, d.statement, d.tolerance});
  return out;
}

double run_property_case(const std::string& property, Target& target, const EncodingSpec* spec, std::int64_t max_position) {
  const detail::PropertyDef& def = find_def(property);
  detail::Ctx ctx{target, spec, max_position};
  const detail::CurrentCtx current(ctx);
  def.run(ctx);
  return ctx.worst;
}

SuiteReport suite_header(const Target& target, const EncodingSpec* spec, const SuiteOptions& options) {
  SuiteReport report;
  report.target = target.info().name;
  report.spec = spec ? (spec->name.empty() ? std::string("spec") : spec->name) : std::string("generated");
  report.seed = options.seed;
  report.cases = options.cases;
  report.max_position = options.max_position;
  report.accuracy_class = target.info().accuracy;
  report.dtype = target.info().dtype;
  return report;
}

namespace {

// The outcome's verdict and reason from what its cases did: failed, not applicable, declined,
// saturated, or passed.
void set_verdict(PropertyOutcome& o, const Target& target, const std::string& name, const EncodingSpec* spec,
                 const SuiteOptions& options, int declined) {
    if (!o.passed) {
      o.verdict = Verdict::fail;
      o.reason = o.counterexample;
    } else if (o.skipped >= o.cases && declined == 0) {
      o.verdict = Verdict::not_tested;
      o.applicable = false;
      o.asked = !options.only.empty();
      o.reason = "does not apply to " + (spec ? "this spec" : std::string("the generated specs")) + " (" +
                 std::to_string(o.skipped) + " of " + std::to_string(o.cases) + " cases skipped)";
    } else if (o.skipped >= o.cases) {
      o.verdict = Verdict::not_tested;
      o.reason = name == "inverse" && !target.info().negative_positions
                     ? "the target does not accept negative positions, which inverse needs (" +
                           std::to_string(o.skipped) + " of " + std::to_string(o.cases) + " cases skipped)"
                     : "the target declined every case (" + std::to_string(o.skipped) + " of " +
                           std::to_string(o.cases) + " skipped: it does not implement the spec)";
    } else if (o.saturated > 0) {
      o.verdict = Verdict::not_tested;
      o.reason = std::to_string(o.saturated) + " of " + std::to_string(o.bounds) + " " +
                 std::string(to_string(target.info().accuracy)) +
                 " bounds saturated (bound >= the pair's magnitude: an all-zero output passes) from position " +
                 std::to_string(*o.first_saturated_position) + "; " + std::string(kSaturationAdvice) +
                 ", or --max-pos below that position";
    }
}

// Every property in `defs` against one target (one output dtype), appended to report.outcomes.
// spec_reports: the kernel-independent notes per property, shared across output dtypes.
void run_properties(Target& target, const EncodingSpec* spec, const SuiteOptions& options,
                    const std::vector<const detail::PropertyDef*>& defs, SuiteReport& report,
                    std::map<std::string, std::vector<std::string>>& spec_reports) {
  const std::string dtype(to_string(target.info().dtype));
  for (const detail::PropertyDef* def : defs) {
    detail::Ctx ctx{target, spec, options.max_position};
    MarginStats margins;
    const detail::CurrentCtx current(ctx);
    rc::detail::TestParams params;
    params.seed = options.seed;
    params.maxSuccess = options.cases;
    params.maxSize = 100;
    params.maxDiscardRatio = 10;
    params.disableShrinking = !options.shrink;
    QuietListener listener;
    // RapidCheck turns an exception into a failed case; a run that cannot go on (the kernel's host
    // killed by someone else, again and again) is no counterexample: it leaves the suite (exit 2).
    std::exception_ptr interrupted;
    // Counting stops at the first failure, before shrinking: wrap run() so the failing case is the last counted.
    const auto result = rc::detail::checkProperty(
        rc::detail::toProperty([&] {
          const bool was = ctx.counting;
          // This case's margin: ctx.worst restarts at 0 for the case and takes the running max back after.
          const double worst_before = ctx.worst;
          const int skipped_before = ctx.skipped;
          ctx.worst = 0;
          auto end_case = [&] {
            if (was && ctx.skipped == skipped_before) margins.add(ctx.worst);
            ctx.worst = std::max(worst_before, ctx.worst);
          };
          try {
            if (interrupted) std::rethrow_exception(interrupted);
            if (was) ++ctx.cases;
            def->run(ctx);
          } catch (const kut::KernelRunInterrupted&) {
            if (!interrupted) interrupted = std::current_exception();
            ctx.counting = false;
            throw;
          } catch (...) {
            end_case();
            ctx.counting = false;
            throw;
          }
          end_case();
        }),
        rc::detail::TestMetadata{def->name, def->statement}, params, listener);

    if (interrupted) std::rethrow_exception(interrupted);
    PropertyOutcome o;
    o.property = def->name;
    o.statement = def->statement;
    o.cases = ctx.cases;
    o.skipped = ctx.skipped;
    o.worst_margin = ctx.worst;
    o.margins = margins;
    o.dtype = dtype;
    rc::detail::FailureResult failure;
    rc::detail::GaveUpResult gave_up;
    rc::detail::Error error;
    if (result.match(failure)) {
      o.passed = false;
      o.counterexample = ctx.fail_desc.empty() ? failure.description : ctx.fail_desc;
      o.failing_position = ctx.fail_position;
      if (!ctx.fail_spec_json.empty()) o.notes.push_back("failing spec: " + ctx.fail_spec_json);
    } else if (result.match(gave_up)) {
      o.passed = false;
      o.counterexample = "gave up: " + gave_up.description;
    } else if (result.match(error)) {
      o.passed = false;
      o.counterexample = "error: " + error.description;
    }
    o.declined = ctx.declined;
    o.bounds = ctx.bounds;
    o.saturated = ctx.saturated;
    o.first_saturated_position = ctx.first_saturated;
    set_verdict(o, target, def->name, spec, options, ctx.declined);
    o.reproduce.target = report.target;
    o.reproduce.property = def->name;
    if (spec) {
      o.reproduce.spec_source =
          is_preset(spec->name) ? ReproduceRecord::SpecSource::preset : ReproduceRecord::SpecSource::given;
      o.reproduce.spec_name = spec->name;
    }
    o.reproduce.seed = options.seed;
    o.reproduce.cases = options.cases;
    o.reproduce.max_position = options.max_position > 0 ? options.max_position : 0;
    o.reproduce.dtype = dtype;
    if (std::string(def->name) == "uniqueness") {
      if (ctx.min_separation >= 0) o.notes.push_back("smallest row separation seen (max-norm): " + fmt_margin(ctx.min_separation));
      if (ctx.first_collision)
        o.notes.push_back("first colliding pair seen: positions " + std::to_string(ctx.first_collision->first) + " and " +
                          std::to_string(ctx.first_collision->second));
      if (spec)
        for (auto& n : detail::collision_scan(target, *spec, options.max_position)) o.notes.push_back(n);
    }
    if (spec && (std::string(def->name) == "cosine_sum" || std::string(def->name) == "roformer_decay")) {
      // The spec's own reports (no kernel involved): computed once, shown under every output dtype.
      auto it = spec_reports.find(def->name);
      if (it == spec_reports.end())
        it = spec_reports.emplace(def->name, std::string(def->name) == "cosine_sum"
                                                 ? detail::cosine_sum_report(*spec, options.max_position)
                                                 : detail::roformer_envelope_report(*spec)).first;
      for (const auto& n : it->second) o.notes.push_back(n);
    }
    for (const auto& n : ctx.notes) o.notes.push_back(n);
    const Target::Failures f = target.take_failures();
    if (o.verdict == Verdict::not_tested && o.skipped >= o.cases && ctx.declined > 0 && !f.declined.empty())
      o.reason += ": " + f.declined;  // the kernel's own reason, as check and drift --compare give it
    if (f.failed > 0) {  // a kernel plugin crashed, hung, ...
      o.passed = false;
      o.counterexample = "kernel failure: " + f.first;
      o.kernel_failed = true;
      o.verdict = Verdict::fail;
      o.reason = o.counterexample;
      o.notes.push_back("kernel calls lost: " + std::to_string(f.failed) + " of " + std::to_string(f.calls));
    }
    report.outcomes.push_back(std::move(o));
  }
}

// Whether the target implements anything at all in its output dtype: one small call on the spec (or,
// with generated specs, on a few presets of both families). A kernel plugin answers UNSUPPORTED for a
// dtype it does not have.
bool probe(Target& t, const EncodingSpec* spec) {
  std::vector<EncodingSpec> specs;
  if (spec)
    specs.push_back(*spec);
  else
    for (const char* n : {"llama-2-7b", "gpt-j-6b", "llama-3.1-8b"}) specs.push_back(load_preset(n));
  for (const EncodingSpec& s : specs) {
    if (s.family == Family::rope) {
      const std::vector<Position> pos = {Position::uniform(0), Position::uniform(1)};
      const std::vector<double> x(2 * static_cast<std::size_t>(s.rope.head_dim), 1.0);
      std::vector<double> out(x.size());
      if (t.rope_apply_input("q", s, pos, 1, x, out)) return true;
    } else {
      const std::vector<std::int64_t> pos = {0, 1};
      std::vector<double> out(2 * static_cast<std::size_t>(s.sinusoidal.d_model));
      if (t.sinusoidal(s, pos, out)) return true;
    }
  }
  return false;
}

}  // namespace

SuiteReport run_suite(Target& target, const EncodingSpec* spec, const SuiteOptions& options) {
  std::vector<const detail::PropertyDef*> defs;
  if (options.only.empty())
    for (const auto& d : detail::property_defs()) defs.push_back(&d);
  else
    for (const auto& n : options.only) defs.push_back(&find_def(n));
  const auto [first, last] = shard_range(static_cast<std::int64_t>(defs.size()), options.shard, "properties");
  defs = {defs.begin() + first, defs.begin() + last};

  SuiteReport report = suite_header(target, spec, options);
  std::map<std::string, std::vector<std::string>> spec_reports;
  const DType own = target.info().dtype;
  const bool given = !options.dtypes.empty();
  std::vector<DType> wanted = options.dtypes;
  if (!given) {
    wanted = {own};
    for (DType d : {DType::f32, DType::bf16, DType::f16, DType::f64})
      if (d != own) wanted.push_back(d);
  }
  for (std::size_t i = 0; i < wanted.size(); ++i) {
    const DType d = wanted[i];
    if (std::find(wanted.begin(), wanted.begin() + static_cast<std::ptrdiff_t>(i), d) != wanted.begin() + static_cast<std::ptrdiff_t>(i))
      continue;  // listed twice
    if (d == own) {
      report.dtypes.emplace_back(to_string(d));
      run_properties(target, spec, options, defs, report, spec_reports);
      continue;
    }
    std::unique_ptr<Target> other = target.with_output(d);
    if (!other) {
      if (given)
        throw std::invalid_argument("target " + target.info().name + " has no " + std::string(to_string(d)) +
                                    " output (its output dtype is " + std::string(to_string(own)) + ")");
      continue;  // not offered: nothing to report
    }
    if (!given && !probe(*other, spec)) {
      report.dtype_notes.push_back("output " + std::string(to_string(d)) +
                                   ": the target answered unsupported on the probe calls; not run");
      continue;
    }
    report.dtypes.emplace_back(to_string(d));
    if (other->info().accuracy != target.info().accuracy)  // a kernel whose claim depends on the dtype
      report.dtype_notes.push_back("output " + std::string(to_string(d)) + ": judged with class " +
                                   std::string(to_string(other->info().accuracy)) + " (the target's claim for that dtype)");
    run_properties(*other, spec, options, defs, report, spec_reports);
  }
  return report;
}

bool SuiteReport::passed() const {
  for (const auto& o : outcomes)
    if (!o.passed) return false;
  return true;
}

bool SuiteReport::counts(const PropertyOutcome& o) const {
  if (!o.asked) return false;
  if (o.applicable) return true;
  for (const auto& other : outcomes)
    if (other.property == o.property && other.applicable) return false;  // applied in another dtype
  return true;
}

Verdict SuiteReport::verdict() const {
  Verdict v = Verdict::pass;
  for (const auto& o : outcomes)
    if (counts(o)) v = combine(v, o.verdict);
  return v;
}

std::optional<std::int64_t> SuiteReport::saturated_from() const {
  std::optional<std::int64_t> first;
  for (const auto& o : outcomes)
    if (counts(o) && o.verdict == Verdict::not_tested && o.saturated > 0 && o.first_saturated_position &&
        (!first || std::llabs(*o.first_saturated_position) < std::llabs(*first)))
      first = o.first_saturated_position;
  return first;
}

nlohmann::json SuiteReport::to_json(const std::function<std::string(const ReproduceRecord&)>& reproduce_line) const {
  nlohmann::json j;
  j["target"] = target;
  j["spec"] = spec;
  j["seed"] = seed;
  j["format"] = "ropecheck-props-report";
  j["format_version"] = 1;
  j["cases"] = cases;
  j["max_position"] = max_position;
  j["class"] = std::string(to_string(accuracy_class));
  j["dtype"] = std::string(to_string(dtype));
  j["passed"] = verdict() == Verdict::pass;  // never true when something was not tested
  j["verdict"] = std::string(to_string(verdict()));
  j["dtypes"] = dtypes;
  j["dtype_notes"] = dtype_notes;
  const std::optional<std::int64_t> sat = saturated_from();
  j["saturated_from"] = sat ? nlohmann::json(*sat) : nlohmann::json(nullptr);
  auto& arr = j["properties"] = nlohmann::json::array();
  for (const auto& o : outcomes) {
    nlohmann::json p;
    p["name"] = o.property;
    p["statement"] = o.statement;
    p["cases"] = o.cases;
    p["skipped"] = o.skipped;
    p["worst_margin"] = std::isfinite(o.worst_margin) ? nlohmann::json(o.worst_margin) : nlohmann::json("inf");
    p["rms_margin"] = std::isfinite(o.margins.rms()) ? nlohmann::json(o.margins.rms()) : nlohmann::json("inf");
    p["margin_cases"] = o.margins.cases;
    p["passed"] = o.verdict == Verdict::pass;
    p["verdict"] = std::string(to_string(o.verdict));
    p["reason"] = o.reason;
    p["saturated"] = o.saturated;
    p["bounds"] = o.bounds;
    p["declined"] = o.declined;
    p["applicable"] = o.applicable;
    p["first_saturated_position"] = o.first_saturated_position ? nlohmann::json(*o.first_saturated_position) : nlohmann::json(nullptr);
    p["dtype"] = o.dtype;
    if (!o.passed) {
      p["counterexample"] = o.counterexample;
      if (reproduce_line) p["reproduce"] = reproduce_line(o.reproduce);
      p["failing_position"] = o.failing_position ? nlohmann::json(*o.failing_position) : nlohmann::json(nullptr);
    }
    p["notes"] = o.notes;
    arr.push_back(std::move(p));
  }
  return j;
}

std::string SuiteReport::summary() const {
  std::string out;
  std::size_t w = 8;
  for (const auto& o : outcomes) w = std::max(w, o.property.size());
  std::string last_dtype;
  for (const auto& o : outcomes) {
    if (dtypes.size() > 1 && o.dtype != last_dtype) out += "output " + o.dtype + ":\n";
    last_dtype = o.dtype;
    char line[256];
    const char* verdict = o.verdict == Verdict::fail
                              ? "FAIL"
                              : (o.verdict == Verdict::pass ? "pass" : (o.applicable ? "NOT TESTED" : "not applicable"));
    std::snprintf(line, sizeof line, "%-*s  cases %4d (skipped %4d)  worst margin %-9s  rms %-9s  %s\n", static_cast<int>(w),
                  o.property.c_str(), o.cases, o.skipped, fmt_margin(o.worst_margin).c_str(),
                  fmt_margin(o.margins.rms()).c_str(), verdict);
    out += line;
    if (o.verdict == Verdict::not_tested && o.applicable) out += "    not tested: " + o.reason + "\n";
  }
  return out;
}

}  // namespace ropecheck::props
