// The kernel under test (kut/kernel_under_test.hpp) and two of its sources: the CPU kernels compute
// exactly what kernels::rope_apply / rope_cos_sin_table / sinusoidal_table compute, the CUDA source
// under the host emulation exactly what kernels/cuda/emulation.hpp computes (and refuses to run
// without a device or the switch); every source answers unsupported (never a crash, never made-up
// outputs) for a call it cannot serve. The third source, plugins: tests/plugin/test_plugin_kernel.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kut_problem.hpp"
#include "ropecheck/kernels/rope_attention.hpp"
#include "ropecheck/kernels/rope_kernels.hpp"
#include "ropecheck/kut/builtin_sources.hpp"
#include "ropecheck/kut/cuda_source.hpp"
#include "ropecheck/kut/kernel_names.hpp"

namespace ropecheck {
namespace {

namespace k = ropecheck::kernels;
using test::Problem;
using test::rope_apply;

TEST(Kut, CapabilitiesAndStorage) {
  kut::Capabilities c;
  c.output_dtypes = {DType::f32};
  EXPECT_TRUE(c.supports(DType::f32));
  EXPECT_FALSE(c.supports(DType::bf16));
  std::vector<std::byte> b(12);
  EXPECT_EQ((kut::Storage{DType::f32, b}.count()), 3u);
  EXPECT_EQ((kut::ConstStorage{DType::bf16, b}.count()), 6u);
}

// The CPU source is kernels::rope_apply behind the interface, bit for bit, for every output dtype.
TEST(Kut, KernelNamesSpellTheGrammarsPrefixes) {
  EXPECT_EQ(kut::builtin_kernel_name(k::Recipe::hf), "builtin:hf");
  EXPECT_EQ(kut::cuda_kernel_name(k::Recipe::accurate), "cuda:accurate");
  EXPECT_EQ(kut::kPluginPrefix, "plugin:");
  // The CPU kernel names itself by its canonical name and the path it runs.
  EXPECT_EQ(kut::cpu_kernel_name(k::Recipe::hf).rfind(kut::builtin_kernel_name(k::Recipe::hf) + " (", 0), 0u);
}

TEST(Kut, CpuSourceIsTheCpuKernel) {
  const Problem p;
  for (k::Recipe r : {k::Recipe::hf, k::Recipe::accurate}) {
    const std::unique_ptr<kut::KernelUnderTest> kt = kut::make_cpu_kernel(r);
    EXPECT_EQ(kt->info().name, kut::cpu_kernel_name(r));
    ASSERT_NE(kt->recipe_rows(), nullptr);
    EXPECT_EQ(kt->recipe_rows()->recipe, r);
    EXPECT_TRUE(kt->info().capabilities.negative_positions);
    for (DType d : {DType::f64, DType::f32, DType::f16, DType::bf16}) {
      kut::CallResult res;
      const std::vector<std::byte> got = rope_apply(*kt, p, d, &res);
      ASSERT_TRUE(res.ok()) << res.message;
      std::vector<std::byte> want(got.size());
      const k::RopePlan plan = k::make_rope_plan(p.spec.rope, r);
      const std::int64_t T = static_cast<std::int64_t>(p.pos.size()), D = p.spec.rope.head_dim;
      k::rope_apply(plan, k::PositionsView::of(p.flat),
                    k::TensorView::contiguous(const_cast<float*>(p.x.data()), DType::f32, T, p.heads, D),
                    k::TensorView::contiguous(want.data(), d, T, p.heads, D));
      EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size()), 0) << k::to_string(r) << " " << to_string(d);
    }
  }
}

