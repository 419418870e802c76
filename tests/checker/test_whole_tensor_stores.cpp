// FP8 stores whose data-derived scale is taken over every token (vLLM's dynamic per-tensor quantization,
// golden --stores e4m3fn:per-tensor, and per head across tokens, :per-head): the golden scale is that of
// the whole tensor's exact amax, one group of all tokens (or one per head); the own rotate-then-quantize
// recipes pass; the injected FP8 store mistakes fail and the diagnosis names each at rank 1; the recipe's
// and the diagnosis's mistaken stores (written apart) agree byte for byte; a tensor of one token gives
// the per-token (per-(token, head)) store's scales and codes.
#include <gtest/gtest.h>

#include <cstring>

#include "ropecheck/checker/checker.hpp"
#include "ropecheck/golden/golden_writer.hpp"
#include "ropecheck/kernels/rope_quantize.hpp"
#include "ropecheck/reference/presets.hpp"
#include "ropecheck/reference/quantized_stores.hpp"
#include "ropecheck/reference/store_mistakes.hpp"
#include "golden_options.hpp"
#include "temp_root.hpp"

namespace ropecheck::checker {
namespace {

using kernels::StoreMistake;
constexpr const char* kStores = "e4m3fn:per-tensor,e5m2:nonfinite:per-head";

const golden::GoldenSet& whole_set() {
  static const testing_support::TempRoot root("ropecheck_whole_tensor_");
  // Positions near 0 (the whole group's budget is its worst token's); blocks of 2 tokens (several blocks: the
  // scale is still the whole tensor's).
  static const golden::GoldenSet set = testing_support::store_golden_set("0:6", 7, kStores, root.path() / "set", 2);
  return set;
}

quant::StoreSpec spec_named(const std::string& store) {
  std::string why;
  return *quant::parse_store(store == "e4m3fn" ? "e4m3fn:per-tensor" : "e5m2:nonfinite:per-head", why);
}

std::vector<io::Tensor> candidate(const golden::GoldenSet& g, kernels::Recipe recipe, StoreMistake m) {
  const kernels::RopePlan plan = kernels::make_rope_plan(g.spec().rope, recipe);
  std::vector<std::int64_t> pos;
  for (const Position& p : g.positions()) pos.push_back(p.t);
  std::vector<io::Tensor> out;
  for (const std::string& store : store_outputs(g)) {
    const io::Tensor& in = g.tensor(store.substr(0, 1));
    const std::int64_t T = in.shape[0], H = in.shape[1], D = in.shape[2];
    const kernels::StoredTensor st = kernels::rope_quantize(
        plan, kernels::PositionsView::of(pos),
        kernels::TensorView::contiguous(const_cast<std::uint8_t*>(in.data.data()), DType::f32, T, H, D),
        spec_named(store.substr(store.find('.') + 1)), m);
    const golden::ManifestTensor& c = *g.find(store);
    const golden::ManifestTensor& s = *g.find(store + ".scale");
    out.push_back({store, c.dtype, c.shape, st.codes});
    out.push_back({store + ".scale", s.dtype, s.shape, st.scales});
  }
  return out;
}

StoresReport judge(const golden::GoldenSet& g, const std::vector<io::Tensor>& cand) {
  CheckOptions opt;
  opt.only = store_outputs(g);
  opt.threads = 2;
  return check_candidate(g, cand, opt).stores.value_or(StoresReport{});
}

TEST(WholeTensorStores, TheScaleHasNoTokenAxis) {
  const golden::GoldenSet& g = whole_set();
  EXPECT_EQ(g.find("q_rot.e4m3fn.scale")->shape, (std::vector<std::int64_t>{1}));
  EXPECT_EQ(g.find("k_rot.e5m2.scale_margin")->shape, (std::vector<std::int64_t>{2}));
  // The golden scale is RN_f32(amax / 448) of the whole f64 tensor (clamp far below: |y| ~ 1).
  const io::Tensor& y = g.tensor("q_rot.f64");
  double amax = 0;
  for (std::size_t i = 0; i < y.data.size() / 8; ++i) {
    double v;
    std::memcpy(&v, y.data.data() + 8 * i, 8);
    amax = std::max(amax, std::fabs(v));
  }
  float s;
  std::memcpy(&s, g.tensor("q_rot.e4m3fn.scale").data.data(), 4);
  EXPECT_EQ(s, static_cast<float>(amax / 448.0));
}

TEST(WholeTensorStores, OwnRecipesPass) {
  for (kernels::Recipe recipe : {kernels::Recipe::accurate, kernels::Recipe::hf}) {
    const StoresReport r = judge(whole_set(), candidate(whole_set(), recipe, StoreMistake::none));
    ASSERT_EQ(r.stores.size(), 4u);
    for (const StoreCheck& s : r.stores) {
      EXPECT_EQ(s.failed + s.groups_failed, 0) << s.golden_name;
      EXPECT_EQ(s.groups, s.golden_name.ends_with("e4m3fn") ? 1 : 2) << s.golden_name;
      EXPECT_GT(s.passed, s.elements / 4) << s.golden_name;
      EXPECT_FALSE(s.diagnosis.has_value()) << s.golden_name;
    }
  }
}

TEST(WholeTensorStores, InjectedMistakesFailAndAreNamed) {
  for (StoreMistake m : {StoreMistake::quantize_before_rotate, StoreMistake::scale_from_input, StoreMistake::scale_inverted,
                         StoreMistake::scale_applied_twice, StoreMistake::e5m2_for_e4m3fn}) {
    for (const StoreCheck& s : judge(whole_set(), candidate(whole_set(), kernels::Recipe::hf, m)).stores) {
      EXPECT_EQ(s.verdict, Verdict::fail) << kernels::to_string(m) << " " << s.golden_name;
      ASSERT_TRUE(s.diagnosis.has_value()) << s.golden_name;
      EXPECT_EQ(s.diagnosis->match.value_or(""), kernels::to_string(m)) << s.golden_name << ": " << s.diagnosis->conclusion;
    }
  }
}

// A scale 1% off fails the one group of the tensor, and no other group.
TEST(WholeTensorStores, AWrongScaleFailsItsGroup) {
  std::vector<io::Tensor> cand = candidate(whole_set(), kernels::Recipe::hf, StoreMistake::none);
  for (io::Tensor& t : cand)
    if (t.name == "q_rot.e4m3fn.scale") {
      float s;
      std::memcpy(&s, t.data.data(), 4);
      s *= 1.01f;  // past the budget of the worst token's amax / 448 (an ulp or two is within it: not tested)
      std::memcpy(t.data.data(), &s, 4);
    }
  for (const StoreCheck& s : judge(whole_set(), cand).stores)
    EXPECT_EQ(s.groups_failed, s.golden_name == "q_rot.e4m3fn" ? 1 : 0) << s.golden_name;
}

TEST(WholeTensorStores, MistakenStoresAgreeWithTheRecipe) {
  const std::int64_t T = 3, H = 2, D = 64;
  std::vector<float> x(static_cast<std::size_t>(T * H * D)), in(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * float(i)) * (1 + float(i % 7)), in[i] = std::cos(0.11f * float(i));
  for (const std::string item : {"e4m3fn:per-tensor", "e5m2:per-head"}) {
    std::string why;
    const quant::StoreSpec spec = *quant::parse_store(item, why);
    for (StoreMistake m : {StoreMistake::none, StoreMistake::scale_from_input, StoreMistake::scale_inverted,
                           StoreMistake::scale_applied_twice, StoreMistake::e5m2_for_e4m3fn}) {
      const kernels::StoredTensor a = kernels::quantize_store(x, T, H, D, spec, m, in);
      const quant::StoreBytes b = quant::mistaken_store(kernels::to_string(m), x, in, T, H, D, spec);
      EXPECT_EQ(a.codes, b.codes) << item << " " << kernels::to_string(m);
      EXPECT_EQ(a.scales, b.scales) << item << " " << kernels::to_string(m);
      EXPECT_EQ(a.scales.size(), spec.scale == quant::ScaleGranularity::per_head ? 8u : 4u);
    }
  }
}

// One token: the whole tensor is the token, so per-tensor is per-token and per-head is per-(token, head).
TEST(WholeTensorStores, OneTokenIsThePerTokenStore) {
  const std::int64_t H = 2, D = 32;
  std::vector<double> y(static_cast<std::size_t>(H * D));
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = std::sin(1.3 * double(i)) * (i < 32 ? 3.0 : 0.01);
  std::string why;
  for (const auto& [whole, token] : {std::pair{"e4m3fn:per-tensor", "e4m3fn:per-token"}, {"e5m2:per-head", "e5m2:per-token-head"}}) {
    const quant::StoreBlock a = quant::store_block(*quant::parse_store(whole, why), y, 1, H, D);
    const quant::StoreBlock b = quant::store_block(*quant::parse_store(token, why), y, 1, H, D);
    EXPECT_EQ(a.bytes, b.bytes) << whole;
    EXPECT_EQ(a.scales, b.scales) << whole;
    EXPECT_EQ(a.scale_margin, b.scale_margin) << whole;
    EXPECT_EQ(a.margin, b.margin) << whole;
  }
  const quant::StoreSpec s = *quant::parse_store("e4m3fn:per-tensor", why);
  EXPECT_TRUE(s.whole_tensor_scale());
  EXPECT_EQ(s.item(), "e4m3fn:saturate:per-tensor");
  EXPECT_EQ(quant::scale_groups_per_token(s, 2, 64), 0);
}

}  // namespace
}  // namespace ropecheck::checker
