// The kernel under test (kut/kernel_under_test.hpp) and its three sources: the CPU kernels compute
// exactly what kernels::rope_apply / rope_cos_sin_table / sinusoidal_table compute, the CUDA source
// under the host emulation exactly what kernels/cuda/emulation.hpp computes (and refuses to run
// without a device or the switch), a plugin what its ABI entry points return; every source answers
// unsupported (never a crash, never made-up outputs) for a call it cannot serve.
#include <gtest/gtest.h>

#include "test_paths.hpp"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <cstring>
#include <filesystem>
#include <optional>
#include <utility>
#include <fstream>
#include <sstream>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "ropecheck/plugin/plugin_kernel.hpp"
#include "ropecheck/io/tensor.hpp"
#include "ropecheck/kernels/rope_kernels.hpp"
#include "ropecheck/kut/builtin_sources.hpp"
#include "ropecheck/kut/cuda_source.hpp"
#include "ropecheck/props/kut_target.hpp"
#include "ropecheck/reference/presets.hpp"

namespace ropecheck {
namespace {

namespace k = ropecheck::kernels;

// Inputs exact in bf16, positions spread over the range where f32 angles lose bits.
struct Problem {
  EncodingSpec spec = load_preset("llama-3.1-8b");
  std::vector<Position> pos;
  std::vector<std::int64_t> flat;
  int heads = 2;
  std::vector<float> x;
  Problem() {
    for (std::int64_t p : {0, 1, 7, 4095, 65537, 131071}) pos.push_back(Position::uniform(p)), flat.push_back(p);
    x.resize(pos.size() * static_cast<std::size_t>(heads * spec.rope.head_dim));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i % 17) - 8) / 8.0f;
  }
};

std::vector<std::byte> rope_apply(kut::KernelUnderTest& kt, const Problem& p, DType out, kut::CallResult* result) {
  std::vector<std::byte> o(p.x.size() * static_cast<std::size_t>(format_info(out).storage_bits / 8));
  kut::RopeApplyCall c;
  c.problem = {&p.spec, std::nullopt, p.pos, "test"};
  c.input = "k";
  c.heads = p.heads;
  c.x = {DType::f32, std::as_bytes(std::span(p.x))};
  c.out = {out, o};
  *result = kt.rope_apply(c);
  return o;
}

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
  // accurate with f32 storage is bit-identical on CUDA and CPU below 2^28 (kernels/cuda/README.md).
  kut::CallResult res;
  const std::vector<std::byte> got = rope_apply(*kt, p, DType::f32, &res);
  ASSERT_TRUE(res.ok()) << res.message;
  const std::vector<std::byte> want = rope_apply(*kut::make_cpu_kernel(k::Recipe::accurate), p, DType::f32, &res);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size()), 0);
}

