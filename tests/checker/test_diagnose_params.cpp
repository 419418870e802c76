// The diagnosis's newer hypotheses (checker/DIAGNOSIS.md): LongRoPE lists swapped, the default base,
// periods for frequencies, positions wrapped to int32 / int16, and the parametric fits (a position
// offset, a base, a scaling factor, an attention factor, a rotary width). Each mistake is built into
// the float32 test kernel (support/slipped_kernel.hpp), run on small golden sets of at least three
// specs, checked with the default class and diagnosed: the mistake must be rank 1 and match, a fit must
// recover the injected value, and correct kernels must get no diagnosis.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "slipped_kernel.hpp"
#include "temp_root.hpp"
#include "test_paths.hpp"
#include "ropecheck/checker/checker.hpp"
#include "ropecheck/checker/diagnose.hpp"
#include "ropecheck/checker/kernel_run.hpp"
#include "ropecheck/core/spec_json.hpp"
#include "ropecheck/golden/golden_set.hpp"
#include "ropecheck/golden/golden_writer.hpp"
#include "ropecheck/plugin/kernel_name.hpp"
#include "ropecheck/reference/presets.hpp"

namespace ropecheck::golden {
using namespace ropecheck::io;
using namespace ropecheck::checker;
namespace {

namespace fs = std::filesystem;
using testing_support::slipped_kernel;

const fs::path& temp_root() {
  static const testing_support::TempRoot root("ropecheck_diagnose_params_");
  return root.path();
}

const char* kText = "0:3,255:259,1000,2047,2049,4095,4097,30001,70001,131071";

// A spec by preset name, or "file:NAME" for tests/python/specs/NAME.json, or "hf:phimoe" for the
// PhiMoE config fixture.
EncodingSpec spec_of(const std::string& name) {
  if (name.rfind("file:", 0) == 0) return load_spec_file(fs::path(ropecheck::test::specs_dir()) / (name.substr(5) + ".json"));
  if (name == "hf:phimoe") return load_hf_config_file(fs::path(ropecheck::test::data_dir()) / ".." / "cli" / "hf_phimoe_config.json");
  return load_preset(name);
}

// The golden set of `spec` at `positions` (one head, f32), made once per (spec, positions, tweak).
const GoldenSet& golden_of(const std::string& spec, const std::string& positions, const std::string& tweak = "") {
  static std::map<std::string, GoldenSet> sets;
  const std::string key = spec + "|" + positions + "|" + tweak;
  if (auto it = sets.find(key); it != sets.end()) return it->second;
  GoldenOptions o;
  o.spec = spec_of(spec);
  if (tweak == "attention 1.2") o.spec.rope.scaling.attention_factor = 1.2;
  o.positions = parse_positions(positions);
  o.dtypes = {DType::f32};
  o.heads = 1;
  o.seed = 11;
  o.out = temp_root() / ("set" + std::to_string(sets.size()));
  o.threads = 1;
  write_golden_set(o);
  return sets.emplace(key, load_golden_set(o.out)).first->second;
}

DiagnoseOptions small_sample() {
  DiagnoseOptions o;
  o.max_failing = 48;
  o.max_passing = 24;
  o.threads = 1;
  return o;
}

// The kernel with mistake m on the set, checked (q_rot / k_rot only when the tables change width) and
// diagnosed; the check must fail.
Diagnosis diagnosed(const GoldenSet& g, const Mistake& m) {
  const std::vector<Tensor> cand = slipped_kernel(g, m);
  CheckOptions co;
  if (m.rotary_dim) co.only = {"q_rot.f32", "k_rot.f32"};
  const CheckReport rep = check_candidate(g, cand, co);
  EXPECT_EQ(rep.verdict, Verdict::fail) << rep.summary();
  return diagnose(g, cand, rep, small_sample());
}

const ParameterFit* fit_of(const Diagnosis& d, const std::string& id) {
  for (const ParameterFit& f : d.fits)
    if (f.id == id) return &f;
  return nullptr;
}

struct Case {
  std::string spec, positions;
  Mistake mistake;
  std::string id;     // the hypothesis named at rank 1
  std::string value;  // its parameter's value, when it has one
};

void expect_rank_one(const Case& c, const std::string& tweak = "") {
  SCOPED_TRACE(c.spec + " at " + c.positions + " -> " + c.id);
  const GoldenSet& g = golden_of(c.spec, c.positions, tweak);
  const Diagnosis d = diagnosed(g, c.mistake);
  ASSERT_FALSE(d.ranked.empty()) << d.conclusion;
  const HypothesisResult& r = d.ranked.front();
  EXPECT_EQ(r.id, c.id) << d.summary();
  EXPECT_TRUE(r.matches) << d.summary();
  ASSERT_NE(d.best_match(), nullptr) << d.summary();
  EXPECT_EQ(d.best_match()->id, c.id);
  if (!c.value.empty()) {
    ASSERT_TRUE(r.parameter) << d.summary();
    EXPECT_EQ(r.parameter->value, c.value) << d.summary();
    // "base 10000 fits every failing element; the spec says 500000 (...)"
    const std::string head = r.parameter->name + " " + c.value + " fits every failing element; the spec says " + r.parameter->spec_value;
    EXPECT_EQ(d.conclusion.rfind(head, 0), 0u) << d.conclusion;
  }
}

Mistake with(auto field, auto value) {
  Mistake m;
  m.*field = value;
  return m;
}

TEST(DiagnoseNew, LongRopeListsSwappedInBothDirections) {
  const Mistake m = with(&Mistake::swap_longrope_factors, true);
  // Short sets (the long lists at a short length, as mlx-lm does) and long sets (the short lists past
  // original_max_position_embeddings) of three LongRoPE specs.
  for (const Case& c : {Case{"phi-3.5-mini", "0:3,255:259,1000,2047,4095", m, "longrope-factors-swapped", ""},
                        Case{"phi-3.5-mini", kText, m, "longrope-factors-swapped", ""},
                        Case{"hf:phimoe", "0:3,255:259,1000,2047,4095", m, "longrope-factors-swapped", ""},
                        Case{"hf:phimoe", kText, m, "longrope-factors-swapped", ""},
                        Case{"file:x-longrope-small", "0:3,255:259,1000,2047,4095", m, "longrope-factors-swapped", ""},
                        Case{"file:x-longrope-small", "0:3,255:259,1000,2047,4095,8191,16383", m, "longrope-factors-swapped", ""}})
    expect_rank_one(c);
}

TEST(DiagnoseNew, DefaultBaseWhereTheSpecSaysAnother) {
  const Mistake m = with(&Mistake::base, 10000.0);
  for (const char* spec : {"llama-3.1-8b", "qwen2-7b", "gpt-oss-20b", "llama-3-8b"})
    expect_rank_one({spec, kText, m, "base-default", "10000"});
}

TEST(DiagnoseNew, PeriodsForInverseFrequencies) {
  // Angles p / w: discriminated at small positions only (further out every bound around them saturates).
  const Mistake m = with(&Mistake::reciprocal_freq, true);
  for (const char* spec : {"llama-2-7b", "mistral-7b", "gpt-j-6b", "qwen2-7b"})
    expect_rank_one({spec, "0:16", m, "inv-freq-reciprocal", ""});
}

TEST(DiagnoseNew, PositionsWrappedToInt16AndInt32) {
  const Mistake m16 = with(&Mistake::position_wrap_bits, 16);
  for (const char* spec : {"llama-3.1-8b", "llama-2-7b", "gpt-j-6b"})
    expect_rank_one({spec, "0:3,1000,32767,32768,40000,65535,70001", m16, "positions-int16", ""});
  // Past 2^31 only the low frequencies still discriminate under fp32-angle: specs with small ones.
  const Mistake m32 = with(&Mistake::position_wrap_bits, 32);
  for (const char* spec : {"llama-3.1-8b", "qwen2-7b", "llama-3.2-1b"})
    expect_rank_one({spec, "0:3,1000,3000000000,3000000256,4000000000", m32, "positions-int32", ""});
}

TEST(DiagnoseFits, PositionOffset) {
  const Mistake m = with(&Mistake::position_shift, std::int64_t{7});
  for (const char* spec : {"llama-3.1-8b", "gpt-j-6b", "qwen2-7b", "gpt-oss-20b"})
    expect_rank_one({spec, kText, m, "fit-position-offset", "+7"});
}

TEST(DiagnoseFits, Base) {
  // 10000 is the catalogue's base-default; the fit finds the same value and says so.
  for (const char* spec : {"llama-3.1-8b", "qwen2-7b"}) {
    const Diagnosis d = diagnosed(golden_of(spec, kText), with(&Mistake::base, 10000.0));
    const ParameterFit* f = fit_of(d, "fit-base");
    ASSERT_NE(f, nullptr) << d.summary();
    EXPECT_EQ(f->parameter.value, "10000");
    EXPECT_EQ(f->outcome, "same as base-default");
  }
  for (const char* spec : {"llama-3.1-8b", "qwen2-7b", "llama-2-7b"})
    expect_rank_one({spec, kText, with(&Mistake::base, 20000.0), "fit-base", "20000"});
}

TEST(DiagnoseFits, ScalingFactor) {
  expect_rank_one({"llama-3.1-8b", kText, with(&Mistake::factor, 4.0), "fit-factor", "4"});        // llama3, 8
  expect_rank_one({"gemma-3-4b-global", kText, with(&Mistake::factor, 4.0), "fit-factor", "4"});   // linear, 8
  expect_rank_one({"qwen2.5-7b-yarn", kText, with(&Mistake::factor, 2.0), "fit-factor", "2"});     // YaRN, 4
}

TEST(DiagnoseFits, AttentionFactor) {
  // 1 where the spec says 1.2 is the catalogue's attention-factor-missing; the fit recovers the 1.
  const Diagnosis d = diagnosed(golden_of("qwen2.5-7b-yarn", kText, "attention 1.2"), with(&Mistake::attention, 1.0));
  ASSERT_NE(d.best_match(), nullptr) << d.summary();
  EXPECT_EQ(d.best_match()->id, "attention-factor-missing");
  const ParameterFit* f = fit_of(d, "fit-attention-factor");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->parameter.value, "1");
  EXPECT_EQ(f->parameter.spec_value, "1.2");
  EXPECT_EQ(f->outcome, "same as attention-factor-missing");
  // A value no catalogue entry computes is the fit's own hypothesis.
  for (const char* spec : {"qwen2.5-7b-yarn", "gpt-oss-20b", "phi-3.5-mini"})
    expect_rank_one({spec, kText, with(&Mistake::attention, 1.1), "fit-attention-factor", "1.1"}, "attention 1.2");
}

TEST(DiagnoseFits, RotaryWidth) {
  expect_rank_one({"gpt-neox-20b", kText, with(&Mistake::rotary_dim, 32), "fit-rotary-width", "32"});  // spec: 24 of 96
  expect_rank_one({"phi-2", kText, with(&Mistake::rotary_dim, 80), "fit-rotary-width", "80"});         // spec: 32 of 80
  expect_rank_one({"llama-2-7b", kText, with(&Mistake::rotary_dim, 64), "fit-rotary-width", "64"});     // spec: 128
}

// Correct kernels: nothing to diagnose on any spec (even asked to diagnose every tensor), and under a
// stricter class the class explanation, never a fitted parameter.
TEST(DiagnoseFits, CorrectKernelsGetNoDiagnosis) {
  for (const char* spec : {"llama-3.1-8b", "gpt-j-6b", "gpt-oss-20b", "qwen2.5-7b-yarn", "phi-3.5-mini", "gpt-neox-20b"}) {
    SCOPED_TRACE(spec);
    const GoldenSet& g = golden_of(spec, kText);
    for (const char* recipe : {"builtin:hf", "builtin:meta", "builtin:accurate"}) {
      SCOPED_TRACE(recipe);
      plugin::OpenOptions ko;
      ko.cpu.threads = 1;
      plugin::OpenedKernel k = plugin::open_kernel(plugin::parse_kernel_name(recipe), ko);
      const KernelRun run = run_kernel(*k.kernel, g);
      if (!run.declined.empty()) continue;
      CheckOptions co;
      co.only = {"cos.f32", "sin.f32", "q_rot.f32", "k_rot.f32"};
      const CheckReport rep = check_candidate(g, run.tensors, co);
      ASSERT_EQ(rep.verdict, Verdict::pass) << rep.summary();
      const Diagnosis d = diagnose(g, run.tensors, rep, small_sample(), /*all_tensors=*/true);
      EXPECT_EQ(d.best_match(), nullptr) << d.summary();
      EXPECT_TRUE(d.ranked.empty() && d.fits.empty()) << d.summary();
    }
    const std::vector<Tensor> cand = slipped_kernel(g, {});
    CheckOptions strict;
    strict.criterion = Criterion::of_class(accuracy::AccuracyClass::f32_reduced);
    const CheckReport rep = check_candidate(g, cand, strict);
    ASSERT_EQ(rep.verdict, Verdict::fail);
    const Diagnosis d = diagnose(g, cand, rep, small_sample());
    ASSERT_NE(d.best_match(), nullptr) << d.summary();
    EXPECT_EQ(d.best_match()->id, "class-fp32-angle") << d.summary();
    for (const HypothesisResult& r : d.ranked) EXPECT_FALSE(r.matches && r.id.rfind("fit-", 0) == 0) << r.id;
  }
}

// The "closest" hint only when it explains most of the failing elements.
TEST(DiagnoseFits, ClosestOnlyForAMajority) {
  const GoldenSet& g = golden_of("llama-3.1-8b", kText);
  auto scaled = [](Tensor& t) {
    std::vector<float> v(static_cast<std::size_t>(t.numel()));
    std::memcpy(v.data(), t.data.data(), t.data.size());
    for (float& x : v) x *= 1.02f;
    std::memcpy(t.data.data(), v.data(), t.data.size());
  };
  for (const int wrong : {1, 3}) {  // tensors (of cos, sin, q_rot, k_rot) scaled beside bf16 positions
    std::vector<Tensor> cand = slipped_kernel(g, with(&Mistake::position_rounding, DType::bf16));
    for (int k = 0; k < wrong; ++k) scaled(cand[static_cast<std::size_t>(3 - k)]);
    const CheckReport rep = check_candidate(g, cand, {});
    const Diagnosis d = diagnose(g, cand, rep, small_sample());
    EXPECT_EQ(d.best_match(), nullptr) << d.summary();
    const bool named = d.conclusion.find("the closest, positions rounded to bf16") != std::string::npos;
    EXPECT_EQ(named, wrong == 1) << d.conclusion;
  }
}

}  // namespace
}  // namespace ropecheck::golden
