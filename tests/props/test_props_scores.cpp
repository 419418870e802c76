// The score properties (props/src/properties/scores.cpp): never failed by a correct target on any RoPE
// preset, and their teeth: the mutants they exist for are caught, each by the property that states what
// it breaks, while the correct kernel with the same output dtype passes the same runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "ropecheck/props/mutants.hpp"
#include "ropecheck/props/registry.hpp"
#include "ropecheck/props/suite.hpp"
#include "ropecheck/reference/presets.hpp"
#include "test_scale.hpp"

namespace ropecheck::props {
namespace {

constexpr std::uint64_t kSeed = 20261128;
const std::vector<std::string> kScoreProperties = {"score_shift", "score_decay", "cached_key_rotation"};

// Every RoPE preset, the correct kernel in f32 and bf16 output and the exact reference: no failure, and
// every property tested on some case (not all skipped). Prints cases and the worst margin per property.
TEST(PropsScores, CorrectTargetsPassOnEveryPreset) {
  register_builtin_targets();
  const int cases = ropecheck::test::scaled(10, 4, 2);
  struct Tally {
    long cases = 0;
    double worst = 0;
    int not_tested = 0;
  };
  std::vector<std::pair<std::string, Tally>> tally;
  for (const std::string& preset : preset_names()) {
    const EncodingSpec spec = load_preset(preset);
    if (spec.family != Family::rope || is_mla_layout(spec.rope)) continue;  // props place no MLA slice yet
    for (const char* name : {"hf-fp32", "hf-fp32-bf16out", "reference"}) {
      if (std::string(name) == "reference" && preset != "llama-3.1-8b" && preset != "qwen2.5-7b-yarn") continue;  // MPFR: two presets
      auto target = make_target(name);
      ASSERT_TRUE(target) << name;
      SuiteOptions o;
      o.cases = cases;
      o.seed = kSeed;
      o.only = kScoreProperties;
      const SuiteReport rep = run_suite(*target, &spec, o);
      ASSERT_EQ(rep.outcomes.size(), kScoreProperties.size());
      for (const PropertyOutcome& out : rep.outcomes) {
        EXPECT_TRUE(out.passed) << name << " on " << preset << ": " << out.property << ": " << out.counterexample;
        EXPECT_LT(out.skipped, out.cases) << name << " on " << preset << ": " << out.property << " skipped every case";
        auto it = std::find_if(tally.begin(), tally.end(), [&](const auto& t) { return t.first == out.property; });
        if (it == tally.end()) it = tally.insert(tally.end(), {out.property, Tally{}});
        it->second.cases += out.cases - out.skipped;
        it->second.worst = std::max(it->second.worst, out.worst_margin);
        it->second.not_tested += out.verdict == Verdict::not_tested ? 1 : 0;
      }
    }
  }
  std::printf("%-22s %8s %12s %12s\n", "property", "cases", "worst e/T", "not-tested");
  for (const auto& [p, t] : tally) std::printf("%-22s %8ld %12.4g %12d\n", p.c_str(), t.cases, t.worst, t.not_tested);
}

struct Teeth {
  const char* mutant;
  const char* property;
};

// k-position-slip (keys one position ahead) is caught by cached_key_rotation (R(1) R(m + 1) vs R(m + 1)),
// attention-factor-twice (scores times att^2) by score_decay (the extremal input at distance 0 attains
// the bound), bf16-positions by score_shift (m and m + D round differently); k-position-slip is never
// caught by score_shift, whose statement it keeps (both sides slip alike).
TEST(PropsScores, MutantsCaughtByTheScoreProperties) {
  const std::vector<Teeth> teeth = {{"k-position-slip", "cached_key_rotation"},
                                    {"attention-factor-twice", "score_decay"},
                                    {"bf16-positions", "score_shift"}};
  for (const char* preset : {"llama-3.1-8b", "qwen2.5-7b-yarn", "gpt-j-6b"}) {
    const EncodingSpec spec = load_preset(preset);
    for (const Teeth& t : teeth) {
      if (std::string(t.mutant) == "attention-factor-twice" && std::string(preset) != "qwen2.5-7b-yarn") continue;  // att = 1
      SuiteOptions o;
      o.cases = 20;
      o.seed = kSeed;
      o.max_position = 131072;
      o.only = {t.property};
      o.shrink = false;  // (shrinking is most of the time and does not change the verdict)
      auto bad = make_mutant_target(t.mutant);
      ASSERT_TRUE(bad) << t.mutant;
      const SuiteReport rep = run_suite(*bad, &spec, o);
      ASSERT_EQ(rep.outcomes.size(), 1u);
      EXPECT_FALSE(rep.outcomes[0].passed) << t.mutant << " not caught by " << t.property << " on " << preset;
      std::printf("[scores] %-24s %-16s caught by %-20s margin %.3g: %s\n", t.mutant, preset, t.property,
                  rep.outcomes[0].worst_margin, rep.outcomes[0].counterexample.c_str());
      auto good = make_hf_fp32_target(bad->info().dtype);
      const SuiteReport ok = run_suite(*good, &spec, o);
      EXPECT_TRUE(ok.passed()) << "hf-fp32 failed " << t.property << " on " << preset << ": " << ok.outcomes[0].counterexample;
    }
    SuiteOptions o;
    o.cases = 20;
    o.seed = kSeed;
    o.max_position = 131072;
    o.only = {"score_shift"};
    o.shrink = false;
    auto slip = make_mutant_target("k-position-slip");
    EXPECT_TRUE(run_suite(*slip, &spec, o).passed()) << "score_shift cannot see a slip both sides share";
  }
}

}  // namespace
}  // namespace ropecheck::props
