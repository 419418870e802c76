// The fused recipes on a GPU (label gpu): cuda_fused_cases.hpp through cuda_fused.hpp and cuda_rope_apply,
// each test skipping without a CUDA device; test_cuda_fused_emulation.cpp runs the same cases on the host.
#include <gtest/gtest.h>

#include <string>

#include "cuda_fused_cases.hpp"
#include "ropecheck/kernels/cuda_fused.hpp"
#include "ropecheck/kernels/cuda_kernels.hpp"

namespace {

using namespace ropecheck;
namespace k = ropecheck::kernels;
using namespace ropecheck::cuda_fused_cases;

#define ROPECHECK_REQUIRE_GPU()                                                            \
  do {                                                                                     \
    std::string why;                                                                       \
    if (!k::cuda_device_available(&why)) GTEST_SKIP() << "no CUDA device (" << why << ")"; \
  } while (0)

class OnDevice : public FusedRunner {
 public:
  k::StoredTensor rope_quantize(const k::RopePlan& p, const k::PositionsView& pos, const k::TensorView& in,
                                const quant::StoreSpec& s) override {
    return k::cuda_rope_quantize(p, pos, in, s);
  }
  void rope_append_kv(const k::RopePlan& p, const kv::CacheSpec& c, std::int64_t heads, std::span<const float> k_in,
                      std::span<const float> v_in, DType dt, std::span<std::uint8_t> kc, std::span<std::uint8_t> vc) override {
    k::cuda_rope_append_kv(p, c, heads, k_in, v_in, dt, kc, vc);
  }
  void rms_norm_rope_apply(const k::RopePlan& p, const RmsNormStage& n, const k::PositionsView& pos, const k::TensorView& in,
                           const k::TensorView& out) override {
    k::cuda_rms_norm_rope_apply(p, n, pos, in, out);
  }
  // Host buffers mirrored on the device for the call (contiguous views).
  void rope_apply(const k::RopePlan& p, const k::PositionsView& pos, const k::TensorView& in, const k::TensorView& out) override {
    const auto bytes = [](const k::TensorView& v) {
      return static_cast<std::size_t>(v.tokens * v.heads * v.head_dim * format_info(v.dtype).storage_bits / 8);
    };
    k::CudaBuffer din(bytes(in)), dout(bytes(out)), dpos(static_cast<std::size_t>(pos.tokens) * 8);
    din.upload(in.data, bytes(in));
    dpos.upload(pos.data, static_cast<std::size_t>(pos.tokens) * 8);
    k::PositionsView dp = pos;
    dp.data = dpos.data();
    k::TensorView vi = in, vo = out;
    vi.data = din.data();
    vo.data = dout.data();
    k::cuda_rope_apply(k::CudaRopePlan(p), dp, vi, vo);
    dout.download(out.data, bytes(out));
  }
};

TEST(CudaFused, StoresMatchTheCpuRecipeByteForByte) {
  ROPECHECK_REQUIRE_GPU();
  OnDevice d;
  stores_match_cpu(d);
}
TEST(CudaFused, KvAppendMatchesTheCpuRecipeByteForByte) {
  ROPECHECK_REQUIRE_GPU();
  OnDevice d;
  append_matches_cpu(d);
}
TEST(CudaFused, NormThenRotateMatchesTheCpuRecipe) {
  ROPECHECK_REQUIRE_GPU();
  OnDevice d;
  norm_matches_cpu(d);
}
TEST(CudaFused, HfStoresPassTheirClass) {
  ROPECHECK_REQUIRE_GPU();
  OnDevice d;
  hf_stores_pass_their_class(d);
}
TEST(CudaFused, MlaSliceMatchesTheCpuRecipe) {
  ROPECHECK_REQUIRE_GPU();
  OnDevice d;
  mla_slice_matches_cpu(d);
}

}  // namespace
