// The first phase of every RoPE kernel: cos / sin of a block's tokens x pairs, computed once per
// (token, pair) into shared memory and then shared by every head of q and k (the memory-bound
// second phase reads them from there).
//
// Kernels are written as phases over (thread index, thread count) with a barrier between phases,
// so that the host emulation (emulation.hpp) runs the same code: the device runs a phase on all
// threads of a block at once, the emulation one thread after the other.
#pragma once

#include <cstdint>
#include <type_traits>

#include "fp.cuh"
#include "launch.hpp"
#include "recipe_math.cuh"

namespace ropecheck::kernels::cuda_detail {

// cos / sin are held in binary64 by the accurate recipe's f64 path, in f32 otherwise.
template <RC R>
using TabT = typename std::conditional<R == RC::accurate_f64, double, float>::type;

// The position that drives pair j of a token.
RC_HD std::int64_t pair_position(const PlanArgs& pl, const PosArgs& pos, std::int64_t token, int j) {
  const int stream = pl.multistream ? pl.stream[j] : 0;
  return load_position(pos, token, stream);
}

// ggml's angles of one token, as the CPU forms them (kernels/src/rows.cpp): theta_0 = fl32(p),
// theta_{j+1} = fl32(theta_j * theta_scale), one running value per position stream (ggml's
// rope_multi keeps t, h and w recurrences side by side); pair j takes its stream's theta_j.
RC_HD void ggml_angles(const PlanArgs& pl, const PosArgs& pos, std::int64_t token, float* theta) {
  float run[3];
  for (int k = 0; k < 3; ++k) run[k] = fp::i64_to_f32(load_position(pos, token, pl.multistream ? k : 0));
  for (int j = 0; j < pl.pairs; ++j) {
    theta[j] = run[pl.multistream ? pl.stream[j] : 0];
    for (int k = 0; k < 3; ++k) run[k] = fp::mul(run[k], pl.ggml_theta_scale);
  }
}

// cos / sin of pair j at position p, the recipe's way, before the attention factor.
// ggml_theta: ggml's recurrence value for this (token, pair).
template <RC R>
RC_HD void recipe_cos_sin(const PlanArgs& pl, int j, std::int64_t p, float ggml_theta, TabT<R>& c, TabT<R>& s) {
  if constexpr (R == RC::accurate_f64) {
    const double theta = fp::mul(fp::i64_to_f64(p), pl.inv_f64[j]);
    s = fp::sin_f64(theta);
    c = fp::cos_f64(theta);
  } else if constexpr (R == RC::accurate) {
    accurate_sincos(fp::mul(fp::i64_to_f64(p), pl.inv_f64[j]), s, c);
  } else if constexpr (R == RC::ggml) {
    recipe_sincos_f32<R>(fp::div(ggml_theta, pl.ggml_div[j]), s, c);
  } else {
    recipe_sincos_f32<R>(fp::mul(recipe_position_f32<R>(p), pl.inv_f32[j]), s, c);
  }
}

// The cos / sin phases for tokens t0 .. t0 + nt - 1 into sc / ss [nt][pairs]. Run
// cos_sin_phase0 (ggml's serial recurrence, one thread per token; nothing for the other recipes),
// a barrier, cos_sin_phase1, a barrier.
template <RC R>
RC_HD void cos_sin_phase0(const PlanArgs& pl, const PosArgs& pos, std::int64_t t0, int nt, TabT<R>* sc, int tid,
                          int nthreads) {
  if constexpr (R == RC::ggml)
    for (int ti = tid; ti < nt; ti += nthreads) ggml_angles(pl, pos, t0 + ti, sc + ti * pl.pairs);
}

// The attention factor folded in when fold_att (the apply kernels; the tables have none), then
// the rounding to the table dtype td (kernels/src/rows.cpp RowEngine::prepare).
template <RC R>
RC_HD void cos_sin_phase1(const PlanArgs& pl, const PosArgs& pos, std::int64_t t0, int nt, bool fold_att, DT td,
                          TabT<R>* sc, TabT<R>* ss, int tid, int nthreads) {
  const int P = pl.pairs;
  for (int i = tid; i < nt * P; i += nthreads) {
    const int ti = i / P, j = i - ti * P;
    const std::int64_t p = R == RC::ggml ? 0 : pair_position(pl, pos, t0 + ti, j);
    TabT<R> c, s;
    recipe_cos_sin<R>(pl, j, p, R == RC::ggml ? static_cast<float>(sc[i]) : 0.0f, c, s);
    if constexpr (R == RC::accurate_f64) {
      if (fold_att) {
        c = fp::mul(c, pl.att_f64);
        s = fp::mul(s, pl.att_f64);
      }
    } else {
      if (fold_att) {
        c = fp::mul(c, pl.att_f32);
        s = fp::mul(s, pl.att_f32);
      }
      c = round_to(c, td);
      s = round_to(s, td);
    }
    sc[i] = c;  // ggml: each thread overwrites only the angle it read
    ss[i] = s;
  }
}

}  // namespace ropecheck::kernels::cuda_detail