TEST(Kut, CpuSourceAnswersUnsupported) {
  const Problem p;
  const std::unique_ptr<kut::KernelUnderTest> kt = kut::make_cpu_kernel(k::Recipe::hf);
  // A sinusoidal spec to rope_apply, and sizes that do not match: unsupported with a reason.
  Problem sin = p;
  sin.spec = load_preset("transformer-base");
  kut::CallResult res;
  rope_apply(*kt, sin, DType::f32, &res);
  EXPECT_EQ(res.status, kut::CallResult::Status::unsupported);
  EXPECT_FALSE(res.message.empty());
  Problem short_x = p;
  short_x.x.pop_back();
  rope_apply(*kt, short_x, DType::f32, &res);
  EXPECT_EQ(res.status, kut::CallResult::Status::unsupported);
  EXPECT_NE(res.message.find("sizes"), std::string::npos) << res.message;
}

// A fused call (kut::RopeAttentionCall) on p's tokens: q [T][2][D] from p.x, k and v the first head's rows.
kut::CallResult fused(kut::KernelUnderTest& kt, const Problem& p, const AttentionParams& a, std::vector<float>& out,
                      std::size_t drop = 0) {
  const std::size_t T = p.pos.size(), D = static_cast<std::size_t>(p.spec.rope.head_dim);
  std::vector<float> q(p.x.begin(), p.x.begin() + static_cast<std::ptrdiff_t>(T * 2 * D)), kv(q.begin(), q.begin() + static_cast<std::ptrdiff_t>(T * D - drop));
  out.assign(T * 2 * D, 0.0f);
  kut::RopeAttentionCall c;
  c.problem = {&p.spec, std::nullopt, p.pos, "fused"};
  c.attention = &a;
  c.q = {DType::f32, std::as_bytes(std::span(q))};
  c.k = c.v = {DType::f32, std::as_bytes(std::span(kv))};
  c.out = {DType::f32, std::as_writable_bytes(std::span(out))};
  return kt.rope_attention(c);
}

// The fused entry point: unsupported by default (a source that does not implement it), the CPU
// source's is kernels::rope_attention, and sizes that do not match are unsupported.
TEST(Kut, FusedEntryPoint) {
  struct Plain final : kut::KernelUnderTest {
    kut::Info i;
    const kut::Info& info() const override { return i; }
    kut::CallResult rope_apply(const kut::RopeApplyCall&) override { return {}; }
    kut::CallResult rope_cos_sin(const kut::RopeTableCall&) override { return {}; }
    kut::CallResult sinusoidal(const kut::SinusoidalCall&) override { return {}; }
  } plain;
  Problem p;
  ASSERT_GE(p.heads, 2);
  AttentionParams a;
  a.group = 2;
  std::vector<float> out, want;
  EXPECT_FALSE(plain.info().capabilities.rope_attention);
  EXPECT_EQ(fused(plain, p, a, out).status, kut::CallResult::Status::unsupported);
  const std::unique_ptr<kut::KernelUnderTest> kt = kut::make_cpu_kernel(k::Recipe::hf);
  EXPECT_TRUE(kt->info().capabilities.rope_attention && kt->info().capabilities.attention_scores);
  const kut::CallResult r = fused(*kt, p, a, out);
  ASSERT_TRUE(r.ok()) << r.message;
  const k::RopePlan plan = k::make_rope_plan(p.spec.rope, k::Recipe::hf);
  const std::int64_t T = static_cast<std::int64_t>(p.pos.size()), D = p.spec.rope.head_dim;
  std::vector<float> q(p.x.begin(), p.x.begin() + T * 2 * D), kv(q.begin(), q.begin() + T * D);
  want.assign(out.size(), 0.0f);
  const k::PositionsView pos = k::PositionsView::of(p.flat);
  k::rope_attention(plan, pos, pos, a, k::TensorView::contiguous(q.data(), DType::f32, T, 2, D),
                    k::TensorView::contiguous(kv.data(), DType::f32, T, 1, D), k::TensorView::contiguous(kv.data(), DType::f32, T, 1, D),
                    k::TensorView::contiguous(want.data(), DType::f32, T, 2, D), nullptr);
  EXPECT_EQ(std::memcmp(out.data(), want.data(), out.size() * sizeof(float)), 0);
  const kut::CallResult bad = fused(*kt, p, a, out, 1);
  EXPECT_EQ(bad.status, kut::CallResult::Status::unsupported);
  EXPECT_NE(bad.message.find("sizes"), std::string::npos) << bad.message;
}

