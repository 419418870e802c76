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

}  // namespace
}  // namespace ropecheck
