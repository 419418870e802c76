// FP8 stores over a given scale (vLLM's static k_scale / v_scale, golden --stores e4m3fn:scale=V or
// scale=V1/V2/...): the own rotate-then-quantize recipes pass, and so does a kernel that multiplies by
// the binary32 reciprocal RN32(1 / s) as FlashInfer's quant_scale does (inside the budget of
// ERROR_MODEL.md section 15); the injected store mistakes that apply to a given scale fail, the one that
// does not (scale_from_input: nothing is derived) passes; a tiny per-head scale exercises the overflow
// rule, so swapping it fails there (it cannot with a data-derived scale).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "ropecheck/checker/checker.hpp"
#include "ropecheck/golden/golden_writer.hpp"
#include "ropecheck/kernels/rope_quantize.hpp"
#include "ropecheck/reference/presets.hpp"
#include "golden_options.hpp"
#include "temp_root.hpp"

namespace ropecheck::checker {
namespace {

using kernels::StoreMistake;
// e4m3fn: head 1's scale 2^-9 puts most of its |y| / s past 464 (saturated); e5m2: 0.3 is not a binary32
// value (rounded once), so its reciprocal is not exact either.
constexpr const char* kStores = "e4m3fn:scale=0.5/0.001953125,e5m2:nonfinite:scale=0.3";

const golden::GoldenSet& given_set() {
  static const testing_support::TempRoot root("ropecheck_given_scale_");
  static const golden::GoldenSet set = testing_support::store_golden_set("0:4,65532:65536", 5, kStores, root.path() / "set");
  return set;
}

quant::StoreSpec spec_of(const golden::GoldenSet& g, const std::string& store) {
  for (const nlohmann::json& r : g.manifest()["stores"]["stores"])
    if (r["name"] == store.substr(store.find('.') + 1)) {
      std::string why;
      return quant::parse_store(r["item"].get<std::string>(), why).value();
    }
  throw std::logic_error("no store " + store);
}

struct Input {
  std::vector<std::int64_t> pos;
  std::int64_t T = 0, H = 0, D = 0;
  kernels::TensorView view;
};
Input input_of(const golden::GoldenSet& g, const std::string& store) {
  const io::Tensor& in = g.tensor(store.substr(0, 1));  // "q" / "k"
  Input r;
  for (const Position& p : g.positions()) r.pos.push_back(p.t);
  r.T = in.shape[0], r.H = in.shape[1], r.D = in.shape[2];
  r.view = kernels::TensorView::contiguous(const_cast<std::uint8_t*>(in.data.data()), DType::f32, r.T, r.H, r.D);
  return r;
}

// Every store of q_rot and k_rot from the recipe (codes only: the scale is the set's input).
std::vector<io::Tensor> candidate(const golden::GoldenSet& g, StoreMistake m) {
  const kernels::RopePlan plan = kernels::make_rope_plan(g.spec().rope, kernels::Recipe::hf);
  std::vector<io::Tensor> out;
  for (const std::string& store : store_outputs(g)) {
    const Input in = input_of(g, store);
    const kernels::StoredTensor st =
        kernels::rope_quantize(plan, kernels::PositionsView::of(in.pos), in.view, spec_of(g, store), m);
    EXPECT_TRUE(st.scales.empty());
    const golden::ManifestTensor& t = *g.find(store);
    out.push_back({store, t.dtype, t.shape, st.codes});
  }
  return out;
}

// FlashInfer's way: rotate to binary32, multiply by q = RN32(1 / s) in binary32, cast.
std::vector<io::Tensor> multiplying_candidate(const golden::GoldenSet& g) {
  const kernels::RopePlan plan = kernels::make_rope_plan(g.spec().rope, kernels::Recipe::hf);
  std::vector<io::Tensor> out;
  for (const std::string& store : store_outputs(g)) {
    const Input in = input_of(g, store);
    const quant::StoreSpec s = spec_of(g, store);
    std::vector<float> y(static_cast<std::size_t>(in.T * in.H * in.D));
    kernels::rope_apply(plan, kernels::PositionsView::of(in.pos), in.view,
                        kernels::TensorView::contiguous(y.data(), DType::f32, in.T, in.H, in.D));
    std::vector<std::uint8_t> codes;
    for (std::size_t i = 0; i < y.size(); ++i) {
      const auto head = static_cast<std::int64_t>(i) / in.D % in.H;
      const float q = 1.0f / static_cast<float>(quant::given_scale(s, head));
      codes.push_back(quant::fp8_encode(static_cast<double>(y[i] * q), s.fp8, s.overflow));
    }
    const golden::ManifestTensor& t = *g.find(store);
    out.push_back({store, t.dtype, t.shape, codes});
  }
  return out;
}

StoresReport judge(const golden::GoldenSet& g, const std::vector<io::Tensor>& cand) {
  CheckOptions opt;
  opt.only = store_outputs(g);
  opt.threads = 2;
  return check_candidate(g, cand, opt).stores.value_or(StoresReport{});
}

TEST(GivenScaleStores, TheSetRecordsAndHoldsTheGivenScale) {
  const golden::GoldenSet& g = given_set();
  EXPECT_EQ(spec_of(g, "q_rot.e5m2").given, std::vector<float>{0.3f});
  const io::Tensor& sc = g.tensor("k_rot.e4m3fn.scale");
  ASSERT_EQ(sc.shape, std::vector<std::int64_t>{2});
  float v[2];
  std::memcpy(v, sc.data.data(), 8);
  EXPECT_EQ(v[0], 0.5f);
  EXPECT_EQ(v[1], 0x1p-9f);
  EXPECT_EQ(g.find("q_rot.e4m3fn.scale_margin"), nullptr);  // nothing of the scale to judge
  EXPECT_EQ(store_companions(g, "q_rot.e4m3fn"), std::vector<std::string>{});
}

TEST(GivenScaleStores, OwnRecipeAndAMultiplyingKernelPass) {
  const golden::GoldenSet& g = given_set();
  for (const auto& cand : {candidate(g, StoreMistake::none), multiplying_candidate(g)}) {
    const StoresReport r = judge(g, cand);
    ASSERT_EQ(r.stores.size(), 4u);
    for (const StoreCheck& s : r.stores) {
      EXPECT_EQ(s.failed, 0) << s.golden_name;
      EXPECT_EQ(s.groups, 0) << s.golden_name;
      EXPECT_GT(s.passed, s.elements / 2) << s.golden_name;
      EXPECT_NE(s.store.find(":scale="), std::string::npos) << s.store;  // the report names the given scale
    }
  }
}

TEST(GivenScaleStores, MistakesFailWhereTheyApply) {
  const golden::GoldenSet& g = given_set();
  struct Case {
    StoreMistake mistake;
    std::vector<std::string> fails;  // store names; the others pass
  };
  const std::vector<Case> cases = {{StoreMistake::scale_inverted, {"e4m3fn", "e5m2"}},
                                   {StoreMistake::scale_applied_twice, {"e4m3fn", "e5m2"}},
                                   {StoreMistake::quantize_before_rotate, {"e4m3fn", "e5m2"}},
                                   {StoreMistake::e5m2_for_e4m3fn, {"e4m3fn", "e5m2"}},
                                   {StoreMistake::overflow_rule_swapped, {"e4m3fn"}},
                                   {StoreMistake::scale_from_input, {}}};
  for (const Case& c : cases)
    for (const StoreCheck& s : judge(g, candidate(g, c.mistake)).stores) {
      const std::string store = s.golden_name.substr(s.golden_name.find('.') + 1);
      const bool applies = std::find(c.fails.begin(), c.fails.end(), store) != c.fails.end();
      EXPECT_EQ(s.verdict == Verdict::fail, applies) << kernels::to_string(c.mistake) << " " << s.golden_name;
      // Named from the set's given scale (the diagnosis once recomputed every mistake with a derived one).
      if (applies && c.mistake != StoreMistake::quantize_before_rotate) {
        const std::string id(kernels::to_string(c.mistake));
        ASSERT_TRUE(s.diagnosis.has_value()) << id;
        EXPECT_EQ(s.diagnosis->match.value_or("none"), id) << s.golden_name << ": " << s.diagnosis->conclusion;
      }
    }
}

}  // namespace
}  // namespace ropecheck::checker