// A plugin behind the interface: its declared capabilities, its outputs, and UNSUPPORTED passed on.
// The plugin client passes ScalingType's value as scaling_type: every ROPECHECK_SCALING_<NAME> N of
// kernel_abi.h must be the type whose to_string is <name>, and the numbers must cover 0..N-1.
TEST(Kut, AbiScalingNumbersAreTheSpecOrder) {
  std::ifstream in(test::kernel_abi_header());
  ASSERT_TRUE(in) << test::kernel_abi_header();
  // "#define ROPECHECK_SCALING_<NAME> <N>" (read without std::regex: GCC 12 warns falsely inside it
  // when the sanitized copy of this test is compiled at -O1).
  const std::string define = "#define ROPECHECK_SCALING_";
  std::set<int> numbers;
  std::string line;
  while (std::getline(in, line)) {
    const std::size_t at = line.find(define);
    if (at == std::string::npos) continue;
    std::istringstream fields(line.substr(at + define.size()));
    std::string upper, number;
    if (!(fields >> upper >> number) || number.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string name = upper;
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const int n = std::stoi(number);
    EXPECT_EQ(to_string(static_cast<ScalingType>(n)), name) << "ROPECHECK_SCALING_" << upper << " " << n;
    numbers.insert(n);
  }
  ASSERT_FALSE(numbers.empty());
  EXPECT_EQ(*numbers.rbegin(), static_cast<int>(numbers.size()) - 1);  // 0..N-1, none twice
  // No ScalingType past the last define (enum class: every int is a valid value to convert).
  EXPECT_EQ(to_string(static_cast<ScalingType>(numbers.size())), "?");
}

TEST(Kut, PluginSource) {
  const Problem p;
  std::unique_ptr<plugin::PluginKernel> kt = plugin::load_plugin_kernel(ropecheck::test::hf_plugin());
  EXPECT_TRUE(kt->info().external);
  EXPECT_TRUE(kt->info().capabilities.rope_apply);
  EXPECT_EQ(kt->recipe_rows(), nullptr);
  kut::CallResult res;
  const std::vector<std::byte> got = rope_apply(*kt, p, DType::f32, &res);
  ASSERT_TRUE(res.ok()) << res.message;
  // The C plugin is the hf recipe in f32: the CPU hf kernel's class, so the two agree to a few ulp of 1.
  const std::vector<std::byte> cpu = rope_apply(*kut::make_cpu_kernel(k::Recipe::hf), p, DType::f32, &res);
  for (std::size_t i = 0; i < got.size(); i += 4)
    ASSERT_NEAR(load_element(got.data() + i, DType::f32), load_element(cpu.data() + i, DType::f32), 1e-3) << i;
  rope_apply(*kt, p, DType::f64, &res);  // the HF C plugin has no f64 output: its UNSUPPORTED and reason passed on
  EXPECT_EQ(res.status, kut::CallResult::Status::unsupported);
  EXPECT_NE(res.message.find("f32, f16 and bf16 only"), std::string::npos) << res.message;
}

// ropecheck's CPU kernels exported through kernel_abi.h (libropecheck_builtin_kernels.so): through the
// plugin client, isolated and in process, every recipe gives the bytes builtin:RECIPE gives, for every
// entry point and output dtype, with multimodal, negative and explicit-seq_len problems.
TEST(Kut, BuiltinPluginIsTheCpuKernel) {
  struct Case {
    const char* preset;
    std::optional<std::int64_t> seq_len;
  };
  const std::vector<Case> cases = {{"llama-3.1-8b", std::nullopt}, {"qwen2.5-7b-yarn", std::nullopt},
                                   {"phi-3.5-mini", 8192}, {"qwen3-vl-8b", std::nullopt}, {"gpt-j-6b", std::nullopt},
                                   {"fairseq-transformer", std::nullopt}};
  // hf (isolated) over every case and dtype; every other recipe (in process) on the first case. One
  // thread: on problems this small, OpenMP's idle workers would spin for most of the test's CPU time.
  k::KernelOptions one_thread;
  one_thread.threads = 1;
  for (const k::RecipeInfo& info : k::recipes()) {
    const std::unique_ptr<kut::KernelUnderTest> cpu = kut::make_cpu_kernel(info.recipe, one_thread);
    const bool in_process = info.recipe != k::Recipe::hf;
    const std::size_t n_cases = in_process ? 1 : cases.size();
    plugin::PluginClientOptions opt;
    opt.in_process = in_process;
    const std::unique_ptr<plugin::PluginKernel> abi =
        plugin::load_plugin_kernel(std::string(ropecheck::test::builtin_kernels()) + ":" + std::string(info.name) + ":threads=1", opt);
    EXPECT_EQ(abi->plugin().name(), kut::cpu_kernel_name(info.recipe));
    EXPECT_TRUE(abi->info().capabilities.negative_positions);
    EXPECT_EQ(abi->info().capabilities.output_dtypes.size(), 4u);
    for (std::size_t ci = 0; ci < n_cases; ++ci) {
      const Case& c = cases[ci];
      const EncodingSpec spec = load_preset(c.preset);
      const std::string what = std::string(info.name) + " " + c.preset + (in_process ? " in process" : " isolated");
      std::vector<Position> pos;
      std::vector<std::int64_t> flat;
      for (std::int64_t t : {-3, 0, 1, 77, 4095, 65537, 131071}) pos.push_back({t, t / 3, t % 5}), flat.push_back(t);
      if (spec.family == Family::rope && spec.rope.mrope == MropeMode::none)
        for (Position& q : pos) q = Position::uniform(q.t);
      for (DType d : {DType::f64, DType::f32, DType::f16, DType::bf16}) {
        const std::size_t esize = static_cast<std::size_t>(format_info(d).storage_bits / 8);
        auto same = [&](const char* entry, const kut::CallResult& a, const kut::CallResult& b,
                        const std::vector<std::byte>& x, const std::vector<std::byte>& y) {
          EXPECT_EQ(a.status, b.status) << entry << " " << what << " " << to_string(d) << ": " << a.message << " / " << b.message;
          if (a.ok() && b.ok()) {
            // Equal bytes, except that any two NaNs are equal: a NaN's sign and payload depend on the
            // order the compiler gave a commutative operation (f16-positions makes NaNs from 65520 on),
            // so they differ between builds, e.g. this library's release objects and an ASan build.
            ASSERT_EQ(x.size(), y.size()) << entry << " " << what << " " << to_string(d);
            std::size_t differing = 0, first = x.size();
            for (std::size_t i = 0; i + esize <= x.size(); i += esize) {
              if (std::memcmp(x.data() + i, y.data() + i, esize) == 0) continue;
              if (std::isnan(load_element(x.data() + i, d)) && std::isnan(load_element(y.data() + i, d))) continue;
              if (differing++ == 0) first = i / esize;
            }
            EXPECT_EQ(differing, 0u) << entry << " " << what << " " << to_string(d) << ": first at element " << first;
          }
        };
        if (spec.family == Family::sinusoidal) {
          std::vector<std::byte> a(flat.size() * static_cast<std::size_t>(spec.sinusoidal.d_model) * esize), b(a.size());
          kut::SinusoidalCall call{&spec, flat, "test", {d, a}};
          const kut::CallResult ra = abi->sinusoidal(call);
          call.out = {d, b};
          same("sinusoidal", ra, cpu->sinusoidal(call), a, b);
          continue;
        }
        const int heads = 2;
        std::vector<float> x(pos.size() * static_cast<std::size_t>(heads * spec.rope.head_dim));
        for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i % 23) - 11) / 8.0f;
        std::vector<std::byte> a(x.size() * esize), b(a.size());
        kut::RopeApplyCall call;
        call.problem = {&spec, c.seq_len, pos, "test"};
        call.input = "q";
        call.heads = heads;
        call.x = {DType::f32, std::as_bytes(std::span(x))};
        call.out = {d, a};
        const kut::CallResult ra = abi->rope_apply(call);
        call.out = {d, b};
        same("rope_apply", ra, cpu->rope_apply(call), a, b);
        const std::size_t table = pos.size() * static_cast<std::size_t>(rope_pairs(spec.rope)) * esize;
        std::vector<std::byte> ca(table), sa(table), cb(table), sb(table);
        kut::RopeTableCall tcall{{&spec, c.seq_len, pos, "test"}, {d, ca}, {d, sa}};
        const kut::CallResult ta = abi->rope_cos_sin(tcall);
        tcall.cos = {d, cb};
        tcall.sin = {d, sb};
        const kut::CallResult tb = cpu->rope_cos_sin(tcall);
        same("rope_cos_sin cos", ta, tb, ca, cb);
        same("rope_cos_sin sin", ta, tb, sa, sb);
      }
    }
  }
}

