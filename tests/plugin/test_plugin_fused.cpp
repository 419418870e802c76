// The kernel ABI's revision-3 fused entry points (ropecheck_rope_quantize, ropecheck_rope_append_kv) and
// the norm / MLA capabilities: ropecheck's CPU recipes exported by libropecheck_builtin_kernels.so give,
// through the isolated host, the bytes builtin:RECIPE gives (kernels/rope_quantize.hpp, kv_append.hpp),
// and leave a cache's other slots as the sentinel; the descriptions survive the ABI both ways
// (kut/abi_fused.hpp); a revision-2 plugin answers unsupported for the fused calls and for a norm spec.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_paths.hpp"
#include "ropecheck/kernels/recipe.hpp"
#include "ropecheck/kernels/rope_quantize.hpp"
#include "ropecheck/kut/abi_fused.hpp"
#include "ropecheck/kut/builtin_sources.hpp"
#include "ropecheck/plugin/plugin_kernel.hpp"
#include "ropecheck/reference/presets.hpp"

namespace ropecheck {
namespace {

namespace k = ropecheck::kernels;

std::vector<float> bf16_exact(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& f : x) {
    f = nd(rng);
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    u &= 0xFFFF0000u;
    std::memcpy(&f, &u, 4);
  }
  return x;
}

std::unique_ptr<plugin::PluginKernel> builtin_plugin(k::Recipe r) {
  return plugin::load_plugin_kernel(std::string(test::builtin_kernels()) + ":" + std::string(k::recipe_info(r).name) +
                                    ":threads=1");
}

k::StoredTensor quantize(kut::KernelUnderTest& kt, const EncodingSpec& spec, const std::vector<Position>& pos,
                         const std::vector<float>& x, int heads, const quant::StoreSpec& s, const k::StoredTensor& sizes,
                         kut::CallResult& result) {
  k::StoredTensor out{std::vector<std::uint8_t>(sizes.codes.size()), std::vector<std::uint8_t>(sizes.scales.size()),
                      std::vector<std::uint8_t>(sizes.biases.size())};
  kut::RopeQuantizeCall c;
  c.problem = {&spec, std::nullopt, pos, "quantize test"};
  c.input = "k";
  c.heads = heads;
  c.x = {DType::f32, std::as_bytes(std::span(x))};
  c.store = &s;
  c.codes = std::as_writable_bytes(std::span(out.codes));
  c.scales = std::as_writable_bytes(std::span(out.scales));
  c.biases = std::as_writable_bytes(std::span(out.biases));
  result = kt.rope_quantize(c);
  return out;
}

// Every store kind the ABI describes reaches the recipe's quantizer unchanged: the module's bytes are
// kernels::rope_quantize's and builtin:hf's.
TEST(PluginFused, BuiltinPluginStoresAreTheRecipes) {
  const EncodingSpec spec = load_preset("llama-3.1-8b");
  const int H = 2, D = spec.rope.head_dim, T = 5;
  std::vector<Position> pos;
  std::vector<std::int64_t> p;
  for (int t = 0; t < T; ++t) pos.push_back(Position::uniform(1000 + t)), p.push_back(1000 + t);
  const std::vector<float> x = bf16_exact(static_cast<std::size_t>(T * H * D), 3);
  const std::unique_ptr<kut::KernelUnderTest> cpu = kut::make_cpu_kernel(k::Recipe::hf, {.threads = 1});
  const std::unique_ptr<plugin::PluginKernel> abi = builtin_plugin(k::Recipe::hf);
  ASSERT_TRUE(abi->info().capabilities.rope_quantize);
  const k::RopePlan plan = k::make_rope_plan(spec.rope, k::Recipe::hf, std::nullopt);
  for (const char* item : {"e4m3fn", "e5m2:nonfinite:per-token-head", "q8_0", "q4_0", "int4g64:bf16", "int8g32"}) {
    std::string why;
    const quant::StoreSpec s = *quant::parse_store(item, why);
    const k::StoredTensor want = k::rope_quantize(
        plan, k::PositionsView::of(p), k::TensorView::contiguous(const_cast<float*>(x.data()), DType::f32, T, H, D), s);
    kut::CallResult a, b;
    const k::StoredTensor from_cpu = quantize(*cpu, spec, pos, x, H, s, want, a), from_abi = quantize(*abi, spec, pos, x, H, s, want, b);
    ASSERT_TRUE(a.ok()) << item << ": " << a.message;
    ASSERT_TRUE(b.ok()) << item << ": " << b.message;
    EXPECT_EQ(from_cpu.codes, want.codes) << item;
    EXPECT_EQ(from_abi.codes, want.codes) << item;
    EXPECT_EQ(from_abi.scales, want.scales) << item;
    EXPECT_EQ(from_abi.biases, want.biases) << item;
  }
  EXPECT_TRUE(abi->finish().failures.empty());
}

// A data-derived scale over every token has no ABI field: the plugin answers unsupported, naming it,
// while the in-process kernel (builtin:hf) stores it as the recipe does.
TEST(PluginFused, AScaleOverEveryTokenIsNotInTheAbi) {
  const EncodingSpec spec = load_preset("llama-3.1-8b");
  const int H = 2, D = spec.rope.head_dim, T = 3;
  std::vector<Position> pos;
  std::vector<std::int64_t> p;
  for (int t = 0; t < T; ++t) pos.push_back(Position::uniform(t)), p.push_back(t);
  const std::vector<float> x = bf16_exact(static_cast<std::size_t>(T * H * D), 4);
  const std::unique_ptr<kut::KernelUnderTest> cpu = kut::make_cpu_kernel(k::Recipe::hf, {.threads = 1});
  const std::unique_ptr<plugin::PluginKernel> abi = builtin_plugin(k::Recipe::hf);
  const k::RopePlan plan = k::make_rope_plan(spec.rope, k::Recipe::hf, std::nullopt);
  std::string why;
  const quant::StoreSpec s = *quant::parse_store("e4m3fn:per-tensor", why);
  const k::StoredTensor want = k::rope_quantize(
      plan, k::PositionsView::of(p), k::TensorView::contiguous(const_cast<float*>(x.data()), DType::f32, T, H, D), s);
  kut::CallResult a, b;
  const k::StoredTensor from_cpu = quantize(*cpu, spec, pos, x, H, s, want, a);
  quantize(*abi, spec, pos, x, H, s, want, b);
  ASSERT_TRUE(a.ok()) << a.message;
  EXPECT_EQ(from_cpu.codes, want.codes);
  EXPECT_EQ(from_cpu.scales, want.scales);
  EXPECT_EQ(want.scales.size(), 4u);  // one f32 for the tensor
  EXPECT_EQ(b.status, kut::CallResult::Status::unsupported);
  EXPECT_NE(b.message.find("over every token (e4m3fn:saturate:per-tensor) is not in the kernel ABI"), std::string::npos)
      << b.message;
}

kv::CacheSpec cache_of(const char* kind, const char* layout) {
  return kv::parse_cache_spec(nlohmann::json{{"sequences", {{{"cached", 0}, {"appended", 5}}, {{"cached", 6}, {"appended", 1}}}},
                                             {"cache", kind}, {"layout", layout}, {"page_size", 4}},
                              7);
}

// The append through the ABI is builtin:accurate's, and every slot no token owns keeps the sentinel.
TEST(PluginFused, BuiltinPluginAppendIsTheRecipe) {
  const EncodingSpec spec = load_preset("llama-3.1-8b");
  const int H = 2, D = spec.rope.head_dim;
  const std::unique_ptr<kut::KernelUnderTest> cpu = kut::make_cpu_kernel(k::Recipe::accurate, {.threads = 1});
  const std::unique_ptr<plugin::PluginKernel> abi = builtin_plugin(k::Recipe::accurate);
  ASSERT_TRUE(abi->info().capabilities.rope_append_kv);
  for (const auto& [kind, layout] : {std::pair{"paged", "NHD"}, std::pair{"paged", "HND"}, std::pair{"slots", "NHD"}}) {
    const kv::CacheSpec cache = cache_of(kind, layout);
    std::vector<Position> pos;
    for (std::int64_t q : kv::positions(cache)) pos.push_back(Position::uniform(q));
    const auto n = static_cast<std::size_t>(cache.tokens() * H * D), slots = static_cast<std::size_t>(cache.slots() * H * D);
    const std::vector<float> kin = bf16_exact(n, 5), vin = bf16_exact(n, 6);
    auto run = [&](kut::KernelUnderTest& kt, std::vector<float>& kc, std::vector<float>& vc) {
      kc.assign(slots, 0), vc.assign(slots, 0);
      std::memset(kc.data(), 0xFF, slots * 4), std::memset(vc.data(), 0xFF, slots * 4);
      kut::KvAppendCall c;
      c.problem = {&spec, std::nullopt, pos, "append test"};
      c.cache = &cache;
      c.heads = H;
      c.k = {DType::f32, std::as_bytes(std::span(kin))};
      c.v = {DType::f32, std::as_bytes(std::span(vin))};
      c.k_cache = {DType::f32, std::as_writable_bytes(std::span(kc))};
      c.v_cache = {DType::f32, std::as_writable_bytes(std::span(vc))};
      return kt.rope_append_kv(c);
    };
    std::vector<float> k1, v1, k2, v2;
    ASSERT_TRUE(run(*cpu, k1, v1).ok()) << kind << " " << layout;
    const kut::CallResult r = run(*abi, k2, v2);
    ASSERT_TRUE(r.ok()) << kind << " " << layout << ": " << r.message;
    EXPECT_EQ(std::memcmp(k1.data(), k2.data(), slots * 4), 0) << kind << " " << layout;
    EXPECT_EQ(std::memcmp(v1.data(), v2.data(), slots * 4), 0) << kind << " " << layout;
    std::size_t sentinel = 0;
    for (float f : k2) {
      std::uint32_t u;
      std::memcpy(&u, &f, 4);
      sentinel += u == 0xFFFFFFFFu;
    }
    EXPECT_EQ(sentinel, slots - n) << kind << " " << layout;  // exactly the appended tokens' slots written
  }
}

TEST(PluginFused, DescriptionsSurviveTheAbi) {
  EXPECT_EQ(kut::abi_dtype(DType::f64), ROPECHECK_DTYPE_F64);
  EXPECT_EQ(kut::abi_dtype(DType::f32), ROPECHECK_DTYPE_F32);
  EXPECT_EQ(kut::abi_dtype(DType::f16), ROPECHECK_DTYPE_F16);
  EXPECT_EQ(kut::abi_dtype(DType::bf16), ROPECHECK_DTYPE_BF16);
  for (const char* item : {"e4m3fn", "e5m2:saturate:per-token-head", "e4m3fn:nonfinite", "q8_0", "q4_0", "int4g128:f16",
                           "int8g64:bf16"}) {
    std::string why;
    const quant::StoreSpec s = *quant::parse_store(item, why);
    const std::optional<quant::StoreSpec> back = kut::store_from_abi(kut::abi_store(s), why);
    ASSERT_TRUE(back) << item << ": " << why;
    EXPECT_EQ(back->kind, s.kind) << item;
    EXPECT_EQ(back->name(), s.name()) << item;
    EXPECT_EQ(back->overflow, s.overflow) << item;
    EXPECT_EQ(back->scale, s.scale) << item;
    EXPECT_EQ(back->affine.bits, s.affine.bits) << item;
    EXPECT_EQ(back->affine.group_size, s.affine.group_size) << item;
    EXPECT_EQ(back->affine.scale_dtype, s.affine.scale_dtype) << item;
  }
  ropecheck_store_params junk{};
  junk.kind = ROPECHECK_STORE_AFFINE;
  junk.group_size = 48;
  std::string why;
  EXPECT_FALSE(kut::store_from_abi(junk, why));
  EXPECT_NE(why.find("store kind 3"), std::string::npos);
  for (const auto& [kind, layout] : {std::pair{"paged", "HND"}, std::pair{"slots", "NHD"}}) {
    const kv::CacheSpec c = cache_of(kind, layout);
    const kut::AbiCache a = kut::abi_cache(c);
    const kv::CacheSpec back = kut::cache_from_abi(a.params, c.tokens());
    EXPECT_EQ(kv::token_slots(back), kv::token_slots(c)) << kind;
    EXPECT_EQ(back.layout, c.layout);
  }
  kut::AbiCache bad = kut::abi_cache(cache_of("slots", "NHD"));
  bad.slot_mapping[0] += 1;  // not the token's offset in its block
  EXPECT_THROW(kut::cache_from_abi(bad.params, 6), std::invalid_argument);
}

// A revision-2 plugin (bad_plugin_good.so: no fused store / append, no norm capability) answers
// unsupported for both fused calls and for a spec with a Q/K norm; the built-in module declares the norm
// and rotates it as builtin:hf does.
TEST(PluginFused, RevisionTwoPluginAnswersUnsupported) {
  const std::unique_ptr<plugin::PluginKernel> r2 =
      plugin::load_plugin_kernel(std::string(test::bad_plugin_dir()) + "/bad_plugin_good.so");
  EXPECT_FALSE(r2->info().capabilities.rope_quantize);
  EXPECT_FALSE(r2->info().capabilities.rope_append_kv);
  EncodingSpec spec = load_preset("llama-3.1-8b");
  const int H = 2, D = spec.rope.head_dim;
  const std::vector<Position> pos = {Position::uniform(3), Position::uniform(4)};
  const std::vector<float> x = bf16_exact(static_cast<std::size_t>(2 * H * D), 9);
  std::string why;
  const quant::StoreSpec s = *quant::parse_store("q8_0", why);
  kut::CallResult res;
  quantize(*r2, spec, pos, x, H, s, {std::vector<std::uint8_t>(static_cast<std::size_t>(2 * H * D / 32 * 34)), {}, {}}, res);
  EXPECT_EQ(res.status, kut::CallResult::Status::unsupported);
  kut::KvAppendCall append;
  EXPECT_EQ(r2->rope_append_kv(append).status, kut::CallResult::Status::unsupported);

  spec.rope.k_norm = RmsNormStage{1e-6, NormWeightForm::one_plus_w, std::vector<double>(static_cast<std::size_t>(D), 0.25)};
  auto apply = [&](kut::KernelUnderTest& kt, std::vector<float>& out) {
    out.assign(x.size(), 0);
    kut::RopeApplyCall c;
    c.problem = {&spec, std::nullopt, pos, "norm test"};
    c.input = "k";
    c.heads = H;
    c.x = {DType::f32, std::as_bytes(std::span(x))};
    c.out = {DType::f32, std::as_writable_bytes(std::span(out))};
    return kt.rope_apply(c);
  };
  std::vector<float> a, b;
  const kut::CallResult no = apply(*r2, a);
  EXPECT_EQ(no.status, kut::CallResult::Status::unsupported);
  EXPECT_NE(no.message.find("ROPECHECK_CAP_QK_NORM"), std::string::npos) << no.message;
  const std::unique_ptr<kut::KernelUnderTest> cpu = kut::make_cpu_kernel(k::Recipe::hf, {.threads = 1});
  const std::unique_ptr<plugin::PluginKernel> abi = builtin_plugin(k::Recipe::hf);
  ASSERT_TRUE(apply(*cpu, a).ok());
  const kut::CallResult yes = apply(*abi, b);
  ASSERT_TRUE(yes.ok()) << yes.message;
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace ropecheck
