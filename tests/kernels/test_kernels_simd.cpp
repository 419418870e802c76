// The AVX-512 path gives bit-identical results to the portable path (KernelOptions::portable), for every
// recipe x input dtype x output dtype x layout (half-split, interleaved, partial rotary with pass-through,
// pair counts that are not a multiple of 16, strided views), for the tables and the sinusoidal tables, and
// at angles outside the fast reduction's range (the slow path). Skipped where the CPU has no AVX-512.
// NaN equals NaN (payloads are not part of the contract); everything else is compared bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ropecheck/kernels/recipe.hpp"
#include "ropecheck/kernels/rope_kernels.hpp"
#include "ropecheck/kernels/scalar_recipes.hpp"
#include "ropecheck/reference/presets.hpp"
#include "test_kernels_util.hpp"

namespace ropecheck::kernels {
namespace {

std::size_t size_of(DType t) { return t == DType::f64 ? 8 : (t == DType::f32 ? 4 : 2); }

bool is_nan(const unsigned char* p, DType t) {
  if (t == DType::f64) {
    double d;
    std::memcpy(&d, p, 8);
    return std::isnan(d);
  }
  if (t == DType::f32) {
    float f;
    std::memcpy(&f, p, 4);
    return std::isnan(f);
  }
  std::uint16_t b;
  std::memcpy(&b, p, 2);
  return t == DType::bf16 ? (b & 0x7FFF) > 0x7F80 : (b & 0x7FFF) > 0x7C00;
}

// Counts the elements that differ (bit for bit, any NaN equal to any NaN); reports the first few.
int compare(const std::vector<unsigned char>& a, const std::vector<unsigned char>& b, DType t, const std::string& what) {
  const std::size_t sz = size_of(t);
  int bad = 0;
  for (std::size_t i = 0; i < a.size() / sz; ++i) {
    const unsigned char* x = a.data() + i * sz;
    const unsigned char* y = b.data() + i * sz;
    if (std::memcmp(x, y, sz) == 0 || (is_nan(x, t) && is_nan(y, t))) continue;
    if (++bad <= 3) ADD_FAILURE() << what << ": element " << i << " differs between the AVX-512 and portable paths";
  }
  return bad;
}

std::vector<unsigned char> encode(const std::vector<float>& v, DType t) {
  std::vector<unsigned char> out(v.size() * size_of(t));
  for (std::size_t i = 0; i < v.size(); ++i) {
    unsigned char* p = out.data() + i * size_of(t);
    if (t == DType::f64) {
      const double d = v[i];
      std::memcpy(p, &d, 8);
    } else if (t == DType::f32) {
      std::memcpy(p, &v[i], 4);
    } else {
      const std::uint16_t b = t == DType::bf16 ? f32_to_bf16_bits(v[i]) : f32_to_f16_bits(v[i]);
      std::memcpy(p, &b, 2);
    }
  }
  return out;
}

struct Case {
  std::string name;
  RopeSpec spec;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const char* n : {"llama-3.1-8b", "gpt-j-6b", "phi-2", "gpt-neox-20b", "gemma-3-4b-global", "qwen2-vl-7b",
                        "qwen2.5-7b-yarn", "phi-3.5-mini"})
    out.push_back({n, load_preset(n).rope});
  Case odd{"gpt-j-6b rotary 24 (interleaved, 12 pairs)", load_preset("gpt-j-6b").rope};
  odd.spec.rotary_dim = 24;
  out.push_back(odd);
  Case small{"head_dim 6 (3 pairs)", load_preset("llama-2-7b").rope};
  small.spec.head_dim = 6;
  small.spec.rotary_dim = 6;
  out.push_back(small);
  return out;
}

// Positions: small, log-spaced to 2^24, past the reduction range (2^28 / w), huge, negative.
std::vector<std::int64_t> positions() {
  std::vector<std::int64_t> p = test::log_positions(1LL << 24, 1, 77);
  for (std::int64_t v : {65519LL, 65520LL, 1LL << 28, (1LL << 29) + 12345, 1LL << 40, (1LL << 53) - 1, -1LL, -65536LL,
                         -(1LL << 31)})
    p.push_back(v);
  return p;
}

class SimdIdentity : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cpu_path() != "avx512") GTEST_SKIP() << "no AVX-512 on this CPU: only the portable path exists";
  }
};