// Options after the library's name reach ropecheck_kernel_configure; refused or unwanted options are
// unusable input naming them, never ignored.
TEST(Kut, PluginOptions) {
  using plugin::split_kernel_options;
  EXPECT_EQ(split_kernel_options("lib.so:hf:threads=1"), std::make_pair(std::filesystem::path("lib.so"), std::string("hf:threads=1")));
  EXPECT_EQ(split_kernel_options("a:b/lib.so:hf"), std::make_pair(std::filesystem::path("a:b/lib.so"), std::string("hf")));
  EXPECT_EQ(split_kernel_options("dir/lib.so"), std::make_pair(std::filesystem::path("dir/lib.so"), std::string()));
  const std::string lib = ropecheck::test::builtin_kernels();
  EXPECT_EQ(split_kernel_options(lib), std::make_pair(std::filesystem::path(lib), std::string()));
  for (bool in_process : {false, true}) {
    plugin::PluginClientOptions opt;
    opt.in_process = in_process;
    EXPECT_EQ(plugin::load_plugin_kernel(lib, opt)->plugin().name(), kut::cpu_kernel_name(k::Recipe::accurate));
    k::KernelOptions portable;
    portable.portable = true;
    EXPECT_EQ(plugin::load_plugin_kernel(lib + ":hf:portable:threads=1", opt)->plugin().name(),
              kut::cpu_kernel_name(k::Recipe::hf, portable));
    auto refused = [&](const std::string& name, const std::string& needle) {
      try {
        plugin::load_plugin_kernel(name, opt);
        ADD_FAILURE() << name << " loaded";
      } catch (const InputError& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find(needle), std::string::npos) << m;
        EXPECT_EQ(m.find('\n'), std::string::npos) << m;
      }
    };
    refused(lib + ":no-such-recipe", "unknown option 'no-such-recipe'");
    refused(lib + ":hf:threads=-2", "threads must be");
    refused(std::string(ropecheck::test::hf_plugin()) + ":hf", "takes none (it does not export ropecheck_kernel_configure)");
  }
}

