// Tests for the differential diagnosis (golden/diagnose.hpp, checker/DIAGNOSIS.md).
//
// Each catalogue mistake is built into a float32 test kernel of its own (SlippedKernel below: the
// Hugging Face fp32 recipe, angle t * inv_freq in f32, libm sinf / cosf, rotation in f32, with the
// mistake made the way a framework makes it: the position or inverse frequency cast to bf16, the other
// pairing, ...), run on the golden inputs of small sets of six presets (half-split llama-3.1-8b,
// interleaved gpt-j-6b with partial rotary, YaRN gpt-oss-20b with truncate false and qwen2.5-7b-yarn
// with truncate true, mrope qwen2-vl-7b chunked and qwen3-vl-8b interleaved), checked with the default
// class and diagnosed; the mistake must be rank 1 and match. The kernel does not share code with the
// diagnosis: it works in float from the spec, the diagnosis in MPFR from the catalogue. The known-bad
// recipes of ropecheck's own CPU kernel (kut) are diagnosed too.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "slipped_kernel.hpp"
#include "temp_root.hpp"
#include "ropecheck/checker/checker.hpp"
#include "ropecheck/checker/diagnose.hpp"
#include "ropecheck/golden/golden_set.hpp"
#include "ropecheck/golden/golden_writer.hpp"
#include "ropecheck/checker/kernel_run.hpp"
#include "ropecheck/kut/builtin_sources.hpp"
#include "ropecheck/reference/presets.hpp"
#include "ropecheck/formulas/rope.hpp"

