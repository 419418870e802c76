// Tests for the checker's error statistics (error_stats.hpp) and the baseline comparison
// (baseline.hpp, `ropecheck check --baseline`).
//
// Error model of the tests: ropecheck's `accurate` kernel stores f32 outputs within about one f32 ulp
// of the truth (f32-reduced, accuracy/ERROR_MODEL.md); a candidate whose every error is 10x accurate's
// (y + 10 (c - y), rounded once to f32) stays far under f16-table's bound (3 u_f16 = 24576 u_32 of
// storage allowance alone), so the class verdict cannot see it; its RMS error in u_dt grows ~10x against
// a floor of 1 u, which the baseline comparison must report for every f32 tensor and never for the f64
// tensors that did not change.
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "ropecheck/checker/baseline.hpp"
#include "ropecheck/checker/kernel_run.hpp"
#include "ropecheck/kut/builtin_sources.hpp"
#include "ropecheck/checker/checker.hpp"
#include "ropecheck/checker/error_stats.hpp"
#include "ropecheck/golden/golden_set.hpp"
#include "ropecheck/golden/golden_writer.hpp"
#include "ropecheck/reference/presets.hpp"

namespace ropecheck::golden {
using namespace ropecheck::io;
using namespace ropecheck::checker;
namespace {

namespace fs = std::filesystem;
using accuracy::AccuracyClass;

struct TempRoot {
  fs::path path;
  TempRoot() : path(fs::temp_directory_path() / ("ropecheck_baseline_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempRoot() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};
const fs::path& temp_root() {
  static const TempRoot root;
  return root.path;
}

fs::path make_set(const std::string& name, const std::string& positions) {
  const fs::path out = temp_root() / name;
  if (fs::exists(out / "manifest.json")) return out;
  GoldenOptions o;
  o.spec = load_preset("llama-3.1-8b");
  o.positions = parse_positions(positions);
  o.dtypes = {DType::f32};
  o.heads = 2;
  o.seed = 7;
  o.out = out;
  o.threads = 2;
  write_golden_set(o);
  return out;
}
const fs::path& llama_set() {
  static const fs::path p = make_set("llama", "log:131071:4");
  return p;
}

std::vector<Tensor> accurate(const GoldenSet& g) { return run_kernel(*kut::make_cpu_kernel(kernels::Recipe::accurate), g).tensors; }

// Every f32 output's error made `factor` times larger (rounded once to f32); f64 outputs unchanged.
std::vector<Tensor> worse(const GoldenSet& g, std::vector<Tensor> cand, double factor) {
  for (Tensor& t : cand) {
    if (t.dtype != TensorDType::f32) continue;
    const Tensor& truth = g.tensor(t.name.substr(0, t.name.find('.')) + ".f64");
    std::vector<float> v(static_cast<std::size_t>(t.numel()));
    for (std::int64_t i = 0; i < t.numel(); ++i)
      v[static_cast<std::size_t>(i)] = static_cast<float>(truth.value(i) + factor * (t.value(i) - truth.value(i)));
    t = make_f32(t.name, t.shape, v);
  }
  return cand;
}

CheckOptions with_class(AccuracyClass c, int threads = 0) {
  CheckOptions o;
  o.criterion = Criterion::of_class(c);
  o.threads = threads;
  return o;
}

// A report written like `check --report` and read back as a baseline.
CheckBaseline as_baseline(const nlohmann::json& j, const std::string& name) {
  const fs::path p = temp_root() / name;
  std::ofstream(p) << j.dump(2) << "\n";
  return read_check_baseline(p);
}

template <class F>
std::string baseline_error(F&& f) {
  try {
    f();
  } catch (const BaselineError& e) {
    return e.what();
  }
  return "(no BaselineError)";
}

// ---- error statistics ------------------------------------------------------------------------------

TEST(error_stats, MomentsOfKnownValues) {
  ErrorStatsAcc a, b;
  a.add(0.5, 1);
  a.add(0.25, 3);
  b.add(1, 0);
  b.add(0, 4);
  a.merge(b);
  const ErrorStats s = a.result();
  EXPECT_EQ(s.elements, 4);
  EXPECT_EQ(s.bound.max, 1);
  EXPECT_EQ(s.bound.mean, 1.75 / 4);
  EXPECT_EQ(s.bound.rms, std::sqrt((0.25 + 0.0625 + 1) / 4));
  EXPECT_EQ(s.u_dt.max, 4);
  EXPECT_EQ(s.u_dt.mean, 2);
  EXPECT_EQ(s.u_dt.rms, std::sqrt(26.0 / 4));
  const std::optional<ErrorStats> back = error_stats_from_json(to_json(s));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->u_dt.rms, s.u_dt.rms);
  EXPECT_EQ(back->bound.mean, s.bound.mean);
  EXPECT_EQ(ErrorStatsAcc{}.result().u_dt.rms, 0);  // no elements: zeros, not NaN
  EXPECT_FALSE(error_stats_from_json(nlohmann::json{{"elements", 1}, {"bound", {{"max", 1}}}}));
  EXPECT_FALSE(error_stats_from_json(nlohmann::json{{"elements", 1},
                                                    {"bound", {{"max", -1}, {"mean", 0}, {"rms", 0}}},
                                                    {"u_dt", {{"max", 0}, {"mean", 0}, {"rms", 0}}}}));
}

TEST(error_stats, CheckerStatisticsAgreeWithAnIndependentSum) {
  const GoldenSet g = load_golden_set(llama_set());
  const std::vector<Tensor> cand = accurate(g);
  const CheckReport r = check_candidate(g, cand, with_class(AccuracyClass::fp32_angle));
  ASSERT_TRUE(r.pass) << r.summary();
  for (const TensorReport& t : r.tensors) {
    EXPECT_EQ(t.error.elements, t.elements) << t.golden_name;
    EXPECT_EQ(t.error.u_dt.max, t.max_pair_relative) << t.golden_name;
    EXPECT_EQ(t.error.bound.max, t.worst_score) << t.golden_name;
    EXPECT_DOUBLE_EQ(t.error.u_dt.mean, t.mean_pair_relative) << t.golden_name;
    EXPECT_LE(t.error.u_dt.mean, t.error.u_dt.rms) << t.golden_name;
    EXPECT_LE(t.error.u_dt.rms, t.error.u_dt.max) << t.golden_name;
    std::int64_t in_bins = 0;
    for (const PositionBin& b : t.bins) {
      in_bins += b.error.elements;
      EXPECT_EQ(b.error.u_dt.max, b.max_pair_relative) << t.golden_name << " bin " << b.lo;
    }
    EXPECT_EQ(in_bins, t.elements);
  }
  // cos.f32 (M = 1): RMS of |c - y| / u_32 summed here, element by element.
  const Tensor& c = *std::find_if(cand.begin(), cand.end(), [](const Tensor& t) { return t.name == "cos.f32"; });
  const Tensor& y = g.tensor("cos.f64");
  double sq = 0, mx = 0;
  for (std::int64_t i = 0; i < c.numel(); ++i) {
    const double e = std::fabs(c.value(i) - y.value(i)) / std::ldexp(1.0, -24);
    sq += e * e;
    mx = std::max(mx, e);
  }
  const TensorReport& rc = *std::find_if(r.tensors.begin(), r.tensors.end(), [](const TensorReport& t) { return t.golden_name == "cos.f32"; });
  EXPECT_NEAR(rc.error.u_dt.rms, std::sqrt(sq / static_cast<double>(c.numel())), 1e-12 * rc.error.u_dt.rms);
  EXPECT_EQ(rc.error.u_dt.max, mx);
  EXPECT_GT(rc.error.u_dt.rms, 0.1);  // accurate is not correctly rounded: the statistic measures something
  // JSON and the text report carry them.
  const nlohmann::json j = r.to_json();
  EXPECT_TRUE(j["tensors"][0]["error_stats"]["u_dt"].contains("rms"));
  EXPECT_TRUE(j["tensors"][0]["position_bins"][0]["error_stats"]["bound"].contains("mean"));
  EXPECT_EQ(j["golden_fingerprint"].get<std::string>().size(), 64u);
  EXPECT_NE(r.summary().find("  vs bound   max "), std::string::npos);
  EXPECT_NE(r.summary().find("rms pair-rel (u)"), std::string::npos);
}

TEST(error_stats, DoNotDependOnTheThreadCount) {
  // 1200 tokens: q_rot / k_rot fall in 5 chunks of 256 tokens, cos / sin in 2 (check_accumulate.cpp), merged in order.
  const GoldenSet g = load_golden_set(make_set("dense", "0:1200"));
  const std::vector<Tensor> cand = accurate(g);
  const nlohmann::json one = check_candidate(g, cand, with_class(AccuracyClass::fp32_angle, 1)).to_json();
  const nlohmann::json four = check_candidate(g, cand, with_class(AccuracyClass::fp32_angle, 4)).to_json();
  EXPECT_EQ(one.dump(), four.dump());
}

// ---- baseline ------------------------------------------------------------------------------------

TEST(check_baseline, TenTimesWorseUnderTheBoundPassesTheClassAndFailsTheBaseline) {
  const GoldenSet g = load_golden_set(llama_set());
  const CheckOptions o = with_class(AccuracyClass::f16_table);
  const CheckReport base = check_candidate(g, accurate(g), o);
  ASSERT_TRUE(base.pass);
  const CheckBaseline b = as_baseline(base.to_json(), "accurate.json");
  require_same_setup(b, golden_fingerprint(g), o.criterion);

  // The same kernel again: every quantity compared, growth exactly 1.
  const BaselineComparison same = compare_with_baseline(check_candidate(g, accurate(g), o), b, {});
  EXPECT_TRUE(same.pass()) << same.summary();
  EXPECT_EQ(same.compared, static_cast<std::int64_t>(2 * (base.tensors.size() + [&] {
                             std::size_t n = 0;
                             for (const TensorReport& t : base.tensors) n += t.bins.size();
                             return n;
                           }())));
  ASSERT_TRUE(same.largest);
  EXPECT_LE(same.largest->growth, 1.0);

  // 10x worse: the class still holds, the baseline does not.
  const CheckReport bad = check_candidate(g, worse(g, accurate(g), 10), o);
  EXPECT_TRUE(bad.pass) << bad.summary();
  const BaselineComparison cmp = compare_with_baseline(bad, b, {2, 1});
  EXPECT_FALSE(cmp.pass());
  std::set<std::string> tensors_with_rms_growth;
  for (const BaselineRegression& r : cmp.regressions) {
    EXPECT_EQ(r.tensor.substr(r.tensor.size() - 4), ".f32") << r.where();  // the f64 outputs did not change
    EXPECT_GT(r.growth, 2) << r.where();
    if (!r.bin_lo && r.metric == "rms") tensors_with_rms_growth.insert(r.tensor);
  }
  EXPECT_EQ(tensors_with_rms_growth, (std::set<std::string>{"cos.f32", "sin.f32", "q_rot.f32", "k_rot.f32"}));
  ASSERT_TRUE(cmp.largest);
  EXPECT_GT(cmp.largest->growth, 5);
  EXPECT_LT(cmp.largest->growth, 15);
  // The report names the tensor and the bin.
  const std::string s = cmp.summary();
  EXPECT_NE(s.find("\nFAIL: regression against the baseline: "), std::string::npos) << s;
  EXPECT_NE(s.find(" positions ["), std::string::npos) << s;
  const nlohmann::json j = cmp.to_json();
  EXPECT_EQ(j["pass"], false);
  EXPECT_EQ(j["regressions"].size(), cmp.regressions.size());
  EXPECT_TRUE(j["regressions"][0].contains("bin"));
  // 10x is within a 16x limit.
  EXPECT_TRUE(compare_with_baseline(bad, b, {16, 1}).pass());
}

TEST(check_baseline, GrowthExactlyAtTheLimitPasses) {
  const GoldenSet g = load_golden_set(llama_set());
  const CheckOptions o = with_class(AccuracyClass::fp32_angle);
  const CheckReport cur = check_candidate(g, worse(g, accurate(g), 10), o);
  // A baseline whose every max / RMS error of at least 2 u is half the current one (exact in binary).
  nlohmann::json j = cur.to_json();
  int halved = 0;
  auto halve = [&](nlohmann::json& st) {
    for (const char* m : {"max", "rms"}) {
      nlohmann::json& v = st["u_dt"][m];
      if (v.get<double>() >= 2) v = v.get<double>() / 2, ++halved;
    }
  };
  for (auto& t : j["tensors"]) {
    halve(t["error_stats"]);
    for (auto& bin : t["position_bins"]) halve(bin["error_stats"]);
  }
  ASSERT_GT(halved, 20);
  const CheckBaseline b = as_baseline(j, "halved.json");
  const BaselineComparison at = compare_with_baseline(cur, b, {2, 1});
  EXPECT_TRUE(at.pass()) << at.summary();
  ASSERT_TRUE(at.largest);
  EXPECT_EQ(at.largest->growth, 2.0);
  const BaselineComparison over = compare_with_baseline(cur, b, {1.999, 1});
  EXPECT_EQ(over.regressions.size(), static_cast<std::size_t>(halved));
}

TEST(check_baseline, ErrorsBelowTheFloorAreNotGrowth) {
  const GoldenSet g = load_golden_set(llama_set());
  const CheckOptions o = with_class(AccuracyClass::fp32_angle);
  // The golden f32 outputs (correctly rounded, <= 1 u) against a baseline claiming zero error.
  std::vector<Tensor> cand;
  for (const char* n : {"cos.f32", "sin.f32", "q_rot.f32", "k_rot.f32"}) cand.push_back(g.tensor(n));
  const CheckReport cur = check_candidate(g, cand, o);
  nlohmann::json j = cur.to_json();
  for (auto& t : j["tensors"]) {
    EXPECT_LE(t["error_stats"]["u_dt"]["max"].get<double>(), 1.0);
    t["error_stats"]["u_dt"] = {{"max", 0}, {"mean", 0}, {"rms", 0}};
    for (auto& bin : t["position_bins"]) bin["error_stats"]["u_dt"] = {{"max", 0}, {"mean", 0}, {"rms", 0}};
  }
  EXPECT_TRUE(compare_with_baseline(cur, as_baseline(j, "zero.json"), {1, 1}).pass());
}

TEST(check_baseline, BaselinesThatDoNotMatchAreRefused) {
  const GoldenSet g = load_golden_set(llama_set());
  const CheckOptions o = with_class(AccuracyClass::fp32_angle);
  const CheckReport rep = check_candidate(g, accurate(g), o);
  const nlohmann::json j = rep.to_json();

  // Another golden set (other positions); the same set copied elsewhere is the same set.
  const GoldenSet other = load_golden_set(make_set("other", "0:100"));
  const CheckBaseline b = as_baseline(j, "ok.json");
  EXPECT_NE(baseline_error([&] { require_same_setup(b, golden_fingerprint(other), o.criterion); }).find("another golden set"),
            std::string::npos);
  const fs::path moved = temp_root() / "moved";
  fs::copy(llama_set(), moved, fs::copy_options::recursive);
  EXPECT_EQ(golden_fingerprint(load_golden_set(moved)), golden_fingerprint(g));
  EXPECT_NE(golden_fingerprint(other), golden_fingerprint(g));
  // Another criterion.
  EXPECT_NE(baseline_error([&] { require_same_setup(b, golden_fingerprint(g), Criterion::of_class(AccuracyClass::bf16_table)); })
                .find("criterion"),
            std::string::npos);
  // Other tensors: the baseline checked cos.f32 only; a run that checked everything has nothing to compare some with.
  std::vector<Tensor> only_cos;
  for (const Tensor& t : accurate(g))
    if (t.name == "cos.f32") only_cos.push_back(t);
  const CheckBaseline b_cos = as_baseline(check_candidate(g, only_cos, o).to_json(), "cos.json");
  EXPECT_NE(baseline_error([&] { compare_with_baseline(rep, b_cos, {}); }).find("has no tensor"), std::string::npos);
  EXPECT_NE(baseline_error([&] { compare_with_baseline(check_candidate(g, only_cos, o), b, {}); }).find("did not check"),
            std::string::npos);
  // Malformed files, each refused with one line naming the file.
  const fs::path bad = temp_root() / "bad.json";
  auto refused = [&](const std::string& text) {
    std::ofstream(bad) << text;
    const std::string e = baseline_error([&] { read_check_baseline(bad); });
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    EXPECT_NE(e.find("bad.json"), std::string::npos) << e;
    return e;
  };
  EXPECT_NE(refused("{\"format\": ").find("not JSON"), std::string::npos);
  EXPECT_NE(refused("[1, 2]").find("not a JSON object"), std::string::npos);
  EXPECT_NE(refused("{\"format\": \"ropecheck-golden\", \"format_version\": 1}").find("not a check report"), std::string::npos);
  nlohmann::json old = j;
  old["tensors"][1].erase("error_stats");
  EXPECT_NE(refused(old.dump()).find("error_stats"), std::string::npos);
  nlohmann::json nofp = j;
  nofp.erase("golden_fingerprint");
  EXPECT_NE(refused(nofp.dump()).find("golden_fingerprint"), std::string::npos);
  nlohmann::json badbin = j;
  badbin["tensors"][0]["position_bins"][2]["error_stats"]["u_dt"]["rms"] = "big";
  EXPECT_NE(refused(badbin.dump()).find("malformed"), std::string::npos);
  EXPECT_NE(baseline_error([&] { read_check_baseline(temp_root() / "missing.json"); }).find("no such file"), std::string::npos);
  EXPECT_NE(baseline_error([&] { compare_with_baseline(rep, b, {0.5, 1}); }).find("max-growth"), std::string::npos);
}

}  // namespace
}  // namespace ropecheck::golden
