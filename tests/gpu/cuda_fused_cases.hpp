// The fused recipes' cases, shared by the host emulation (test_cuda_emulation) and the GPU run
// (test_cuda_kernels): the CUDA code's bytes against the CPU recipes' (kernels/rope_quantize.hpp,
// kv_append.hpp, qk_norm.hpp + rope_apply, rope_apply's MLA slice), for the accurate recipe, whose
// rotation is bit-identical on both (kernels/cuda/README.md); the stores, the norm and the append add no
// difference of their own. Small on purpose (a few tokens): they run under ASan in CI too.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "ropecheck/checker/checker.hpp"
#include "ropecheck/core/kv_cache.hpp"
#include "ropecheck/core/quantized_store_spec.hpp"
#include "ropecheck/kernels/kv_append.hpp"
#include "ropecheck/kernels/qk_norm.hpp"
#include "ropecheck/kernels/rope_kernels.hpp"
#include "ropecheck/kernels/rope_quantize.hpp"
#include "ropecheck/golden/golden_writer.hpp"
#include "ropecheck/reference/presets.hpp"
#include "temp_root.hpp"

namespace ropecheck::cuda_fused_cases {

namespace k = ropecheck::kernels;

// The CUDA side under test: the device functions of cuda_fused.hpp / cuda_kernels.hpp, or their emulation.
class FusedRunner {
 public:
  virtual ~FusedRunner() = default;
  virtual k::StoredTensor rope_quantize(const k::RopePlan&, const k::PositionsView&, const k::TensorView& in,
                                        const quant::StoreSpec&) = 0;
  virtual void rope_append_kv(const k::RopePlan&, const kv::CacheSpec&, std::int64_t heads, std::span<const float> k_in,
                              std::span<const float> v_in, DType, std::span<std::uint8_t> k_cache,
                              std::span<std::uint8_t> v_cache) = 0;
  virtual void rms_norm_rope_apply(const k::RopePlan&, const RmsNormStage&, const k::PositionsView&, const k::TensorView& in,
                                   const k::TensorView& out) = 0;
  // rope_apply on host buffers (contiguous in and out), for the MLA slice.
  virtual void rope_apply(const k::RopePlan&, const k::PositionsView&, const k::TensorView& in, const k::TensorView& out) = 0;
};

inline constexpr std::uint64_t kSeed = 2911;
// Positions where f32 angles lose bits, and 0.
inline const std::vector<std::int64_t> kPositions = {0, 1, 7, 4095, 65537, 131071};

// bf16-exact inputs [T, H, D]: token t at magnitude 2^(2t - 4) (so per-token scales differ), token 2 tiny
// (the FP8 minimum scale and subnormal codes), token 3 zero (q4_0's d = 0).
inline std::vector<float> inputs(std::int64_t T, std::int64_t H, std::int64_t D) {
  std::mt19937_64 rng(kSeed);
  std::uniform_int_distribution<int> m(-127, 127);
  std::vector<float> x(static_cast<std::size_t>(T * H * D));
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t i = 0; i < H * D; ++i) {
      const float scale = t == 2 ? 0x1p-30f : (t == 3 ? 0.0f : std::ldexp(1.0f, static_cast<int>(2 * t - 4)));
      x[static_cast<std::size_t>(t * H * D + i)] = static_cast<float>(m(rng)) / 64.0f * scale;
    }
  return x;
}

inline std::vector<std::uint16_t> to_bf16(const std::vector<float>& x) {
  std::vector<std::uint16_t> b(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) b[i] = static_cast<std::uint16_t>(double_to_bits(x[i], DType::bf16));
  return b;
}

// Every store of the issue (FP8 both formats, both overflow rules, both scale groupings; GGML q8_0 and
// q4_0): codes and scales byte for byte equal to rope_quantize's.
inline void stores_match_cpu(FusedRunner& run) {
  std::printf("seed %llu\n", static_cast<unsigned long long>(kSeed));
  const RopeSpec r = load_preset("llama-3.1-8b").rope;
  const k::RopePlan plan = k::make_rope_plan(r, k::Recipe::accurate);
  const std::int64_t T = static_cast<std::int64_t>(kPositions.size()), H = 2, D = r.head_dim;
  std::vector<std::uint16_t> x = to_bf16(inputs(T, H, D));
  const k::TensorView in = k::TensorView::contiguous(x.data(), DType::bf16, T, H, D);
  const k::PositionsView pos = k::PositionsView::of(kPositions);
  for (const char* item : {"e4m3fn:saturate:per-token", "e4m3fn:nonfinite:per-token-head", "e5m2:saturate:per-token-head",
                           "e5m2:nonfinite:per-token", "q8_0", "q4_0"}) {
    std::string why;
    const quant::StoreSpec spec = *quant::parse_store(item, why);
    const k::StoredTensor want = k::rope_quantize(plan, pos, in, spec);
    const k::StoredTensor got = run.rope_quantize(plan, pos, in, spec);
    EXPECT_EQ(got.codes, want.codes) << item;
    EXPECT_EQ(got.scales, want.scales) << item;
  }
}

