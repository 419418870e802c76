// The fused recipes' CUDA code without a GPU (label kernels): cuda_fused_cases.hpp on the host emulation
// (kernels/cuda/emulation.hpp), which runs the kernels' own stages (fused.cu, rope_apply.cu) thread by
// thread. test_cuda_fused.cpp runs the same cases on a GPU.
#include <gtest/gtest.h>

#include "cuda_fused_cases.hpp"
#include "emulation.hpp"

namespace {

using namespace ropecheck;
namespace k = ropecheck::kernels;
namespace emu = ropecheck::kernels::cuda_detail;
using namespace ropecheck::cuda_fused_cases;

class Emulated : public FusedRunner {
 public:
  k::StoredTensor rope_quantize(const k::RopePlan& p, const k::PositionsView& pos, const k::TensorView& in,
                                const quant::StoreSpec& s) override {
    return emu::emulate_rope_quantize(p, pos, in, s);
  }
  void rope_append_kv(const k::RopePlan& p, const kv::CacheSpec& c, std::int64_t heads, std::span<const float> k_in,
                      std::span<const float> v_in, DType dt, std::span<std::uint8_t> kc, std::span<std::uint8_t> vc) override {
    emu::emulate_rope_append_kv(p, c, heads, k_in, v_in, dt, kc, vc);
  }
  void rms_norm_rope_apply(const k::RopePlan& p, const RmsNormStage& n, const k::PositionsView& pos, const k::TensorView& in,
                           const k::TensorView& out) override {
    emu::emulate_rms_norm_rope_apply(p, n, pos, in, out);
  }
  void rope_apply(const k::RopePlan& p, const k::PositionsView& pos, const k::TensorView& in, const k::TensorView& out) override {
    emu::emulate_rope_apply(p, pos, in, out);
  }
};

TEST(CudaEmulationFused, StoresMatchTheCpuRecipeByteForByte) {
  Emulated e;
  stores_match_cpu(e);
}
TEST(CudaEmulationFused, KvAppendMatchesTheCpuRecipeByteForByte) {
  Emulated e;
  append_matches_cpu(e);
}
TEST(CudaEmulationFused, NormThenRotateMatchesTheCpuRecipe) {
  Emulated e;
  norm_matches_cpu(e);
}
TEST(CudaEmulationFused, HfStoresPassTheirClass) {
  Emulated e;
  hf_stores_pass_their_class(e);
}
TEST(CudaEmulationFused, MlaSliceMatchesTheCpuRecipe) {
  Emulated e;
  mla_slice_matches_cpu(e);
}

// MLX affine stores have no CUDA kernel: a named refusal, never made-up bytes; the CPU recipes' argument
// errors (a cache of the wrong size, norm weights not filled in) are refused as the CPU refuses them.
TEST(CudaEmulationFused, AffineStoreAndBadArgumentsAreRefusedByName) {
  const RopeSpec r = load_preset("llama-3.1-8b").rope;
  const k::RopePlan plan = k::make_rope_plan(r, k::Recipe::accurate);
  std::vector<float> x(static_cast<std::size_t>(r.head_dim), 1.0f);
  const std::vector<std::int64_t> pos = {3};
  std::string why;
  try {
    emu::emulate_rope_quantize(plan, k::PositionsView::of(pos), k::TensorView::contiguous(x.data(), DType::f32, 1, 1, r.head_dim),
                               *quant::parse_store("int4g64", why));
    ADD_FAILURE() << "an affine store on CUDA";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA kernel for MLX affine stores (int4g64)"), std::string::npos) << e.what();
  }
  try {  // a given FP8 scale (golden --stores e4m3fn:scale=V): refused by name, not replaced by a derived one
    emu::emulate_rope_quantize(plan, k::PositionsView::of(pos), k::TensorView::contiguous(x.data(), DType::f32, 1, 1, r.head_dim),
                               *quant::parse_store("e4m3fn:scale=0.5", why));
    ADD_FAILURE() << "a given scale on CUDA";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA kernel for a given FP8 scale (e4m3fn:saturate:scale=0.5)"), std::string::npos) << e.what();
  }
  try {  // a data-derived scale over every token (golden --stores e4m3fn:per-tensor): the device groups within a token
    emu::emulate_rope_quantize(plan, k::PositionsView::of(pos), k::TensorView::contiguous(x.data(), DType::f32, 1, 1, r.head_dim),
                               *quant::parse_store("e4m3fn:per-tensor", why));
    ADD_FAILURE() << "a per-tensor data-derived scale on CUDA";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA kernel for an FP8 scale over every token (e4m3fn:saturate:per-tensor)"),
              std::string::npos) << e.what();
  }
  const kv::CacheSpec c = kv::parse_cache_spec(nlohmann::json::parse(R"({"sequences": [{"cached": 0, "appended": 1}]})"), 1);
  std::vector<std::uint8_t> small(8);
  EXPECT_THROW(emu::emulate_rope_append_kv(plan, c, 1, x, {}, DType::f32, small, {}), std::invalid_argument);
  RmsNormStage no_weights;
  const k::TensorView v = k::TensorView::contiguous(x.data(), DType::f32, 1, 1, r.head_dim);
  EXPECT_THROW(emu::emulate_rms_norm_rope_apply(plan, no_weights, k::PositionsView::of(pos), v, v), std::invalid_argument);
}

}  // namespace
