// GoogleTest registration of the property suite (gtest.hpp). Built as ropecheck_props_gtest so that
// ropecheck_props itself does not depend on GoogleTest.
#include "ropecheck/props/gtest.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <utility>

#include <gtest/gtest.h>

namespace ropecheck::props {

namespace {

template <class T>
std::optional<T> parse_number(std::string_view s) {
  T value{};
  const auto* end = s.data() + s.size();
  const auto [ptr, ec] = std::from_chars(s.data(), end, value);
  if (ec != std::errc{} || ptr != end) return std::nullopt;
  return value;
}

std::string shell_quote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

// The shared state of one registered test: how to make the target, what to run.
struct PropertyCase {
  std::string property;
  std::string display;  // "<suite>.<test>" as GoogleTest prints it
  TargetFactory make_target;
  SuiteOptions options;  // overrides applied, `only` = {property}
  std::optional<EncodingSpec> spec;
};

std::string this_binary() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("<test binary>") : shell_quote(exe.string());
}

// The suite's record as the `ropecheck props` line that reruns the property alone.
std::string cli_command(const ReproduceRecord& r) {
  std::ostringstream s;
  s << "ropecheck props --target " << r.target;
  if (r.spec_source == ReproduceRecord::SpecSource::preset) s << " --preset " << r.spec_name;
  if (r.spec_source == ReproduceRecord::SpecSource::given) s << " --spec SPEC.json";
  s << " --only " << r.property << " --seed " << r.seed << " --cases " << r.cases;
  if (r.max_position > 0) s << " --max-pos " << r.max_position;
  s << " --dtype " << r.dtype;
  return s.str();
}

std::string describe_failure(const PropertyCase& c, const PropertyOutcome& o, const std::string& target_name) {
  std::ostringstream msg;
  msg << "property " << o.property << " failed for target " << target_name << " (output " << o.dtype << ")";
  if (c.spec) msg << " with spec " << (c.spec->name.empty() ? std::string("(unnamed)") : c.spec->name);
  msg << "\n  statement:      " << o.statement;
  msg << "\n  cases:          " << o.cases << " run";
  msg << "\n  worst margin:   " << o.worst_margin << " (error / bound; > 1 fails)";
  if (o.failing_position) msg << "\n  position:       " << *o.failing_position;
  if (!o.counterexample.empty()) msg << "\n  counterexample: " << o.counterexample;
  for (const auto& note : o.notes) msg << "\n  note:           " << note;
  // A `ropecheck props --target NAME` command reruns it: only for registered targets.
  const auto names = target_names();
  if (std::find(names.begin(), names.end(), target_name) != names.end()) msg << "\n  ropecheck CLI:  " << cli_command(o.reproduce);
  msg << "\n  rerun this test: RC_PARAMS=\"seed=" << c.options.seed << " max_success=" << c.options.cases << "\" "
      << this_binary() << " --gtest_filter=" << shell_quote(c.display);
  return msg.str();
}

class PropertyTest : public ::testing::Test {
 public:
  explicit PropertyTest(std::shared_ptr<const PropertyCase> c) : case_(std::move(c)) {}

  void TestBody() override {
    const PropertyCase& c = *case_;
    RecordProperty("seed", std::to_string(c.options.seed));
    RecordProperty("cases", c.options.cases);
    std::unique_ptr<Target> target = c.make_target();
    ASSERT_NE(target, nullptr) << "the target factory returned null";
    const std::string target_name = target->info().name;
    SuiteReport report;
    try {
      report = run_suite(*target, c.spec ? &*c.spec : nullptr, c.options);
    } catch (const std::exception& e) {
      FAIL() << "property " << c.property << " threw: " << e.what() << "\n  rerun this test: RC_PARAMS=\"seed="
             << c.options.seed << " max_success=" << c.options.cases << "\" " << this_binary()
             << " --gtest_filter=" << shell_quote(c.display);
    }
    // One outcome per output dtype run (SuiteOptions::dtypes): the test fails if any fails, and is a
    // skip only when the target declined every case of every dtype.
    std::vector<const PropertyOutcome*> outcomes;
    for (const auto& o : report.outcomes)
      if (o.property == c.property) outcomes.push_back(&o);
    ASSERT_FALSE(outcomes.empty()) << "the suite ran no property named " << c.property;
    bool failed = false;
    for (const PropertyOutcome* o : outcomes) {
      if (o->verdict == Verdict::fail) {
        ADD_FAILURE() << describe_failure(c, *o, target_name);
        failed = true;
      }
    }
    for (const auto& n : report.dtype_notes) RecordProperty("dtype_note", n);
    if (failed) return;
    const PropertyOutcome* outcome = outcomes.front();
    for (std::size_t i = 0; i < outcome->notes.size(); ++i) {
      std::string key = "note";
      key += std::to_string(i);
      RecordProperty(key, outcome->notes[i]);
    }
    // Not tested in some dtype: a skip only when nothing applied (every dtype: not applicable) or when
    // the consumer allowed it by name; otherwise the test fails (a green run must mean tested).
    const PropertyOutcome* untested = nullptr;
    bool all_not_applicable = true;
    for (const PropertyOutcome* o : outcomes) {
      if (o->verdict == Verdict::not_tested && o->applicable && !untested) untested = o;
      all_not_applicable = all_not_applicable && o->verdict == Verdict::not_tested && !o->applicable;
    }
    if (all_not_applicable)
      GTEST_SKIP() << "property " << c.property << " " << outcome->reason;  // nothing the target could run
    if (untested) {
      const auto& allowed = c.options.allow_not_tested;
      if (std::find(allowed.begin(), allowed.end(), c.property) != allowed.end())
        GTEST_SKIP() << "property " << c.property << " not tested for target " << target_name << " (allowed by "
                     << "SuiteOptions::allow_not_tested): " << untested->reason;
      ADD_FAILURE() << "property " << c.property << " was NOT TESTED for target " << target_name << " ("
                    << untested->dtype << " output): " << untested->reason
                    << "\n  a not-tested property fails; to accept it, name it in "
                    << "SuiteOptions::allow_not_tested (e.g. .allow_not_tested = {\"" << c.property << "\"})";
      return;
    }
    RecordProperty("worst_margin", std::to_string(outcome->worst_margin));
    RecordProperty("skipped", outcome->skipped);
  }