TEST_F(SimdIdentity, RopeApplyEveryRecipeDtypeAndLayout) {
  const std::vector<std::int64_t> pos = positions();
  const auto T = static_cast<std::int64_t>(pos.size());
  const std::int64_t H = 2;
  const DType dtypes[] = {DType::f32, DType::bf16, DType::f16, DType::f64};
  int total_bad = 0, runs = 0;
  for (const Case& c : cases()) {
    const std::int64_t D = c.spec.head_dim;
    const std::vector<float> x = test::random_input(T * H * D, 5);
    for (const RecipeInfo& info : recipes()) {
      const RopePlan plan = make_rope_plan(c.spec, info.recipe);
      for (DType din : dtypes) {
        const std::vector<unsigned char> in = encode(x, din);
        for (DType dout : dtypes) {
          const std::string what =
              c.name + " / " + std::string(info.name) + " / " + std::string(to_string(din)) + " -> " + std::string(to_string(dout));
          std::vector<unsigned char> a(static_cast<std::size_t>(T * H * D) * size_of(dout)), b(a.size());
          const TensorView vin = TensorView::contiguous(const_cast<unsigned char*>(in.data()), din, T, H, D);
          rope_apply(plan, PositionsView::of(pos), vin, TensorView::contiguous(a.data(), dout, T, H, D), {}, {}, {.threads = 1});
          rope_apply(plan, PositionsView::of(pos), vin, TensorView::contiguous(b.data(), dout, T, H, D), {}, {},
                     {.threads = 1, .portable = true});
          total_bad += compare(a, b, dout, what);
          ++runs;
          if (din == dout) {  // in place, on 2 threads
            std::vector<unsigned char> ip = in;
            const TensorView v = TensorView::contiguous(ip.data(), din, T, H, D);
            rope_apply(plan, PositionsView::of(pos), v, v, {}, {}, {.threads = 2});
            total_bad += compare(ip, b, dout, what + " in place");
          }
        }
      }
    }
  }
  std::printf("[ simd ] %d rope_apply configurations compared, %d elements differ\n", runs, total_bad);
  EXPECT_EQ(total_bad, 0);
}

// A large out-of-place output takes streaming stores (>= 32 MiB, aligned): same bits.
TEST_F(SimdIdentity, LargeOutOfPlaceOutputs) {
  const RopeSpec r = load_preset("llama-3-8b").rope;
  const std::int64_t T = 2048, H = 32, D = 128;
  std::vector<std::int64_t> pos(static_cast<std::size_t>(T));
  for (std::int64_t t = 0; t < T; ++t) pos[static_cast<std::size_t>(t)] = 7 * t;
  const std::vector<float> x = test::random_input(T * H * D, 31);
  for (Recipe rec : {Recipe::accurate, Recipe::hf})
    for (DType dt : {DType::f32, DType::bf16}) {
      const RopePlan plan = make_rope_plan(r, rec);
      const std::vector<unsigned char> in = encode(x, dt);
      // 64-byte aligned outputs of 64 MiB (f32) / 32 MiB (bf16)
      std::vector<std::uint64_t> a(in.size() / 8 + 8), b(a.size());
      auto* pa = reinterpret_cast<unsigned char*>((reinterpret_cast<std::uintptr_t>(a.data()) + 63) / 64 * 64);
      auto* pb = reinterpret_cast<unsigned char*>((reinterpret_cast<std::uintptr_t>(b.data()) + 63) / 64 * 64);
      const TensorView vin = TensorView::contiguous(const_cast<unsigned char*>(in.data()), dt, T, H, D);
      rope_apply(plan, PositionsView::of(pos), vin, TensorView::contiguous(pa, dt, T, H, D), {}, {}, {.threads = 2});
      rope_apply(plan, PositionsView::of(pos), vin, TensorView::contiguous(pb, dt, T, H, D), {}, {}, {.portable = true});
      const std::vector<unsigned char> va(pa, pa + in.size()), vb(pb, pb + in.size());
      EXPECT_EQ(compare(va, vb, dt, std::string(to_string(rec)) + " " + std::string(to_string(dt)) + " large out of place"), 0);
    }
}

TEST_F(SimdIdentity, TablesAndRows) {
  const std::vector<std::int64_t> pos = positions();
  const auto T = static_cast<std::int64_t>(pos.size());
  for (const Case& c : cases()) {
    for (const RecipeInfo& info : recipes()) {
      const RopePlan plan = make_rope_plan(c.spec, info.recipe);
      const auto n = static_cast<std::size_t>(T * plan.pairs);
      for (DType dt : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
        std::vector<unsigned char> ca(n * size_of(dt)), sa(ca.size()), cb(ca.size()), sb(ca.size());
        rope_cos_sin_table(plan, PositionsView::of(pos), ca.data(), sa.data(), dt, {.threads = 2});
        rope_cos_sin_table(plan, PositionsView::of(pos), cb.data(), sb.data(), dt, {.threads = 1, .portable = true});
        const std::string what = c.name + " / " + std::string(info.name) + " table " + std::string(to_string(dt));
        EXPECT_EQ(compare(ca, cb, dt, what + " cos"), 0);
        EXPECT_EQ(compare(sa, sb, dt, what + " sin"), 0);
      }
    }
  }
  for (const char* name : {"transformer-base", "fairseq-transformer"}) {
    const SinusoidalSpec s = load_preset(name).sinusoidal;
    for (const RecipeInfo& info : recipes())
      for (DType dt : {DType::f32, DType::bf16, DType::f64}) {
        std::vector<unsigned char> a(pos.size() * static_cast<std::size_t>(s.d_model) * size_of(dt)), b(a.size());
        sinusoidal_table(s, info.recipe, pos, a.data(), dt);
        sinusoidal_table(s, info.recipe, pos, b.data(), dt, {.portable = true});
        EXPECT_EQ(compare(a, b, dt, std::string(name) + " / " + std::string(info.name) + " sinusoidal"), 0);
      }
  }
}

}  // namespace
}  // namespace ropecheck::kernels
