// DeepSeek MLA's rotary slice and k_pe key end to end (core/SPEC_FORMAT.md "MLA", golden/GOLDEN_FORMAT.md
// "MLA sets", checker/CHECK_REPORT.md, checker/DIAGNOSIS.md): a deepseek-v3-mla set is written with the
// k_pe layout; a float32 MLA kernel written here from the spec (HF fp32 recipe: f32 angle, libm cosf /
// sinf, f32 rotation; no code shared with the reference or the diagnosis) passes fp32-angle, and so do
// ropecheck's own CPU recipes through the kernel-under-test interface; seven injected MLA mistakes fail
// and the diagnosis names each at rank 1; a q_nope channel off by one ulp fails through the bit-exact
// pass-through rule alone (it is inside the class bound).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "temp_root.hpp"
#include "ropecheck/checker/check_part.hpp"
#include "ropecheck/checker/checker.hpp"
#include "ropecheck/checker/diagnose.hpp"
#include "ropecheck/checker/kernel_run.hpp"
#include "ropecheck/formulas/rope.hpp"
#include "ropecheck/golden/golden_set.hpp"
#include "ropecheck/golden/golden_writer.hpp"
#include "ropecheck/kut/builtin_sources.hpp"
#include "ropecheck/reference/presets.hpp"

