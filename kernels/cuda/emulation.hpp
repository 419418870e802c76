// The CUDA kernels' code run on the host, without a GPU: the same argument handling as
// cuda_kernels.hpp (table dtypes, q / k launches, fast or generic path, chunking into blocks) and
// the same kernel phases (exec.cuh runs each block's phases thread by thread), on host memory.
//
// What differs from a GPU run: the vendor functions a recipe names (sinf / cosf for hf and the other
// f32 recipes, __sinf / __cosf for fast-sincos, binary64 sin / cos for accurate's f64 path and its
// slow path) are the host libm's (fp.cuh). Everything else (storage conversions, angles, the
// accurate reduction and polynomials, the attention factor, every rounding of the rotation) is the
// kernels' own code, so the emulation lets tests check the CUDA code on any machine
// (tests/gpu/test_cuda_emulation.cpp). Internal: for tests, not part of the installed interface.
#pragma once

#include "ropecheck/kernels/cuda_fused.hpp"
#include "ropecheck/kernels/rope_kernels.hpp"
#include "ropecheck/core/spec.hpp"

namespace ropecheck::kernels::cuda_detail {

void emulate_rope_apply(const RopePlan& plan, const PositionsView& positions, const TensorView& q_in,
                        const TensorView& q_out, const TensorView& k_in = {}, const TensorView& k_out = {});
void emulate_rope_cos_sin_table(const RopePlan& plan, const PositionsView& positions, void* cos_out, void* sin_out,
                                DType dtype);
void emulate_sinusoidal_table(const SinusoidalSpec& spec, Recipe recipe, const PositionsView& positions, void* out,
                              DType dtype);
// The fused recipes of cuda_fused.hpp, emulated (host memory throughout).
StoredTensor emulate_rope_quantize(const RopePlan& plan, const PositionsView& positions, const TensorView& in,
                                   const quant::StoreSpec& spec);
void emulate_rope_append_kv(const RopePlan& plan, const kv::CacheSpec& cache, std::int64_t heads,
                            std::span<const float> k_in, std::span<const float> v_in, DType dtype,
                            std::span<std::uint8_t> k_cache, std::span<std::uint8_t> v_cache);
void emulate_rms_norm_rope_apply(const RopePlan& plan, const RmsNormStage& norm, const PositionsView& positions,
                                 const TensorView& in, const TensorView& out);

}  // namespace ropecheck::kernels::cuda_detail
