// C-ABI plugins as kernels under test (plugin/plugin_kernel.hpp): a plugin gives what its ABI entry points
// return, ropecheck's CPU kernels exported through kernel_abi.h give the bytes builtin:RECIPE gives, and
// options after the library's name reach ropecheck_kernel_configure.
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
#include "test_paths.hpp"
#include "ropecheck/io/tensor.hpp"
#include "ropecheck/kernels/rope_kernels.hpp"
#include "ropecheck/kut/builtin_sources.hpp"
#include "ropecheck/plugin/kernel_name.hpp"
#include "ropecheck/plugin/plugin_kernel.hpp"

namespace ropecheck {
namespace {

namespace k = ropecheck::kernels;
using test::Problem;
using test::rope_apply;

// A plugin behind the interface: its declared capabilities, its outputs, and UNSUPPORTED passed on.
// The plugin client passes ScalingType's value as scaling_type: every ROPECHECK_SCALING_<NAME> N of
// kernel_abi.h must be the type whose to_string is <name>, and the numbers must cover 0..N-1.
TEST(PluginKernel, AbiScalingNumbersAreTheSpecOrder) {
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

TEST(PluginKernel, PluginSource) {
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

// A plugin opened by name is labelled "plugin:" and the name it reports, for props' and drift's tables.
TEST(PluginKernel, OpenedPluginIsLabelledByItsReportedName) {
  const plugin::OpenedKernel o = plugin::open_kernel(plugin::plugin_kernel(ropecheck::test::hf_plugin()));
  const std::string reported = static_cast<const plugin::PluginKernel&>(*o.kernel).plugin().name();
  EXPECT_FALSE(reported.empty());
  EXPECT_EQ(o.label, "plugin:" + reported);
  EXPECT_EQ(o.source["kind"], "kernel");
}

// ropecheck's CPU kernels exported through kernel_abi.h (libropecheck_builtin_kernels.so): through the
// plugin client, isolated and in process, every recipe gives the bytes builtin:RECIPE gives, for every
// entry point and output dtype, with multimodal, negative and explicit-seq_len problems.
TEST(PluginKernel, BuiltinPluginIsTheCpuKernel) {
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
TEST(PluginKernel, PluginOptions) {
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

}  // namespace
}  // namespace ropecheck