// Paged NHD and HND and slot-mapped caches, a prefill, a decode and a continued sequence, k and v:
// every byte of both caches (sentinels included) equal to rope_append_kv's.
inline void append_matches_cpu(FusedRunner& run) {
  const RopeSpec r = load_preset("llama-3.1-8b").rope;
  const k::RopePlan plan = k::make_rope_plan(r, k::Recipe::accurate);
  for (const char* cache : {R"("cache": "paged", "layout": "NHD")", R"("cache": "paged", "layout": "HND")", R"("cache": "slots")"})
    for (DType dt : {DType::bf16, DType::f32}) {
      const kv::CacheSpec c = kv::parse_cache_spec(
          nlohmann::json::parse(std::string(R"({"sequences": [{"cached": 0, "appended": 5}, {"cached": 9, "appended": 1},
            {"cached": 3, "appended": 2}], "page_size": 4, )") + cache + "}"), kSeed);
      const std::int64_t H = 2, D = r.head_dim, T = c.tokens();
      const std::vector<float> kin = inputs(T, H, D);
      std::vector<float> vin(kin.rbegin(), kin.rend());
      const auto bytes = static_cast<std::size_t>(c.slots() * H * D) * static_cast<std::size_t>(format_info(dt).storage_bits / 8);
      std::vector<std::uint8_t> kw(bytes, 0xAB), vw(bytes, 0xCD), kg = kw, vg = vw;
      k::rope_append_kv(plan, c, H, kin, vin, dt, kw, vw);
      run.rope_append_kv(plan, c, H, kin, vin, dt, kg, vg);
      EXPECT_EQ(kg, kw) << cache << " " << to_string(dt);
      EXPECT_EQ(vg, vw) << cache << " " << to_string(dt);
    }
}

// qwen3-8b's Q/K RMSNorm, both weight forms, then the rotation: the CPU's rms_norm_f32 + rope_apply.
inline void norm_matches_cpu(FusedRunner& run) {
  RopeSpec r = load_preset("qwen3-8b").rope;
  const std::int64_t T = static_cast<std::int64_t>(kPositions.size()), H = 2, D = r.head_dim;
  const std::vector<float> x = inputs(T, H, D);
  std::vector<std::uint16_t> xb = to_bf16(x);
  for (NormWeightForm form : {NormWeightForm::w, NormWeightForm::one_plus_w}) {
    RmsNormStage n;
    n.eps = 1e-6;
    n.weight_form = form;
    for (std::int64_t c = 0; c < D; ++c) n.weight.push_back(static_cast<double>(c % 9 - 4) / 8.0);
    r.k_norm = n;
    const k::RopePlan plan = k::make_rope_plan(r, k::Recipe::accurate);
    std::vector<float> normed(x.size());
    k::rms_norm_f32(n, x, static_cast<int>(H), static_cast<int>(D), normed);
    std::vector<std::uint16_t> want(x.size()), got(x.size());
    const k::PositionsView pos = k::PositionsView::of(kPositions);
    k::rope_apply(plan, pos, k::TensorView::contiguous(normed.data(), DType::f32, T, H, D),
                  k::TensorView::contiguous(want.data(), DType::bf16, T, H, D));
    run.rms_norm_rope_apply(plan, n, pos, k::TensorView::contiguous(xb.data(), DType::bf16, T, H, D),
                            k::TensorView::contiguous(got.data(), DType::bf16, T, H, D));
    EXPECT_EQ(got, want) << (form == NormWeightForm::w ? "w" : "1+w");
  }
}

