// The fused RoPE + attention entry point through the kernel ABI (revision 2, ropecheck_rope_attention):
// ropecheck's CPU recipes exported by libropecheck_builtin_kernels.so give, through the plugin client
// (isolated and in process), the bytes builtin:RECIPE gives, scores included; a revision-1 plugin still
// loads and works, its fused entry unsupported; a plugin that crashes or hangs in the fused call is a
// failed call of that kernel (ropecheck carries on), and a good fused plugin's outputs come back.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "test_paths.hpp"
#include "ropecheck/kernels/recipe.hpp"
#include "ropecheck/kut/builtin_sources.hpp"
#include "ropecheck/plugin/plugin_kernel.hpp"
#include "ropecheck/reference/presets.hpp"

namespace ropecheck {
namespace {

namespace k = ropecheck::kernels;

// A fused problem: T tokens at consecutive positions from `start`, bf16-exact f32 inputs (fixed seed).
struct Fused {
  EncodingSpec spec;
  AttentionParams a;
  std::vector<Position> pos;
  std::vector<float> q, k, v;
  std::size_t T = 0, G = 0, D = 0, Dv = 0;
  Fused(const std::string& preset, std::size_t tokens, std::int64_t start, std::uint64_t seed) : spec(load_preset(preset)) {
    T = tokens, G = 2, D = static_cast<std::size_t>(spec.rope.head_dim), Dv = D;
    a.group = 2;
    for (std::size_t i = 0; i < T; ++i) pos.push_back(Position::uniform(start + static_cast<std::int64_t>(i)));
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    auto fill = [&](std::vector<float>& x, std::size_t n) {
      for (std::size_t i = 0; i < n; ++i) {
        float f = nd(rng);
        std::uint32_t u;
        std::memcpy(&u, &f, 4);
        u &= 0xFFFF0000u;  // bf16-exact
        std::memcpy(&f, &u, 4);
        x.push_back(f);
      }
    };
    fill(q, T * G * D), fill(k, T * D), fill(v, T * Dv);
  }
  std::size_t pairs() const { return G * static_cast<std::size_t>(attention_score_count(a, static_cast<std::int64_t>(T))); }
};

struct Outputs {
  kut::CallResult result;
  std::vector<std::byte> out, scores;
};

Outputs run(kut::KernelUnderTest& kt, const Fused& f, DType dt, bool scores) {
  const std::size_t e = static_cast<std::size_t>(format_info(dt).storage_bits / 8);
  Outputs o;
  o.out.resize(f.T * f.G * f.Dv * e);
  if (scores) o.scores.resize(f.pairs() * e);
  kut::RopeAttentionCall call;
  call.problem = {&f.spec, std::nullopt, f.pos, "fused test"};
  call.attention = &f.a;
  call.q = {DType::f32, std::as_bytes(std::span(f.q))};
  call.k = {DType::f32, std::as_bytes(std::span(f.k))};
  call.v = {DType::f32, std::as_bytes(std::span(f.v))};
  call.out = {dt, o.out};
  call.scores = {dt, o.scores};
  o.result = kt.rope_attention(call);
  return o;
}

std::string bad_plugin(const char* mode) { return std::string(test::bad_plugin_dir()) + "/bad_plugin_" + mode + ".so"; }

// Every attention feature the ABI marshals (scale, soft-cap, window, causal, sinks, value_dim) reaches
// the recipe unchanged: the module's bytes are builtin:RECIPE's.
TEST(PluginAttention, BuiltinPluginIsTheCpuKernelsFusedRecipe) {
  for (k::Recipe r : {k::Recipe::hf, k::Recipe::accurate, k::Recipe::bf16_table, k::Recipe::f16_table, k::Recipe::meta}) {
    const bool isolated = r == k::Recipe::hf || r == k::Recipe::bf16_table;
    const std::unique_ptr<kut::KernelUnderTest> cpu = kut::make_cpu_kernel(r, {.threads = 1});
    plugin::PluginClientOptions opt;
    opt.in_process = !isolated;
    const std::unique_ptr<plugin::PluginKernel> abi = plugin::load_plugin_kernel(
        std::string(test::builtin_kernels()) + ":" + std::string(k::recipe_info(r).name) + ":threads=1", opt);
    ASSERT_TRUE(abi->info().capabilities.rope_attention);
    ASSERT_TRUE(abi->info().capabilities.attention_scores);
    for (int variant = 0; variant < 4; ++variant) {
      Fused f(variant == 3 ? "gpt-oss-20b" : "llama-3.1-8b", 7, 4090 + variant, 11 + static_cast<std::uint64_t>(variant));
      if (variant == 1) f.a.softcap = 30.0, f.a.window = 3;
      if (variant == 2) f.a.causal = false, f.a.scale = 0.0625, f.a.window = 2;
      if (variant == 3) f.a.sinks = {0.5, -1.25};
      for (DType dt : {DType::f32, DType::bf16, DType::f16, DType::f64})
        for (bool scores : {true, false}) {
          const Outputs a = run(*cpu, f, dt, scores), b = run(*abi, f, dt, scores);
          const std::string what = std::string(k::recipe_info(r).name) + " variant " + std::to_string(variant) + " " +
                                   std::string(to_string(dt)) + (scores ? " with scores" : "");
          ASSERT_TRUE(a.result.ok()) << what << ": " << a.result.message;
          ASSERT_TRUE(b.result.ok()) << what << ": " << b.result.message;
          EXPECT_EQ(a.out, b.out) << what;
          EXPECT_EQ(a.scores, b.scores) << what;
        }
    }
    EXPECT_TRUE(abi->finish().failures.empty());
  }
}

// A plugin of revision 1 (no ropecheck_rope_attention): loads, works, and its fused entry is unsupported.
TEST(PluginAttention, RevisionOnePluginLoadsAndWorks) {
  const std::unique_ptr<plugin::PluginKernel> hf = plugin::load_plugin_kernel(test::hf_plugin());
  EXPECT_FALSE(hf->plugin().has_rope_attention());
  EXPECT_FALSE(hf->info().capabilities.rope_attention);
  const Fused f("llama-3.1-8b", 4, 0, 1);
  EXPECT_EQ(run(*hf, f, DType::f32, false).result.status, kut::CallResult::Status::unsupported);
  std::vector<float> out(f.q.size());
  kut::RopeApplyCall call;
  call.problem = {&f.spec, std::nullopt, f.pos, "rope_apply"};
  call.heads = 2;
  call.x = {DType::f32, std::as_bytes(std::span(f.q))};
  call.out = {DType::f32, std::as_writable_bytes(std::span(out))};
  const kut::CallResult r = hf->rope_apply(call);
  EXPECT_TRUE(r.ok()) << r.message;
  EXPECT_TRUE(std::isfinite(out.front()) && std::isfinite(out.back()));
  EXPECT_EQ(hf->plugin().failed_calls(), 0);
}

// A good fused plugin: scores it does not have are unsupported; outputs come back (one token: the
// softmax weight is exp(0) / exp(0) = 1 exactly, so the output is V exactly).
TEST(PluginAttention, GoodFusedPluginsOutputsComeBack) {
  const std::unique_ptr<plugin::PluginKernel> good = plugin::load_plugin_kernel(bad_plugin("good"));
  ASSERT_TRUE(good->info().capabilities.rope_attention);
  EXPECT_FALSE(good->info().capabilities.attention_scores);
  const Fused one("llama-3.1-8b", 1, 777, 3);
  const Outputs s = run(*good, one, DType::f64, true);
  EXPECT_EQ(s.result.status, kut::CallResult::Status::unsupported);
  EXPECT_EQ(s.result.message, "no scores");
  const Outputs o = run(*good, one, DType::f64, false);
  ASSERT_TRUE(o.result.ok()) << o.result.message;
  std::vector<double> out(one.G * one.Dv);
  std::memcpy(out.data(), o.out.data(), o.out.size());
  for (std::size_t h = 0; h < one.G; ++h)
    for (std::size_t c = 0; c < one.Dv; ++c) EXPECT_EQ(out[h * one.Dv + c], static_cast<double>(one.v[c]));
  const Fused many("llama-3.1-8b", 6, 100, 4);
  const Outputs m = run(*good, many, DType::f32, false);
  ASSERT_TRUE(m.result.ok()) << m.result.message;
  EXPECT_TRUE(good->finish().failures.empty());
  EXPECT_EQ(good->plugin().failed_calls(), 0);
}

// A crash in the fused call is that call's failure, named, its outputs NaN; the next call gets a fresh host.
TEST(PluginAttention, CrashInTheFusedCallIsAKernelFailure) {
  const std::unique_ptr<plugin::PluginKernel> segv = plugin::load_plugin_kernel(bad_plugin("segv"));
  const Fused f("llama-3.1-8b", 3, 0, 5);
  const Outputs o = run(*segv, f, DType::f32, false);
  EXPECT_EQ(o.result.status, kut::CallResult::Status::failed);
  EXPECT_NE(o.result.message.find("killed by SIGSEGV inside ropecheck_rope_attention"), std::string::npos) << o.result.message;
  EXPECT_NE(o.result.message.find("fused test"), std::string::npos) << o.result.message;
  float x;
  std::memcpy(&x, o.out.data(), 4);
  EXPECT_TRUE(std::isnan(x));
  EXPECT_EQ(run(*segv, f, DType::f32, false).result.status, kut::CallResult::Status::failed);
  EXPECT_EQ(segv->plugin().failed_calls(), 2);
}

// A hang in the fused call: failed after the timeout, and the kernel is not called again.
TEST(PluginAttention, HangInTheFusedCallIsAKernelFailure) {
  plugin::PluginClientOptions opt;
  opt.timeout_s = 1;
  const std::unique_ptr<plugin::PluginKernel> loop = plugin::load_plugin_kernel(bad_plugin("loop"), opt);
  const Fused f("llama-3.1-8b", 3, 0, 6);
  const Outputs o = run(*loop, f, DType::f32, false);
  EXPECT_EQ(o.result.status, kut::CallResult::Status::failed);
  EXPECT_NE(o.result.message.find("no answer after 1 s inside ropecheck_rope_attention"), std::string::npos) << o.result.message;
  const Outputs again = run(*loop, f, DType::f32, false);
  EXPECT_NE(again.result.message.find("not called"), std::string::npos) << again.result.message;
}

}  // namespace
}  // namespace ropecheck