namespace ropecheck::golden {
using namespace ropecheck::io;
using namespace ropecheck::checker;
namespace {

namespace fs = std::filesystem;

const GoldenSet& mla_set() {
  static const testing_support::TempRoot root("ropecheck_mla_");
  static const GoldenSet g = [] {
    GoldenOptions o;
    o.spec = load_preset("deepseek-v3-mla");
    o.positions = parse_positions("0:3,255:259,2047,4095,4097,30001,70001,131071");
    o.dtypes = {DType::f32};
    o.heads = 2;
    o.seed = 11;
    o.out = root.path() / "mla";
    o.threads = 1;
    write_golden_set(o);
    return load_golden_set(o.out);
  }();
  return g;
}

// The injected mistakes (DIAGNOSIS.md "MLA" rows), made the way a kernel makes them.
enum class Slip { none, slice_at_start, whole_head, pairing, mscale_on_slice, mscale_on_nope, k_pe_one_position, rotary_width };

Tensor f32_tensor(const std::string& name, std::vector<std::int64_t> shape, const std::vector<float>& v) {
  Tensor t;
  t.name = name;
  t.dtype = TensorDType::f32;
  t.shape = std::move(shape);
  t.data.resize(v.size() * 4);
  std::memcpy(t.data.data(), v.data(), t.data.size());
  return t;
}

std::vector<float> floats(const Tensor& t) {
  std::vector<float> v(static_cast<std::size_t>(t.numel()));
  std::memcpy(v.data(), t.data.data(), t.data.size());
  return v;
}

// Rows of `width` channels, `rows_per_token` a token: the pairs of spec r rotated (f32 angle p * w, cosf /
// sinf, f32 products), every other channel times `pass` (1: copied).
std::vector<float> rotate(const RopeSpec& r, const GoldenSet& g, std::vector<float> x, std::int64_t rows_per_token,
                          float att, float pass, bool one_position) {
  const RopeFrequencies<double> f = rope_frequencies<double>(r, g.seq_len());
  const int D = r.head_dim, P = rope_pairs(r);
  std::vector<float> y = x;
  for (std::int64_t t = 0; t < g.tokens(); ++t) {
    const float p = static_cast<float>(g.positions()[one_position ? 0 : static_cast<std::size_t>(t)].t);
    for (std::int64_t h = 0; h < rows_per_token; ++h) {
      const std::size_t row = static_cast<std::size_t>((t * rows_per_token + h) * D);
      for (int c = 0; c < D; ++c)
        if (!is_rotary_channel(r, c)) y[row + static_cast<std::size_t>(c)] = x[row + static_cast<std::size_t>(c)] * pass;
      for (int j = 0; j < P; ++j) {
        const float angle = p * static_cast<float>(f.inv_freq[static_cast<std::size_t>(j)]);
        const float c = std::cos(angle) * att, s = std::sin(angle) * att;
        const auto [a, b] = pair_channels(r, j);
        const float xa = x[row + static_cast<std::size_t>(a)], xb = x[row + static_cast<std::size_t>(b)];
        y[row + static_cast<std::size_t>(a)] = xa * c - xb * s;
        y[row + static_cast<std::size_t>(b)] = xb * c + xa * s;
      }
    }
  }
  return y;
}

std::vector<Tensor> mla_kernel(const GoldenSet& g, Slip slip) {
  const RopeSpec truth = g.spec().rope;
  RopeSpec q = truth;
  const float mscale = static_cast<float>(1 + 0.1 * std::log(effective_factor(truth)));  // get_mscale(40, 1)
  float att = static_cast<float>(rope_frequencies<double>(truth, g.seq_len()).attention_factor), pass = 1;
  switch (slip) {
    case Slip::slice_at_start: q.rotary_offset = 0; break;
    case Slip::whole_head: q.rotary_dim = q.head_dim, q.rotary_offset = 0; break;
    case Slip::pairing: q.layout = RopeLayout::half_split; break;
    case Slip::mscale_on_slice: att = mscale; break;
    case Slip::mscale_on_nope: pass = mscale; break;
    case Slip::rotary_width: q.rotary_dim = 32; break;
    default: break;
  }
  RopeSpec k = key_rope(truth);
  if (slip == Slip::pairing) k.layout = RopeLayout::half_split;
  const std::int64_t T = g.tokens(), H = g.heads();
  std::vector<Tensor> out = {
      f32_tensor("q_rot.f32", {T, H, truth.head_dim}, rotate(q, g, floats(g.tensor("q")), H, att, pass, false)),
      f32_tensor("k_pe_rot.f32", {T, truth.rotary_dim},
                 rotate(k, g, floats(g.tensor("k_pe")), 1, att, 1, slip == Slip::k_pe_one_position))};
  return out;
}

// The float kernel returns the rotated tensors only (no cos / sin).
CheckOptions rotated_only() {
  CheckOptions o;
  o.only = {"q_rot", "k_pe_rot"};
  return o;
}

DiagnoseOptions small_sample() {
  DiagnoseOptions o;
  o.max_failing = 48;
  o.max_passing = 24;
  o.threads = 1;
  return o;
}

TEST(Mla, GoldenSetHasTheSliceAndAKpeKeyWithoutHeadAxis) {
  const GoldenSet& g = mla_set();
  EXPECT_EQ(g.find("k"), nullptr);
  EXPECT_EQ(g.find("k_rot.f32"), nullptr);
  ASSERT_NE(g.find("k_pe"), nullptr);
  EXPECT_EQ(g.find("k_pe")->shape, (std::vector<std::int64_t>{g.tokens(), 64}));
  EXPECT_EQ(g.find("k_pe_rot.f32")->shape, (std::vector<std::int64_t>{g.tokens(), 64}));
  EXPECT_EQ(g.find("q_rot.f64")->shape, (std::vector<std::int64_t>{g.tokens(), 2, 192}));
  // q_nope copied bit for bit; q_pe rotated (position 0 aside: it rotates by 0).
  const std::vector<float> q = floats(g.tensor("q")), y = floats(g.tensor("q_rot.f32"));
  int rotated_differs = 0;
  for (std::size_t row = 0; row < q.size(); row += 192)
    for (std::size_t c = 0; c < 192; ++c) {
      if (c < 128) {
        EXPECT_EQ(std::memcmp(&q[row + c], &y[row + c], 4), 0) << row << " " << c;
      }
      rotated_differs += c >= 128 && q[row + c] != y[row + c];
    }
  EXPECT_GT(rotated_differs, 0);
}

TEST(Mla, CorrectFloatKernelPassesWithBitExactPassThrough) {
  const GoldenSet& g = mla_set();
  const CheckReport rep = check_candidate(g, mla_kernel(g, Slip::none), rotated_only());
  EXPECT_EQ(rep.verdict, Verdict::pass) << rep.summary();
  ASSERT_EQ(rep.tensors.size(), 2u);
  ASSERT_TRUE(rep.tensors[0].passthrough.has_value());
  EXPECT_EQ(rep.tensors[0].passthrough->elements, g.tokens() * 2 * 128);
  EXPECT_EQ(rep.tensors[0].passthrough->differing, 0);
  EXPECT_EQ(rep.to_json()["tensors"][0]["passthrough"]["bit_exact"], true);
  EXPECT_FALSE(rep.tensors[1].passthrough.has_value());  // k_pe_rot: every channel rotary
}

TEST(Mla, BuiltinRecipesPassTheirClassThroughTheKernelInterface) {
  const GoldenSet& g = mla_set();
  for (const char* recipe : {"accurate", "hf", "meta", "ggml"}) {
    SCOPED_TRACE(recipe);
    kernels::KernelOptions ko;
    ko.threads = 1;
    const std::unique_ptr<kut::KernelUnderTest> kernel = kut::make_cpu_kernel(*kernels::parse_recipe(recipe), ko);
    const KernelRun run = run_kernel(*kernel, g);
    ASSERT_TRUE(run.declined.empty()) << run.declined;
    std::vector<std::string> names;
    for (const Tensor& t : run.tensors) names.push_back(t.name);
    for (const char* want : {"q_rot.f32", "k_pe_rot.f32", "cos.f32", "sin.f32"})
      EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
    const CheckReport rep = check_candidate(g, run.tensors, {});
    EXPECT_EQ(rep.verdict, Verdict::pass) << rep.summary();
    for (const TensorReport& t : rep.tensors)  // q_rot.<dt>: bit-exact q_nope; nothing else has the record
      EXPECT_EQ(t.passthrough.has_value() ? t.passthrough->differing : -1, t.base == "q_rot" ? 0 : -1) << t.golden_name;
  }
}

// One ulp on a q_nope channel under --atol 0.01: inside the criterion, so only the bit-exact rule fails it
// (a class criterion fails it too: a representable value's neighbours lie a whole ulp away).
TEST(Mla, OneUlpOnQNopeFailsAsPassThroughOnly) {
  const GoldenSet& g = mla_set();
  std::vector<Tensor> cand = mla_kernel(g, Slip::none);
  std::vector<float> q = floats(cand[0]);
  std::size_t at = 0;
  while (q[at] == 0) ++at;  // a nonzero q_nope channel of token 0, head 0
  q[at] = std::nextafter(q[at], 2 * q[at]);
  cand[0] = f32_tensor("q_rot.f32", cand[0].shape, q);
  CheckOptions o = rotated_only();
  o.criterion = Criterion::of_tolerance(0.01, 0);  // the rotated slice's f32 angle error is below 0.005
  const CheckReport rep = check_candidate(g, cand, o);
  EXPECT_EQ(rep.verdict, Verdict::fail);
  EXPECT_EQ(rep.tensors[0].violations, 0);  // the criterion holds
  EXPECT_EQ(rep.tensors[0].passthrough->differing, 1);
  EXPECT_EQ(rep.tensors[0].passthrough->first_differing_position, 0);
  EXPECT_NE(rep.tensors[0].reason.find("1 pass-through element differ from the input (must be bit-exact"), std::string::npos)
      << rep.tensors[0].reason;
}

// The pass-through counts travel in sharded parts: 3 parts merged give one run's report, bit for bit.
TEST(Mla, PassThroughCountsMergeAcrossShards) {
  const GoldenSet& g = mla_set();
  const std::vector<Tensor> cand = mla_kernel(g, Slip::mscale_on_nope);
  const CheckReport one = check_candidate(g, cand, rotated_only());
  ASSERT_TRUE(one.tensors[0].passthrough.has_value());
  std::int64_t nonzero_nope = 0;  // x * mscale == x only for x = 0
  const std::vector<float> q = floats(g.tensor("q"));
  for (std::size_t i = 0; i < q.size(); ++i) nonzero_nope += i % 192 < 128 && q[i] != 0;
  EXPECT_EQ(one.tensors[0].passthrough->differing, nonzero_nope);
  EXPECT_GT(nonzero_nope, 0);
  std::vector<nlohmann::json> parts;
  std::vector<std::string> names;
  for (int i = 1; i <= 3; ++i) {
    parts.push_back(nlohmann::json::parse(
        part_to_json(check_candidate_part(g, cand, rotated_only(), Shard{i, 3}), {}, {{"kind", "test"}}).dump()));
    names.push_back(std::to_string(i) + ".json");
  }
  EXPECT_EQ(finalize(merge_check_parts(parts, names).whole).to_json().dump(), one.to_json().dump());
}

TEST(Mla, EveryInjectedMistakeFailsAndIsNamed) {
  const GoldenSet& g = mla_set();
  const std::vector<std::pair<Slip, std::string>> cases = {
      {Slip::slice_at_start, "mla-slice-at-start"},       {Slip::whole_head, "mla-whole-head-rotated"},
      {Slip::pairing, "wrong-pairing"},                   {Slip::mscale_on_slice, "mla-yarn-mscale-on-slice"},
      {Slip::mscale_on_nope, "mla-yarn-mscale-on-nope"},  {Slip::k_pe_one_position, "mla-k-pe-one-position"},
      {Slip::rotary_width, "fit-rotary-width"}};
  for (const auto& [slip, id] : cases) {
    SCOPED_TRACE(id);
    const std::vector<Tensor> cand = mla_kernel(g, slip);
    const CheckReport rep = check_candidate(g, cand, rotated_only());
    ASSERT_EQ(rep.verdict, Verdict::fail);
    const Diagnosis d = diagnose(g, cand, rep, small_sample());
    ASSERT_NE(d.best_match(), nullptr) << d.summary();
    EXPECT_EQ(d.best_match()->id, id) << d.summary();
  }
}

TEST(Mla, KpeExpandedToEveryHeadIsNamedAsAShapeSlip) {
  const GoldenSet& g = mla_set();
  Tensor t = f32_tensor("k_pe_rot.f32", {g.tokens(), 2, 64}, std::vector<float>(static_cast<std::size_t>(g.tokens() * 128)));
  EXPECT_NE(shape_slip("k_pe_rot", t, {g.tokens(), 64}).find("k_pe expanded to every head"), std::string::npos);
  t.shape = {1, g.tokens(), 64};
  t.data.resize(static_cast<std::size_t>(g.tokens() * 64 * 4));
  EXPECT_NE(shape_slip("k_pe_rot", t, {g.tokens(), 64}).find("squeeze it to [tokens, rotary_dim]"), std::string::npos);
}

}  // namespace
}  // namespace ropecheck::golden