namespace ropecheck::golden {
using namespace ropecheck::io;
using namespace ropecheck::checker;
namespace {

namespace fs = std::filesystem;
using accuracy::AccuracyClass;

const fs::path& temp_root() {
  static const testing_support::TempRoot root("ropecheck_diagnose_");
  return root.path();
}

// Positions on both sides of bf16's 256 and f16's 2048 and 65504, up to 131071; mrope sets add image
// blocks (unequal h and w streams).
const char* kTextPositions = "0:3,255:259,1000,2047,2049,4095,4097,30001,70001,131071";
const char* kMropePositions = "0:3,255:259,2049,4097,30001,grid:70001:2:3,grid:130001:2:2";

const std::vector<std::string>& presets() {
  static const std::vector<std::string> p = {"llama-3.1-8b", "gpt-j-6b",    "gpt-oss-20b",
                                             "qwen2.5-7b-yarn", "qwen2-vl-7b", "qwen3-vl-8b"};
  return p;
}

const GoldenSet& golden_of(const std::string& preset) {
  static std::map<std::string, GoldenSet> sets;
  if (auto it = sets.find(preset); it != sets.end()) return it->second;
  GoldenOptions o;
  o.spec = load_preset(preset);
  o.positions = parse_positions(o.spec.rope.mrope == MropeMode::none ? kTextPositions : kMropePositions);
  o.dtypes = {DType::f32};
  o.heads = 1;
  o.seed = 11;
  o.out = temp_root() / preset;
  o.threads = 1;
  write_golden_set(o);
  return sets.emplace(preset, load_golden_set(o.out)).first->second;
}

using testing_support::slipped_kernel;

DiagnoseOptions small_sample() {
  DiagnoseOptions o;
  o.max_failing = 48;
  o.max_passing = 24;
  o.threads = 1;
  return o;
}

// Whether a mistake changes what this preset computes (an attention factor of 1, a spec without
// scaling, truncate on a non-YaRN spec or mrope mistakes without mrope leave it unchanged).
bool applies(const RopeSpec& r, const Mistake& m) {
  const bool att = r.scaling.type == ScalingType::yarn || r.scaling.type == ScalingType::longrope;
  if (m.att != Mistake::Att::keep && !att) return false;
  if (m.ignore_scaling && r.scaling.type == ScalingType::none) return false;
  if (m.flip_truncate && r.scaling.type != ScalingType::yarn) return false;
  if ((m.flip_mrope_mode || m.swap_hw_streams) && r.mrope == MropeMode::none) return false;
  // The hypotheses that need sets of their own (test_diagnose_params.cpp): another base, LongRoPE
  // lists, periods for frequencies (small positions), wrapped positions (past 32767 / 2^31).
  if (m.base || m.swap_longrope_factors || m.reciprocal_freq || m.position_wrap_bits) return false;
  // The MLA mistakes: on an MLA set of their own (test_mla.cpp).
  if (m.rotary_offset || m.whole_head || m.passthrough_mscale || m.first_position || m.att == Mistake::Att::yarn_mscale)
    return false;
  if (m.norm != Mistake::Norm::keep) return false;  // the norm mistakes: on a norm set (test_norm_diagnosis.cpp)
  return !m.judged_class;
}

TEST(Diagnose, EveryMistakeIsRankOneOnEveryPresetItAppliesTo) {
  std::map<std::string, int> presets_per_mistake;
  for (const std::string& preset : presets()) {
    const GoldenSet& g = golden_of(preset);
    for (const Hypothesis& h : diagnosis_catalogue()) {
      if (!applies(g.spec().rope, h.mistake)) continue;
      SCOPED_TRACE(preset + " with " + h.id);
      const std::vector<Tensor> cand = slipped_kernel(g, h.mistake);
      const CheckReport rep = check_candidate(g, cand, {});
      ASSERT_EQ(rep.verdict, Verdict::fail);
      const Diagnosis d = diagnose(g, cand, rep, small_sample());
      ASSERT_FALSE(d.ranked.empty());
      EXPECT_EQ(d.ranked.front().id, h.id) << d.conclusion << d.summary();
      EXPECT_TRUE(d.ranked.front().matches) << d.summary();
      EXPECT_LE(d.ranked.front().max_ratio, 1.0);
      EXPECT_EQ(d.conclusion.rfind("matches the truth computed with " + h.title, 0), 0u) << d.conclusion;
      if (h.id.rfind("attention-factor", 0) == 0) {  // the factor is named: "... folded in (the attention factor is 1.347)"
        EXPECT_NE(d.conclusion.find("(the attention factor is " + fmt::format("{:.4g}", g.attention_factor()) + ")"),
                  std::string::npos) << d.conclusion;
      }
      ASSERT_NE(d.best_match(), nullptr);
      EXPECT_EQ(d.best_match()->id, h.id);
      ++presets_per_mistake[h.id];
    }
  }
  // The layout-independent mistakes on all six presets, the scaled ones on the four scaled presets.
  for (const char* id : {"bf16-positions", "f16-positions", "bf16-inv-freq", "f16-inv-freq", "wrong-pairing",
                         "position-plus-1", "position-minus-1", "cos-sin-swapped", "sin-negated"})
    EXPECT_EQ(presets_per_mistake[id], 6) << id;
  EXPECT_EQ(presets_per_mistake["scaling-ignored"], 3);  // llama3 and the two YaRN presets
  EXPECT_EQ(presets_per_mistake["yarn-truncate-flipped"], 2);
  EXPECT_EQ(presets_per_mistake["mrope-mode-flipped"], 2);
  EXPECT_EQ(presets_per_mistake["mrope-hw-swapped"], 2);
  for (const char* id : {"attention-factor-missing", "attention-factor-twice", "attention-factor-in-table"})
    EXPECT_EQ(presets_per_mistake[id], 2) << id;
}

TEST(Diagnose, CorrectKernelsGetNoDiagnosis) {
  for (const std::string& preset : presets()) {
    SCOPED_TRACE(preset);
    const GoldenSet& g = golden_of(preset);
    const std::vector<Tensor> cand = slipped_kernel(g, {});
    const CheckReport rep = check_candidate(g, cand, {});
    ASSERT_EQ(rep.verdict, Verdict::pass);
    const Diagnosis d = diagnose(g, cand, rep, small_sample(), /*all_tensors=*/true);
    EXPECT_TRUE(d.ranked.empty());
    EXPECT_EQ(d.best_match(), nullptr);
    EXPECT_EQ(d.failing_elements, 0);
    EXPECT_EQ(d.conclusion, "nothing to diagnose: no element is outside the fp32-angle bound");
  }
}

// The class hypotheses on four presets: a correct fp32 kernel under a stricter class, tables cast to f16 / bf16.
TEST(Diagnose, ClassExplanations) {
  for (const std::string preset : {"llama-3.1-8b", "gpt-j-6b", "gpt-oss-20b", "qwen2-vl-7b"}) {
  SCOPED_TRACE(preset);
  const GoldenSet& g = golden_of(preset);
  {
    const std::vector<Tensor> cand = slipped_kernel(g, {});
    CheckOptions o;
    o.criterion = Criterion::of_class(AccuracyClass::f32_reduced);
    const CheckReport rep = check_candidate(g, cand, o);
    ASSERT_EQ(rep.verdict, Verdict::fail);
    const Diagnosis d = diagnose(g, cand, rep, small_sample());
    EXPECT_EQ(d.judged_class, AccuracyClass::f32_reduced);
    ASSERT_NE(d.best_match(), nullptr) << d.summary();
    EXPECT_EQ(d.best_match()->id, "class-fp32-angle") << d.summary();
  }
  for (const auto& [dt, id] : {std::pair{DType::f16, "class-f16-table"}, std::pair{DType::bf16, "class-bf16-table"}}) {
    const std::vector<Tensor> cand = slipped_kernel(g, {}, dt);
    const CheckReport rep = check_candidate(g, cand, {});
    ASSERT_EQ(rep.verdict, Verdict::fail);
    const Diagnosis d = diagnose(g, cand, rep, small_sample());
    ASSERT_NE(d.best_match(), nullptr) << d.summary();
    EXPECT_EQ(d.best_match()->id, id) << d.summary();
  }
  }
}

// Two mistakes at once: no single hypothesis is claimed; the pair is found. A kernel no catalogue
// entry describes (every output scaled by 1.02, beyond even bf16-table) is "no known mistake".
TEST(Diagnose, TwoMistakesAreReportedHonestly) {
  for (const std::string preset : {"llama-3.1-8b", "gpt-j-6b"}) {
    SCOPED_TRACE(preset);
    const GoldenSet& g = golden_of(preset);
    Mistake m;
    m.position_rounding = DType::bf16;
    m.negate_sin = true;
    const std::vector<Tensor> cand = slipped_kernel(g, m);
    const CheckReport rep = check_candidate(g, cand, {});
    const Diagnosis d = diagnose(g, cand, rep, small_sample());
    ASSERT_FALSE(d.ranked.empty());
    EXPECT_FALSE(d.ranked.front().matches) << d.summary();
    for (const HypothesisResult& r : d.ranked) EXPECT_FALSE(r.matches) << r.id;
    ASSERT_FALSE(d.pairs.empty()) << d.summary();
    EXPECT_EQ(d.pairs.front().id, "bf16-positions+sin-negated");
    EXPECT_EQ(d.best_match()->id, "bf16-positions+sin-negated");
    EXPECT_EQ(d.conclusion.rfind("no single known mistake explains this; two at once do: ", 0), 0u) << d.conclusion;
  }
  const GoldenSet& g = golden_of("llama-3.1-8b");
  std::vector<Tensor> cand = slipped_kernel(g, {});
  for (Tensor& t : cand) {
    std::vector<float> v(static_cast<std::size_t>(t.numel()));
    std::memcpy(v.data(), t.data.data(), t.data.size());
    for (float& x : v) x *= 1.02f;
    std::memcpy(t.data.data(), v.data(), t.data.size());
  }
  const CheckReport rep = check_candidate(g, cand, {});
  ASSERT_EQ(rep.verdict, Verdict::fail);
  const Diagnosis d = diagnose(g, cand, rep, small_sample());
  EXPECT_EQ(d.best_match(), nullptr) << d.summary();
  EXPECT_TRUE(d.pairs.empty());
  EXPECT_EQ(d.conclusion.rfind("no known mistake explains this", 0), 0u) << d.conclusion;
  EXPECT_EQ(d.to_json()["match"], nullptr);
}

// ropecheck's own known-bad recipes, run through the kernel-under-test interface.
TEST(Diagnose, KnownBadRecipesOfTheCpuKernel) {
  for (const std::string preset : {"llama-3.1-8b", "gpt-oss-20b", "qwen2-vl-7b"})
    for (const auto& [recipe, id] : {std::pair{"bf16-positions", "bf16-positions"}, std::pair{"f16-positions", "f16-positions"},
                                     std::pair{"bf16-inv-freq", "bf16-inv-freq"}, std::pair{"f16-inv-freq", "f16-inv-freq"},
                                     std::pair{"bf16-table", "class-bf16-table"}}) {
      SCOPED_TRACE(preset + " builtin:" + recipe);
      const GoldenSet& g = golden_of(preset);
      kernels::KernelOptions ko;
      ko.threads = 1;
      const std::unique_ptr<kut::KernelUnderTest> kernel = kut::make_cpu_kernel(*kernels::parse_recipe(recipe), ko);
      const KernelRun run = run_kernel(*kernel, g);
      CheckOptions o;
      o.only = {"cos", "sin", "q_rot", "k_rot"};
      const CheckReport rep = check_candidate(g, run.tensors, o);
      ASSERT_EQ(rep.verdict, Verdict::fail);
      const Diagnosis d = diagnose(g, run.tensors, rep, small_sample());
      ASSERT_NE(d.best_match(), nullptr) << d.summary();
      EXPECT_EQ(d.best_match()->id, id) << d.summary();
    }
}

TEST(Diagnose, JsonFields) {
  const GoldenSet& g = golden_of("gpt-oss-20b");
  Mistake m;
  m.flip_truncate = true;
  const std::vector<Tensor> cand = slipped_kernel(g, m);
  const CheckReport rep = check_candidate(g, cand, {});
  const nlohmann::json j = diagnose(g, cand, rep, small_sample()).to_json();
  EXPECT_EQ(j["match"], "yarn-truncate-flipped");
  EXPECT_EQ(j["judged_class"], "fp32-angle");
  EXPECT_TRUE(j["applicable"].get<bool>());
  EXPECT_GT(j["failing_elements"].get<std::int64_t>(), 0);
  const nlohmann::json& first = j["ranked"][0];
  for (const char* key : {"id", "title", "source", "judged_class", "failing_evaluated", "failing_explained",
                          "failing_fraction", "passing_evaluated", "passing_explained", "max_ratio", "matches"})
    EXPECT_TRUE(first.contains(key)) << key;
  EXPECT_EQ(first["failing_fraction"], 1.0);
}

TEST(Diagnose, MistakesComposeUnlessTheyChangeTheSameThing) {
  Mistake a, b, c;
  a.position_rounding = DType::bf16;
  b.negate_sin = true;
  c.position_rounding = DType::f16;
  const std::optional<Mistake> ab = Mistake::compose(a, b);
  ASSERT_TRUE(ab);
  EXPECT_EQ(ab->position_rounding, DType::bf16);
  EXPECT_TRUE(ab->negate_sin);
  EXPECT_FALSE(Mistake::compose(a, c));
  EXPECT_TRUE(Mistake{}.is_identity());
  EXPECT_FALSE(ab->is_identity());
}

Tensor transposed_to_bhsd(const Tensor& t) {  // [T, H, D] -> [1, H, T, D]
  const std::int64_t T = t.shape[0], H = t.shape[1], D = t.shape[2];
  Tensor o = t;
  const std::size_t row = static_cast<std::size_t>(D) * 4;
  for (std::int64_t tok = 0; tok < T; ++tok)
    for (std::int64_t h = 0; h < H; ++h)
      std::memcpy(o.data.data() + static_cast<std::size_t>(h * T + tok) * row,
                  t.data.data() + static_cast<std::size_t>(tok * H + h) * row, row);
  o.shape = {1, H, T, D};
  return o;
}

TEST(ShapeSlips, NamedWithTheRemedy) {
  const GoldenSet& g = golden_of("llama-3.1-8b");
  std::vector<Tensor> cand = slipped_kernel(g, {});
  const std::int64_t T = g.tokens();
  // q_rot as [1, heads, seq, head_dim]: exit-2 message with the remedy; --layout bhsd makes it pass.
  std::vector<Tensor> bhsd = cand;
  bhsd[2] = transposed_to_bhsd(cand[2]);
  try {
    check_candidate(g, bhsd, {});
    ADD_FAILURE() << "no InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("looks like [batch, heads, seq, head_dim]; pass --layout bhsd"), std::string::npos)
        << e.what();
  }
  apply_candidate_layout(bhsd, CandidateLayout::bhsd);
  EXPECT_EQ(check_candidate(g, bhsd, {}).verdict, Verdict::pass);
  // [1, seq, heads, head_dim].
  std::vector<Tensor> bshd = cand;
  bshd[2].shape.insert(bshd[2].shape.begin(), 1);
  EXPECT_NE(shape_slip("q_rot", bshd[2], {T, 1, 128}).find("pass --layout bshd"), std::string::npos);
  apply_candidate_layout(bshd, CandidateLayout::bshd);
  EXPECT_EQ(check_candidate(g, bshd, {}).verdict, Verdict::pass);
  Tensor batch2 = bhsd[2];
  batch2.shape = {2, 1, T / 2, 128};
  std::vector<Tensor> b2 = {batch2};
  EXPECT_THROW(apply_candidate_layout(b2, CandidateLayout::bhsd), InputError);
  // cos as cat(freqs, freqs) and as repeat_interleave, [tokens, head_dim].
  Tensor cat = cand[0], rep = cand[0];
  cat.shape = rep.shape = {T, 128};
  cat.data.resize(cand[0].data.size() * 2);
  rep.data.resize(cand[0].data.size() * 2);
  for (std::int64_t t = 0; t < T; ++t)
    for (int j = 0; j < 64; ++j) {
      const std::uint8_t* v = cand[0].data.data() + (t * 64 + j) * 4;
      for (std::int64_t at : {t * 128 + j, t * 128 + j + 64}) std::memcpy(cat.data.data() + at * 4, v, 4);
      for (std::int64_t at : {t * 128 + 2 * j, t * 128 + 2 * j + 1}) std::memcpy(rep.data.data() + at * 4, v, 4);
    }
  EXPECT_EQ(shape_slip("cos", cat, {T, 64}),
            "cos with equal halves: a cat(freqs, freqs) table; ropecheck expects [tokens, pairs]: pass cos[..., :64]");
  EXPECT_NE(shape_slip("cos", rep, {T, 64}).find("a repeat_interleave table"), std::string::npos);
  Tensor lead = cand[0];
  lead.shape = {1, T, 64};
  EXPECT_EQ(shape_slip("cos", lead, {T, 64}), "has leading dimensions of 1; squeeze it to [tokens, pairs]");
  Tensor other = cand[0];
  other.shape = {T * 64};
  EXPECT_EQ(shape_slip("cos", other, {T, 64}), "");
  EXPECT_EQ(parse_candidate_layout("bhsd"), CandidateLayout::bhsd);
  EXPECT_FALSE(parse_candidate_layout("sbhd"));
}

TEST(Diagnose, SinusoidalSetsAreNotApplicable) {
  GoldenOptions o;
  o.spec = load_preset("transformer-base");
  o.positions = parse_positions("0:4");
  o.dtypes = {DType::f32};
  o.out = temp_root() / "sinusoidal";
  write_golden_set(o);
  const GoldenSet g = load_golden_set(o.out);
  std::vector<Tensor> cand = {g.tensor("pe.f32")};
  cand[0].name = "pe.f32";
  const CheckReport rep = check_candidate(g, cand, {});
  const Diagnosis d = diagnose(g, cand, rep, small_sample(), true);
  EXPECT_FALSE(d.applicable);
  EXPECT_EQ(d.conclusion, "no diagnosis: the catalogue covers RoPE; this golden set is sinusoidal");
}

}  // namespace
}  // namespace ropecheck::golden