// A kernel whose every call fails (as a crashed plugin's do: outputs NaN) or is unsupported.
class FailingKernel final : public kut::KernelUnderTest {
 public:
  explicit FailingKernel(kut::CallResult::Status s) : status_(s) {
    info_.name = "failing";
    info_.capabilities.rope_apply = true;
    info_.capabilities.output_dtypes = {DType::f32};
  }
  const kut::Info& info() const override { return info_; }
  kut::CallResult rope_apply(const kut::RopeApplyCall& c) override {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (std::size_t i = 0; i < c.out.bytes.size(); i += 4) std::memcpy(c.out.bytes.data() + i, &nan, 4);
    return {status_, "killed by SIGSEGV"};
  }
  kut::CallResult rope_cos_sin(const kut::RopeTableCall&) override { return {kut::CallResult::Status::unsupported, ""}; }
  kut::CallResult sinusoidal(const kut::SinusoidalCall&) override { return {kut::CallResult::Status::unsupported, ""}; }
  void forgive() override { ++forgiven; }
  int forgiven = 0;

 private:
  kut::CallResult::Status status_;
  kut::Info info_;
};

// props' one generic target: outputs decoded, failures counted and reported once, unsupported skips,
// undeclared dtypes and entry points never called, with_output only where asked for.
TEST(Kut, PropsTargetOverAnyKernel) {
  const Problem p;
  std::vector<double> x(p.x.begin(), p.x.end()), out(x.size());
  props::TargetInfo info;
  info.name = "t";
  auto failing = std::make_shared<FailingKernel>(kut::CallResult::Status::failed);
  std::unique_ptr<props::Target> t = props::make_kut_target(failing, info);
  EXPECT_FALSE(t->info().negative_positions);  // from the kernel's capabilities
  EXPECT_TRUE(t->rope_apply(p.spec, p.pos, p.heads, x, out));  // a failed call still ran: NaN outputs fail the property
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_TRUE(t->rope_apply(p.spec, p.pos, p.heads, x, out));
  props::Target::Failures f = t->take_failures();
  EXPECT_EQ(f.failed, 2);
  EXPECT_EQ(f.calls, 2);
  EXPECT_EQ(f.first, "killed by SIGSEGV");
  EXPECT_EQ(failing->forgiven, 1);
  EXPECT_EQ(t->take_failures().failed, 0);  // reported once
  EXPECT_EQ(t->with_output(DType::bf16), nullptr);
  std::vector<double> pe(64);
  EXPECT_FALSE(t->sinusoidal(load_preset("transformer-base"), std::vector<std::int64_t>{0}, pe));  // no entry point

  auto unsupported = std::make_shared<FailingKernel>(kut::CallResult::Status::unsupported);
  t = props::make_kut_target(unsupported, info);
  EXPECT_FALSE(t->rope_apply(p.spec, p.pos, p.heads, x, out));
  EXPECT_EQ(t->take_failures().failed, 0);

  info.dtype = DType::f32;
  t = props::make_kut_target(kut::make_cpu_kernel(k::Recipe::hf), info, true);
  EXPECT_TRUE(t->info().negative_positions);
  std::unique_ptr<props::Target> bf = t->with_output(DType::bf16);
  ASSERT_NE(bf, nullptr);
  EXPECT_EQ(bf->info().dtype, DType::bf16);
  ASSERT_TRUE(bf->rope_apply(p.spec, p.pos, p.heads, x, out));
  kut::CallResult res;
  const std::vector<std::byte> want = rope_apply(*kut::make_cpu_kernel(k::Recipe::hf), p, DType::bf16, &res);
  for (std::size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], load_element(want.data() + 2 * i, DType::bf16)) << i;
}

}  // namespace
}  // namespace ropecheck