 private:
  std::shared_ptr<const PropertyCase> case_;
};

}  // namespace

EnvironmentOverrides parse_rc_params(std::string_view rc_params) {
  EnvironmentOverrides out;
  std::size_t i = 0;
  while (i < rc_params.size()) {
    while (i < rc_params.size() && std::isspace(static_cast<unsigned char>(rc_params[i]))) ++i;
    std::size_t j = i;
    while (j < rc_params.size() && !std::isspace(static_cast<unsigned char>(rc_params[j]))) ++j;
    const std::string_view item = rc_params.substr(i, j - i);
    i = j;
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "seed") {
      if (auto v = parse_number<std::uint64_t>(value)) out.seed = *v;
    } else if (key == "max_success") {
      if (auto v = parse_number<int>(value); v && *v > 0) out.cases = *v;
    }
  }
  return out;
}

EnvironmentOverrides environment_overrides() {
  EnvironmentOverrides out;
  if (const char* rc = std::getenv("RC_PARAMS")) out = parse_rc_params(rc);
  if (!out.seed) {
    if (const char* s = std::getenv("ROPECHECK_SEED")) out.seed = parse_number<std::uint64_t>(s);
  }
  return out;
}

SuiteOptions apply_overrides(SuiteOptions options, const EnvironmentOverrides& overrides) {
  if (overrides.seed) options.seed = *overrides.seed;
  if (overrides.cases) options.cases = *overrides.cases;
  return options;
}

std::string gtest_safe_name(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (char ch : name) out += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  if (out.empty()) out.push_back('_');
  return out;
}

std::size_t register_property_tests(std::string suite_name, TargetFactory make_target, SuiteOptions options,
                                    std::vector<EncodingSpec> specs) {
  if (suite_name.empty()) throw std::invalid_argument("register_property_tests: empty suite name");
  if (!make_target) throw std::invalid_argument("register_property_tests: empty target factory");
  const std::string suite = gtest_safe_name(suite_name);
  const SuiteOptions base = apply_overrides(std::move(options), environment_overrides());
  const std::vector<std::string> wanted = base.only;  // empty: every property
  const std::vector<PropertyInfo> properties = list_properties();
  for (const auto& w : wanted) {
    bool known = false;
    for (const auto& p : properties) known = known || p.name == w;
    if (!known) throw std::invalid_argument("register_property_tests: unknown property '" + w + "' in options.only");
  }
  for (const auto& w : base.allow_not_tested) {  // a typo must not silently allow nothing
    bool known = false;
    for (const auto& p : properties) known = known || p.name == w;
    if (!known)
      throw std::invalid_argument("register_property_tests: unknown property '" + w + "' in options.allow_not_tested");
  }

  std::vector<std::optional<EncodingSpec>> spec_list;
  if (specs.empty()) spec_list.emplace_back(std::nullopt);
  for (auto& s : specs) spec_list.emplace_back(std::move(s));

  std::size_t registered = 0;
  for (const PropertyInfo& info : properties) {
    if (!wanted.empty()) {
      bool keep = false;
      for (const auto& w : wanted) keep = keep || w == info.name;
      if (!keep) continue;
    }
    for (std::size_t k = 0; k < spec_list.size(); ++k) {
      auto c = std::make_shared<PropertyCase>();
      c->property = info.name;
      c->make_target = make_target;
      c->options = base;
      c->options.only = {info.name};
      c->spec = spec_list[k];
      std::string test = gtest_safe_name(info.name);
      if (c->spec) {
        test += '/';
        test += gtest_safe_name(c->spec->name.empty() ? std::to_string(k) : c->spec->name);
      }
      c->display = suite;
      c->display += '.';
      c->display += test;
      std::shared_ptr<const PropertyCase> shared = c;
      ::testing::RegisterTest(suite.c_str(), test.c_str(), nullptr,
                              c->spec ? c->spec->name.c_str() : nullptr, __FILE__, __LINE__,
                              [shared]() -> PropertyTest* { return new PropertyTest(shared); });
      ++registered;
    }
  }
  return registered;
}

}  // namespace ropecheck::props
