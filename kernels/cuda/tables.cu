// cuda_rope_cos_sin_table and cuda_sinusoidal_table: the recipes' cos / sin written out as tables.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "check.cuh"
#include "cos_sin_block.cuh"
#include "launch.hpp"
#include "recipe_math.cuh"
#include "rotate.cuh"

namespace ropecheck::kernels::cuda_detail {
namespace {

constexpr int kThreads = 256;
constexpr std::size_t kMaxSharedBytes = 48 * 1024;

// ---- RoPE cos / sin tables [tokens][pairs] -----------------------------------------------------------

template <class Tag>
__global__ void __launch_bounds__(kThreads) rope_table_kernel(const TableArgs a, int tokens_per_block) {
  constexpr RC R = Tag::id;
  using Tab = TabT<R>;
  extern __shared__ __align__(16) unsigned char smem[];
  const int P = a.plan.pairs;
  Tab* sc = reinterpret_cast<Tab*>(smem);
  Tab* ss = sc + tokens_per_block * P;
  const std::int64_t t0 = static_cast<std::int64_t>(blockIdx.x) * tokens_per_block;
  const int nt = static_cast<int>(min(static_cast<std::int64_t>(tokens_per_block), a.tokens - t0));
  block_cos_sin<R>(a.plan, a.pos, t0, nt, false, a.table_dt, sc, ss);
  const std::int64_t base = t0 * P;
  for (int i = threadIdx.x; i < nt * P; i += blockDim.x) {  // consecutive threads, consecutive elements
    if constexpr (R == RC::accurate_f64) {
      store_double(a.cos_out, base + i, a.out_dt, sc[i]);
      store_double(a.sin_out, base + i, a.out_dt, ss[i]);
    } else {
      store_float(a.cos_out, base + i, a.out_dt, sc[i]);
      store_float(a.sin_out, base + i, a.out_dt, ss[i]);
    }
  }
}

template <class Tag>
void launch_table(const TableArgs& a) {
  constexpr RC R = Tag::id;
  const std::size_t per_token = 2 * sizeof(TabT<R>) * static_cast<std::size_t>(std::max(a.plan.pairs, 1));
  std::int64_t tpb = std::clamp<std::int64_t>(4096 / std::max(a.plan.pairs, 1), 1, 64);
  tpb = std::min<std::int64_t>(tpb, static_cast<std::int64_t>(kMaxSharedBytes / per_token));
  if (tpb < 1) throw std::invalid_argument("ropecheck::kernels (CUDA): too many pairs for one block's shared memory");
  const std::int64_t blocks = (a.tokens + tpb - 1) / tpb;
  if (blocks > 0x7FFFFFFF) throw std::invalid_argument("ropecheck::kernels (CUDA): too many tokens for one launch");
  rope_table_kernel<Tag><<<static_cast<unsigned>(blocks), kThreads, per_token * static_cast<std::size_t>(tpb),
                         static_cast<cudaStream_t>(a.stream)>>>(a, static_cast<int>(tpb));
  check(cudaGetLastError(), "launching the cos / sin table kernel");
}

// ---- sinusoidal rows [tokens][d_model] ------------------------------------------------------------

// One element: column col of the row at position p (already offset), the recipe's way.
template <RC R>
__device__ __forceinline__ void sinusoidal_element(const SinusoidalArgs& a, std::int64_t p, int col, std::int64_t o) {
  const std::int32_t desc = a.columns[col];
  const int kind = desc >> 24, f = desc & 0xFFFFFF;
  if (kind == 0) {
    store_float(a.out, o, a.out_dt, 0.0f);
    return;
  }
  if constexpr (R == RC::accurate_f64) {
    const double theta = __dmul_rn(__ll2double_rn(p), a.w_f64[f]);
    store_double(a.out, o, a.out_dt, kind == 1 ? sin(theta) : cos(theta));
  } else {
    float s, c;
    if constexpr (R == RC::accurate)
      accurate_sincos(__dmul_rn(__ll2double_rn(p), a.w_f64[f]), s, c);
    else
      recipe_sincos_f32<R>(__fmul_rn(recipe_position_f32<R>(p), a.w_f32[f]), s, c);
    store_float(a.out, o, a.out_dt, round_to(kind == 1 ? s : c, a.table_dt));
  }
}

template <class Tag>
__global__ void __launch_bounds__(kThreads) sinusoidal_kernel(const SinusoidalArgs a) {
  constexpr RC R = Tag::id;
  const std::int64_t n = a.tokens * a.d_model;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t t = i / a.d_model;
    const int col = static_cast<int>(i - t * a.d_model);
    sinusoidal_element<R>(a, load_position(a.pos, t, 0) + a.position_offset, col, i);
  }
}

template <class Tag>
void launch_sinusoidal_recipe(const SinusoidalArgs& a) {
  const std::int64_t n = a.tokens * a.d_model;
  const std::int64_t blocks = std::min<std::int64_t>((n + kThreads - 1) / kThreads, 65535 * 16);
  sinusoidal_kernel<Tag><<<static_cast<unsigned>(blocks), kThreads, 0, static_cast<cudaStream_t>(a.stream)>>>(a);
  check(cudaGetLastError(), "launching the sinusoidal table kernel");
}

}  // namespace

void launch_rope_table(const TableArgs& a) {
  if (a.tokens > 0 && a.plan.pairs > 0) with_recipe(a.recipe, [&](auto tag) { launch_table<decltype(tag)>(a); });
}

void launch_sinusoidal(const SinusoidalArgs& a) {
  if (a.tokens > 0 && a.d_model > 0) with_recipe(a.recipe, [&](auto tag) { launch_sinusoidal_recipe<decltype(tag)>(a); });
}

}  // namespace ropecheck::kernels::cuda_detail
