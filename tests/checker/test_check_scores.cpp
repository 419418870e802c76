// The score check (checker/include/ropecheck/checker/scores.hpp) on candidates made from ropecheck's own
// recipes (score_recipes.hpp): each recipe's scores pass its class on every RoPE preset (no score
// outside its bound; saturated ones not tested, never passed); a rotation whose query is one position off
// fails; a shift of every position by the same amount is invisible in the scores, exactly
// (accuracy/ERROR_MODEL.md 16.6 states all three).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "ropecheck/checker/checker.hpp"
#include "ropecheck/golden/golden_writer.hpp"
#include "ropecheck/reference/presets.hpp"
#include "preset_scale.hpp"
#include "score_recipes.hpp"
#include "temp_root.hpp"

namespace ropecheck::checker {
namespace {

namespace fs = std::filesystem;
using testing_support::ScoreRecipe;

const fs::path& root() {
  static const testing_support::TempRoot r("ropecheck_check_scores_");
  return r.path();
}

// Positions near 0, 2^13, 2^17 and 2^20 (where the f32 angle classes' scores start to saturate).
constexpr const char* kPairs = "causal:0:6,pair:1000:3,pair:8190:8185,pair:131060:131000,pair:1048570:1048500";

fs::path score_set(const std::string& preset, const std::string& pairs = kPairs, const std::string& tag = "") {
  const fs::path out = root() / (preset + tag);
  if (fs::exists(out / "manifest.json")) return out;
  golden::GoldenOptions o;
  o.spec = load_preset(preset);
  o.positions = parse_positions("0:2");
  o.dtypes = {DType::f32, DType::f16, DType::bf16};
  o.heads = 2;
  o.seed = 5;
  o.out = out;
  o.threads = 2;
  o.scores = pairs;
  golden::write_golden_set(o);
  return out;
}

ScoresReport judge(const golden::GoldenSet& g, const io::Tensor& cand, accuracy::AccuracyClass c) {
  CheckOptions opt;
  opt.criterion = Criterion::of_class(c);
  opt.only = {"scores"};
  opt.threads = 2;
  opt.diagnose_scores = false;  // DiagnosisNamesInjectedMistakesFromTheScores tests it
  const CheckReport r = check_candidate(g, {cand}, opt);
  EXPECT_TRUE(r.scores.has_value());
  return r.scores.value_or(ScoresReport{});
}

std::vector<std::string> rope_presets() {
  std::vector<std::string> out;
  for (const std::string& n : preset_names())
    // The MLA layout (deepseek-v3-mla) has no per-head key to score, and the engine has no Q/K norm stage
    // (golden refuses --scores for both).
    if (const EncodingSpec e = load_preset(n); e.family == Family::rope && !is_mla_layout(e.rope) && !has_qk_norm(e.rope))
      out.push_back(n);
  return out;
}

TEST(CheckScores, OwnRecipesPassTheirClassOnEveryPreset) {
  std::int64_t passed = 0, untested = 0;
  for (const std::string& preset : ropecheck::test::presets_at_test_scale(rope_presets())) {
    const golden::GoldenSet g = golden::load_golden_set(score_set(preset));
    for (const ScoreRecipe& rc : testing_support::score_recipes()) {
      const ScoresReport s = judge(g, testing_support::recipe_scores(g, rc), rc.cls);
      EXPECT_EQ(s.failed, 0) << preset << " " << kernels::to_string(rc.recipe) << " " << to_string(rc.dt) << ": " << s.reason;
      EXPECT_GT(s.passed, 0) << preset;
      EXPECT_EQ(s.passed + s.failed + s.not_tested, s.elements);
      passed += s.passed, untested += s.not_tested;
    }
  }
  std::printf("own recipes: %lld scores passed, %lld not tested (saturated), 0 failed\n", static_cast<long long>(passed),
              static_cast<long long>(untested));
}

TEST(CheckScores, QueryOnePositionOffFails) {
  const auto& cases = testing_support::score_recipes();
  for (const std::string& preset : rope_presets()) {
    const golden::GoldenSet g = golden::load_golden_set(score_set(preset));
    for (const ScoreRecipe& rc : {cases[0], cases[2]}) {  // accurate f32 (f32-reduced), hf f32 (fp32-angle)
      const ScoresReport s = judge(g, testing_support::recipe_scores(g, rc, 1), rc.cls);
      EXPECT_GT(s.failed, 0) << preset << " " << kernels::to_string(rc.recipe);
      EXPECT_EQ(s.verdict, Verdict::fail);
      ASSERT_FALSE(s.worst.empty());
      EXPECT_GT(s.worst.front().score, 1);
    }
  }
}

TEST(CheckScores, UniformShiftIsInvisible) {
  // The correctly rounded scores of pairs shifted by 4093 positions are those of the unshifted pairs, bit
  // for bit: a kernel that shifts every position passes the score check even under `exact`.
  const golden::GoldenSet a = golden::load_golden_set(score_set("llama-3.1-8b", "causal:0:8", "-plain"));
  const golden::GoldenSet b = golden::load_golden_set(score_set("llama-3.1-8b", "causal:4093:8", "-shifted"));
  io::Tensor shifted = b.tensor("scores.f32");
  shifted.name = "scores";
  const ScoresReport s = judge(a, shifted, accuracy::AccuracyClass::exact);
  EXPECT_EQ(s.failed, 0);
  EXPECT_EQ(s.identical, s.elements);
  EXPECT_EQ(s.verdict, Verdict::pass);
}

TEST(CheckScores, MissingScoresAreNotTestedAndNanFails) {
  const golden::GoldenSet g = golden::load_golden_set(score_set("llama-3.1-8b"));
  io::Tensor q = g.tensor("q_rot.f32");
  q.name = "q_rot";
  CheckOptions opt;
  opt.only = {"q_rot.f32", "scores.f32"};
  const CheckReport r = check_candidate(g, {q}, opt);
  EXPECT_FALSE(r.scores.has_value());
  EXPECT_EQ(r.verdict, Verdict::not_tested);
  EXPECT_NE(std::find(r.not_tested.begin(), r.not_tested.end(), "scores.f32"), r.not_tested.end());
  io::Tensor s = g.tensor("scores.f32");
  s.name = "scores";
  store_element(s.data.data(), std::nan(""), DType::f32);
  const ScoresReport j = judge(g, s, accuracy::AccuracyClass::fp32_angle);
  EXPECT_EQ(j.failed, 1);
  EXPECT_EQ(j.nonfinite, 1);
  EXPECT_EQ(j.verdict, Verdict::fail);
}

// Six rotation mistakes injected into the `accurate` recipe's f32 scores (the spec or the positions given
// to the kernel changed), each named by the diagnosis from the scores alone.
TEST(CheckScores, DiagnosisNamesInjectedMistakesFromTheScores) {
  const golden::GoldenSet g = golden::load_golden_set(score_set("llama-3.1-8b"));
  const testing_support::ScoreInputs in = testing_support::score_inputs(g);
  const ScoreRecipe& rc = testing_support::score_recipes()[0];
  const RopeSpec truth = g.spec().rope;
  struct Injected {
    std::string id;
    RopeSpec spec;
    std::int64_t q_shift;
    bool negate;
  };
  std::vector<Injected> cases;
  RopeSpec s = truth;
  s.layout = s.layout == RopeLayout::half_split ? RopeLayout::interleaved : RopeLayout::half_split;
  cases.push_back({"wrong-pairing", s, 0, false});
  s = truth;
  s.base = 10000;
  cases.push_back({"base-default", s, 0, false});
  s = truth;
  s.scaling = RopeScaling{};
  cases.push_back({"scaling-ignored", s, 0, false});
  cases.push_back({"query-position-plus-1", truth, 1, false});
  cases.push_back({"query-position-minus-1", truth, -1, false});
  cases.push_back({"sin-negated", truth, 0, true});  // R(-p) = the rotation by -theta
  for (const Injected& c : cases) {
    std::vector<std::int64_t> qp = in.qpos, kp = in.kpos;
    for (std::int64_t& p : qp) p = (c.negate ? -p : p) + c.q_shift;
    for (std::int64_t& p : kp) p = c.negate ? -p : p;
    CheckOptions opt;
    opt.criterion = Criterion::of_class(accuracy::AccuracyClass::fp32_angle);
    opt.only = {"scores"};
    const CheckReport r = check_candidate(g, {testing_support::recipe_scores_at(g, rc, c.spec, qp, kp)}, opt);
    ASSERT_TRUE(r.scores && r.scores->diagnosis) << c.id;
    const ScoreDiagnosis& d = *r.scores->diagnosis;
    ASSERT_FALSE(d.ranked.empty()) << c.id;
    const ScoreHypothesisResult& top = d.ranked.front();
    // Named, or named with the mistakes the scores cannot tell from it (cos / sin swapped = sin negated).
    const bool named = d.match == c.id || std::find(top.same_scores_as.begin(), top.same_scores_as.end(), c.id) !=
                                               top.same_scores_as.end();
    EXPECT_TRUE(named && top.matches) << c.id << ": " << d.conclusion;
    std::printf("%-24s %lld failing scores; %s\n", c.id.c_str(), static_cast<long long>(d.failing), d.conclusion.c_str());
  }
}

}  // namespace
}  // namespace ropecheck::checker