// deepseek-v3-mla's q (rotary block at 128 of 192, interleaved), and the same slice half-split: bf16 in
// and out (the fast path), bf16 in and f32 out (the generic path); the CPU's rope_apply (its MLA slice).
inline void mla_slice_matches_cpu(FusedRunner& run) {
  for (RopeLayout layout : {RopeLayout::interleaved, RopeLayout::half_split}) {
    RopeSpec r = load_preset("deepseek-v3-mla").rope;
    r.layout = layout;
    const k::RopePlan plan = k::make_rope_plan(r, k::Recipe::accurate);
    const std::int64_t T = static_cast<std::int64_t>(kPositions.size()), H = 2, D = r.head_dim;
    std::vector<std::uint16_t> x = to_bf16(inputs(T, H, D));
    const k::TensorView in = k::TensorView::contiguous(x.data(), DType::bf16, T, H, D);
    const k::PositionsView pos = k::PositionsView::of(kPositions);
    for (DType out : {DType::bf16, DType::f32}) {
      const std::size_t bytes = x.size() * static_cast<std::size_t>(format_info(out).storage_bits / 8);
      std::vector<std::uint8_t> want(bytes), got(bytes);
      k::rope_apply(plan, pos, in, k::TensorView::contiguous(want.data(), out, T, H, D));
      run.rope_apply(plan, pos, in, k::TensorView::contiguous(got.data(), out, T, H, D));
      EXPECT_EQ(got, want) << (layout == RopeLayout::interleaved ? "interleaved " : "half-split ") << to_string(out);
    }
  }
}

// Where the bytes may differ: hf's sin / cos is CUDA's sinf / cosf on a GPU (the host libm's in the
// emulation), so its rotated values, and the stores after them, may differ from the CPU recipe's
// (kernels/cuda/README.md, "Fused recipes"). The stores still never fail the quantized stores' check
// (checker/stores.hpp) on a golden set, as the CPU recipe's (tests/checker/test_rope_quantize_stores.cpp).
inline void hf_stores_pass_their_class(FusedRunner& run) {
  const testing_support::TempRoot root("ropecheck_cuda_fused_class_");
  const char* items[] = {"e4m3fn", "e5m2:nonfinite:per-token-head", "q8_0", "q4_0"};
  golden::GoldenOptions o;
  o.spec = load_preset("llama-3.1-8b");
  o.positions = parse_positions("0:3,4094:4096,65534:65536");
  o.dtypes = {DType::f32};
  o.heads = 2;
  o.seed = 11;
  o.out = root.path() / "set";
  o.threads = 2;
  o.stores = "e4m3fn,e5m2:nonfinite:per-token-head,q8_0,q4_0";
  golden::write_golden_set(o);
  const golden::GoldenSet g = golden::load_golden_set(o.out);
  const k::RopePlan plan = k::make_rope_plan(g.spec().rope, k::Recipe::hf);
  std::vector<std::int64_t> pos;
  for (const Position& p : g.positions()) pos.push_back(p.t);
  std::vector<io::Tensor> cand;
  long differ = 0;
  for (const std::string& store : checker::store_outputs(g)) {
    const io::Tensor& in = g.tensor(store.substr(0, 1));
    const std::int64_t T = in.shape[0], H = in.shape[1], D = in.shape[2];
    std::string why;
    std::optional<quant::StoreSpec> spec;
    for (const char* item : items)
      if (spec = quant::parse_store(item, why); spec && spec->name() == store.substr(store.find('.') + 1)) break;
    ASSERT_TRUE(spec) << store;
    const k::TensorView view = k::TensorView::contiguous(const_cast<std::uint8_t*>(in.data.data()), DType::f32, T, H, D);
    const k::StoredTensor st = run.rope_quantize(plan, k::PositionsView::of(pos), view, *spec);
    const k::StoredTensor cpu = k::rope_quantize(plan, k::PositionsView::of(pos), view, *spec);
    for (std::size_t i = 0; i < st.codes.size(); ++i) differ += st.codes[i] != cpu.codes[i];
    const auto tensor = [&](const std::string& name, std::vector<std::uint8_t> bytes) {
      const golden::ManifestTensor& t = *g.find(name);
      cand.push_back({name, t.dtype, t.shape, std::move(bytes)});
    };
    tensor(store, st.codes);
    if (spec->kind == quant::StoreKind::fp8) tensor(store + ".scale", st.scales);
  }
  std::printf("CUDA hf store bytes that differ from builtin:hf's: %ld\n", differ);
  checker::CheckOptions opt;
  opt.only = checker::store_outputs(g);
  opt.threads = 2;
  const checker::CheckReport r = checker::check_candidate(g, cand, opt);
  ASSERT_TRUE(r.stores.has_value());
  ASSERT_EQ(r.stores->stores.size(), 8u);
  for (const checker::StoreCheck& s : r.stores->stores) {
    EXPECT_EQ(s.failed + s.groups_failed, 0) << s.golden_name;
    EXPECT_GT(s.passed, s.elements / 4) << s.golden_name;  // decided, not merely not tested
  }
}

}  // namespace ropecheck::cuda_fused_cases