TEST(Kut, CudaSourceEmulatedOrRefused) {
  const Problem p;
  ::unsetenv(kut::kCudaEmulationVariable);
  EXPECT_FALSE(kut::cuda_emulation_requested());
  if (!kut::cuda_built()) {
    try {
      kut::make_cuda_kernel(k::Recipe::hf);
      ADD_FAILURE() << "a CUDA kernel without CUDA";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "this ropecheck was built without CUDA");
    }
    GTEST_SKIP() << "built without CUDA: the emulation is not built";
  }
  try {  // a GPU: its name says which; none: refused with the reason, never emulated silently
    const std::unique_ptr<kut::KernelUnderTest> gpu = kut::make_cuda_kernel(k::Recipe::hf);
    EXPECT_EQ(gpu->info().name.find("emulation"), std::string::npos) << gpu->info().name;
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("no CUDA device (", 0), 0u) << e.what();
  }
  ::setenv(kut::kCudaEmulationVariable, "1", 1);
  ASSERT_TRUE(kut::cuda_emulation_requested());
  const std::unique_ptr<kut::KernelUnderTest> kt = kut::make_cuda_kernel(k::Recipe::accurate);
  ::unsetenv(kut::kCudaEmulationVariable);
  EXPECT_EQ(kt->info().name, "cuda:accurate (host emulation)");
  EXPECT_NE(kt->info().description.find("not a GPU run"), std::string::npos);
  // No CUDA fused RoPE + attention: not declared, and answered unsupported.
  EXPECT_FALSE(kt->info().capabilities.rope_attention);
  AttentionParams a;
  a.group = 2;
  std::vector<float> fused_out;
  EXPECT_EQ(fused(*kt, p, a, fused_out).status, kut::CallResult::Status::unsupported);
  // accurate with f32 storage is bit-identical on CUDA and CPU below 2^28 (kernels/cuda/README.md).
  kut::CallResult res;
  const std::vector<std::byte> got = rope_apply(*kt, p, DType::f32, &res);
  ASSERT_TRUE(res.ok()) << res.message;
  const std::vector<std::byte> want = rope_apply(*kut::make_cpu_kernel(k::Recipe::accurate), p, DType::f32, &res);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size()), 0);
  // The Q/K RMSNorm stage (qwen3-8b's k_norm) and the MLA slice (deepseek-v3-mla's q, rotary block at
  // 128) are run, not refused: the same bytes as the CPU source.
  const std::unique_ptr<kut::KernelUnderTest> cpu = kut::make_cpu_kernel(k::Recipe::accurate);
  for (const char* preset : {"qwen3-8b", "deepseek-v3-mla"}) {
    Problem q;
    q.spec = load_preset(preset);
    if (q.spec.rope.k_norm)
      for (int c = 0; c < q.spec.rope.head_dim; ++c) q.spec.rope.k_norm->weight.push_back((c % 7 - 3) / 4.0);
    q.x.resize(q.pos.size() * static_cast<std::size_t>(q.heads * q.spec.rope.head_dim));
    for (std::size_t i = 0; i < q.x.size(); ++i) q.x[i] = static_cast<float>(static_cast<int>(i % 13) - 6) / 4.0f;
    const std::vector<std::byte> g = rope_apply(*kt, q, DType::bf16, &res);
    ASSERT_TRUE(res.ok()) << preset << ": " << res.message;
    const std::vector<std::byte> w = rope_apply(*cpu, q, DType::bf16, &res);
    ASSERT_TRUE(res.ok()) << preset << ": " << res.message;
    EXPECT_EQ(std::memcmp(g.data(), w.data(), g.size()), 0) << preset;
  }
}

}  // namespace
}  // namespace ropecheck
