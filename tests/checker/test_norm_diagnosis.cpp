// The Q/K RMSNorm before the rotation, checked and diagnosed (checker/DIAGNOSIS.md, "Q/K RMSNorm"): a
// float32 kernel (the own binary32 norm of kernels/qk_norm.hpp, then the HF fp32 rotation recipe) passes
// on a qwen3-8b-like set; each injected norm mistake fails the check and the diagnosis names it at rank 1;
// an ordinary RoPE mistake (base 10000) on the same norm set is still named (the diagnosis rotates the
// normalized input, with the norm's term in its bounds). The set's eps is 1e-2, not Qwen3's 1e-6: on
// inputs of unit size an omitted 1e-6 moves the output by 5e-7 relative, inside the norm's own error term
// (ERROR_MODEL.md section 17; tests/kernels/test_qk_norm.cpp shows it with small inputs).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "temp_root.hpp"
#include "ropecheck/checker/checker.hpp"
#include "ropecheck/checker/diagnose.hpp"
#include "ropecheck/golden/golden_set.hpp"
#include "ropecheck/golden/golden_writer.hpp"
#include "ropecheck/checker/stores.hpp"
#include "ropecheck/kernels/qk_norm.hpp"
#include "ropecheck/kernels/rope_quantize.hpp"
#include "ropecheck/kernels/rope_kernels.hpp"
#include "ropecheck/reference/presets.hpp"

