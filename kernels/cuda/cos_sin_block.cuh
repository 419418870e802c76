// The first phase of every RoPE kernel: cos / sin of a block's tokens x pairs, computed once per
// (token, pair) into shared memory and then shared by every head of q and k (the memory-bound
// second phase reads them from there).
#pragma once

#include <cstdint>
#include <type_traits>

#include "launch.hpp"
#include "recipe_math.cuh"

namespace ropecheck::kernels::cuda_detail {

// cos / sin are held in binary64 by the accurate recipe's f64 path, in f32 otherwise.
template <RC R>
using TabT = typename std::conditional<R == RC::accurate_f64, double, float>::type;

// The position that drives pair j of a token.
__device__ __forceinline__ std::int64_t pair_position(const PlanArgs& pl, const PosArgs& pos, std::int64_t token,
                                                      int j) {
  const int stream = pl.multistream ? pl.stream[j] : 0;
  return load_position(pos, token, stream);
}

// ggml's angles of one token: theta_0 = fl32(p), theta_{j+1} = fl32(theta_j * theta_scale), one
// running value per position stream (ggml_rope_multi keeps t, h and w recurrences side by side);
// pair j takes its stream's theta_j. Written to theta[0 .. pairs).
__device__ __forceinline__ void ggml_angles(const PlanArgs& pl, const PosArgs& pos, std::int64_t token, float* theta) {
  float run[3];
  for (int k = 0; k < 3; ++k) run[k] = __ll2float_rn(load_position(pos, token, pl.multistream ? k : 0));
  for (int j = 0; j < pl.pairs; ++j) {
    theta[j] = run[pl.multistream ? pl.stream[j] : 0];
    for (int k = 0; k < 3; ++k) run[k] = __fmul_rn(run[k], pl.ggml_theta_scale);
  }
}

// cos / sin (in that order of outputs) of pair j at position p, the recipe's way, before the
// attention factor. ggml_theta: ggml's recurrence value for this (token, pair).
template <RC R>
__device__ __forceinline__ void recipe_cos_sin(const PlanArgs& pl, int j, std::int64_t p, float ggml_theta, TabT<R>& c,
                                               TabT<R>& s) {
  if constexpr (R == RC::accurate_f64) {
    const double theta = __dmul_rn(__ll2double_rn(p), pl.inv_f64[j]);
    s = sin(theta);
    c = cos(theta);
  } else if constexpr (R == RC::accurate) {
    accurate_sincos(__dmul_rn(__ll2double_rn(p), pl.inv_f64[j]), s, c);
  } else if constexpr (R == RC::ggml) {
    recipe_sincos_f32<R>(__fdiv_rn(ggml_theta, pl.ggml_div[j]), s, c);
  } else {
    recipe_sincos_f32<R>(__fmul_rn(recipe_position_f32<R>(p), pl.inv_f32[j]), s, c);
  }
}

// Fills sc / ss [nt][pairs] for tokens t0 .. t0 + nt - 1 (callers pass nt <= tokens - t0): the
// attention factor folded in when fold_att (the apply kernels; the tables have none), then the
// rounding to the table dtype td. Ends with __syncthreads().
template <RC R>
__device__ void block_cos_sin(const PlanArgs& pl, const PosArgs& pos, std::int64_t t0, int nt, bool fold_att, DT td,
                              TabT<R>* sc, TabT<R>* ss) {
  const int P = pl.pairs;
  if constexpr (R == RC::ggml) {  // the recurrence is serial over pairs: one thread per token
    for (int ti = threadIdx.x; ti < nt; ti += blockDim.x) ggml_angles(pl, pos, t0 + ti, sc + ti * P);
    __syncthreads();
  }
  for (int i = threadIdx.x; i < nt * P; i += blockDim.x) {
    const int ti = i / P, j = i - ti * P;
    const std::int64_t p = R == RC::ggml ? 0 : pair_position(pl, pos, t0 + ti, j);
    TabT<R> c, s;
    recipe_cos_sin<R>(pl, j, p, R == RC::ggml ? static_cast<float>(sc[i]) : 0.0f, c, s);
    if constexpr (R == RC::accurate_f64) {
      if (fold_att) {
        c = __dmul_rn(c, pl.att_f64);
        s = __dmul_rn(s, pl.att_f64);
      }
    } else {
      if (fold_att) {
        c = __fmul_rn(c, pl.att_f32);
        s = __fmul_rn(s, pl.att_f32);
      }
      c = round_to(c, td);
      s = round_to(s, td);
    }
    sc[i] = c;  // ggml: each thread overwrites only the angle it read
    ss[i] = s;
  }
  __syncthreads();
}

}  // namespace ropecheck::kernels::cuda_detail
