// The fused recipes on CUDA (kernels/cuda/README.md, "Fused recipes"): the CPU recipes' signatures
// (rope_quantize.hpp, kv_append.hpp, qk_norm.hpp), host memory in and out, every stage on the device
// (the rotation is cuda_rope_apply's kernel; norm, stores and the cache append are kernels/cuda/fused.cu)
// chained through device scratch memory. Bytes identical to the CPU recipes where the rotation is (the
// accurate recipe; README's table for the others). No CUDA type here; links ropecheck::cuda_kernels.
//
// std::invalid_argument as the CPU recipes (and for MLX affine stores, which have no CUDA kernel),
// std::runtime_error naming the CUDA call that failed (no device among them).
#pragma once

#include <cstdint>
#include <span>

#include "ropecheck/core/kv_cache.hpp"
#include "ropecheck/core/spec.hpp"
#include "ropecheck/kernels/rope_kernels.hpp"
#include "ropecheck/kernels/rope_quantize.hpp"

namespace ropecheck::kernels {

// rope_quantize: `in` rotated to binary32, then stored (FP8 e4m3fn / e5m2 with a per-token or
// per-(token, head) data-derived scale, GGML q8_0 / q4_0).
StoredTensor cuda_rope_quantize(const RopePlan& plan, const PositionsView& positions, const TensorView& in,
                                const quant::StoreSpec& spec);

// rope_append_kv: k rotated at each appended token's position, k and v written to their slots.
void cuda_rope_append_kv(const RopePlan& plan, const kv::CacheSpec& cache, std::int64_t heads,
                         std::span<const float> k_in, std::span<const float> v_in, DType dtype,
                         std::span<std::uint8_t> k_cache, std::span<std::uint8_t> v_cache);

// The Q/K RMSNorm stage (rms_norm_f32, binary32) of `in`, then the rotation into `out` (rope_apply's
// shapes; in's dtype any, read into binary32 first as transformers does).
void cuda_rms_norm_rope_apply(const RopePlan& plan, const RmsNormStage& norm, const PositionsView& positions,
                              const TensorView& in, const TensorView& out);

}  // namespace ropecheck::kernels