namespace ropecheck::checker {
namespace {

using kernels::NormMistake;

const golden::GoldenSet& norm_set() {
  static const testing_support::TempRoot root("ropecheck_norm_diagnosis_");
  static const golden::GoldenSet g = [] {
    golden::GoldenOptions o;
    o.spec = load_preset("qwen3-8b");
    o.spec.rope.q_norm->eps = o.spec.rope.k_norm->eps = 1e-2;
    o.positions = parse_positions("0:3,255,4095,40000");
    o.dtypes = {DType::f32};
    o.heads = 2;
    o.seed = 11;
    o.out = root.path() / "qwen3";
    o.threads = 1;
    o.stores = "e4m3fn,q8_0,int4g32";
    golden::write_golden_set(o);
    return golden::load_golden_set(o.out);
  }();
  return g;
}

// q_rot and k_rot of the set from a kernel: the binary32 norm (with `mistake`), then the rotation of
// `rotation` (the set's spec, or one with a RoPE mistake) by the HF fp32 recipe.
std::vector<io::Tensor> norm_kernel(const golden::GoldenSet& g, NormMistake mistake, const RopeSpec& rotation) {
  const kernels::RopePlan plan = kernels::make_rope_plan(rotation, kernels::Recipe::hf, g.seq_len());
  std::vector<std::int64_t> pos;
  for (const Position& p : g.positions()) pos.push_back(p.t);
  const int H = static_cast<int>(g.heads()), D = g.spec().rope.head_dim;
  std::vector<io::Tensor> out;
  for (const std::string in : {"q", "k"}) {
    const io::Tensor& x = g.tensor(in);
    std::vector<float> xs(x.data.size() / 4), normed(xs.size()), y(xs.size());
    std::memcpy(xs.data(), x.data.data(), x.data.size());
    kernels::rms_norm_f32(*norm_stage(g.spec().rope, in), xs, H, D, normed, mistake);
    kernels::rope_apply(plan, kernels::PositionsView::of(pos),
                        kernels::TensorView::contiguous(normed.data(), DType::f32, g.tokens(), H, D),
                        kernels::TensorView::contiguous(y.data(), DType::f32, g.tokens(), H, D));
    io::Tensor t{in + "_rot.f32", io::TensorDType::f32, x.shape, std::vector<std::uint8_t>(x.data.size())};
    std::memcpy(t.data.data(), y.data(), t.data.size());
    out.push_back(std::move(t));
  }
  return out;
}

CheckOptions rotated_only() {
  CheckOptions o;
  o.only = {"q_rot.f32", "k_rot.f32"};  // not the stores
  o.threads = 1;
  return o;
}

DiagnoseOptions small_sample() {
  DiagnoseOptions o;
  o.max_failing = 48;
  o.max_passing = 24;
  o.threads = 1;
  return o;
}

void expect_named(const golden::GoldenSet& g, const std::vector<io::Tensor>& cand, const std::string& id) {
  const CheckReport rep = check_candidate(g, cand, rotated_only());
  ASSERT_EQ(rep.verdict, Verdict::fail);
  const Diagnosis d = diagnose(g, cand, rep, small_sample());
  ASSERT_NE(d.best_match(), nullptr) << d.summary();
  EXPECT_EQ(d.best_match()->id, id) << d.summary();
}

TEST(NormDiagnosis, TheCorrectNormAndRotationPass) {
  const golden::GoldenSet& g = norm_set();
  EXPECT_EQ(check_candidate(g, norm_kernel(g, NormMistake::none, g.spec().rope), rotated_only()).verdict, Verdict::pass);
}

// The stores of a norm set judge the normalized values with the norm's term (ERROR_MODEL.md section 17):
// the correct norm, rotation and quantizers never fail one.
TEST(NormDiagnosis, TheCorrectNormRotationAndStoresPass) {
  const golden::GoldenSet& g = norm_set();
  const std::vector<io::Tensor> rotated = norm_kernel(g, NormMistake::none, g.spec().rope);
  std::vector<io::Tensor> cand;
  CheckOptions o = rotated_only();
  o.only.clear();
  for (const std::string& store : store_outputs(g)) {
    o.only.push_back(store);
    const io::Tensor& y = rotated[store.starts_with("q_rot") ? 0 : 1];
    std::vector<float> v(y.data.size() / 4);
    std::memcpy(v.data(), y.data.data(), y.data.size());
    std::string why;
    const quant::StoreSpec spec = *quant::parse_store(store.substr(store.find('.') + 1), why);
    const kernels::StoredTensor st = kernels::quantize_store(v, y.shape[0], y.shape[1], y.shape[2], spec);
    const auto add = [&](const std::string& name, const std::vector<std::uint8_t>& bytes) {
      const golden::ManifestTensor& t = *g.find(name);
      cand.push_back({name, t.dtype, t.shape, bytes});
    };
    add(store, st.codes);
    if (spec.kind == quant::StoreKind::fp8) add(store + ".scale", st.scales);
    if (spec.kind == quant::StoreKind::affine) add(store + ".scales", st.scales), add(store + ".biases", st.biases);
  }
  const CheckReport r = check_candidate(g, cand, o);
  ASSERT_TRUE(r.stores.has_value());
  ASSERT_EQ(r.stores->stores.size(), 6u);
  for (const StoreCheck& s : r.stores->stores) {
    EXPECT_EQ(s.failed + s.groups_failed, 0) << s.golden_name;
    EXPECT_GT(s.passed, s.elements / 2) << s.golden_name;
  }
}

TEST(NormDiagnosis, EpsOmittedIsNamed) {
  expect_named(norm_set(), norm_kernel(norm_set(), NormMistake::eps_omitted, norm_set().spec().rope), "norm-eps-omitted");
}
TEST(NormDiagnosis, WeightOmittedIsNamed) {
  expect_named(norm_set(), norm_kernel(norm_set(), NormMistake::weight_omitted, norm_set().spec().rope), "norm-weight-omitted");
}
TEST(NormDiagnosis, WeightFormSwappedIsNamed) {
  expect_named(norm_set(), norm_kernel(norm_set(), NormMistake::weight_form_swapped, norm_set().spec().rope),
               "norm-weight-form-swapped");
}
TEST(NormDiagnosis, WholeRowIsNamed) {
  expect_named(norm_set(), norm_kernel(norm_set(), NormMistake::whole_row, norm_set().spec().rope), "norm-whole-row");
}
TEST(NormDiagnosis, MeanOverPairsIsNamed) {
  expect_named(norm_set(), norm_kernel(norm_set(), NormMistake::mean_over_pairs, norm_set().spec().rope),
               "norm-mean-over-pairs");
}
TEST(NormDiagnosis, BaseDefaultOnANormSetIsNamed) {
  RopeSpec r = norm_set().spec().rope;
  r.base = 10000;
  expect_named(norm_set(), norm_kernel(norm_set(), NormMistake::none, r), "base-default");
}

}  // namespace
}  // namespace ropecheck::checker
