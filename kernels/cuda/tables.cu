// cuda_rope_cos_sin_table and cuda_sinusoidal_table: the recipes' cos / sin written out as tables.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "cos_sin_block.cuh"
#include "exec.cuh"
#include "fp.cuh"
#include "launch.hpp"
#include "recipe_math.cuh"
#include "rotate.cuh"

namespace ropecheck::kernels::cuda_detail {
namespace {

constexpr std::size_t kMaxSharedBytes = 48 * 1024;

// ---- RoPE cos / sin tables [tokens][pairs] -----------------------------------------------------------

struct TableLaunch {
  TableArgs a;
  int tokens_per_block;
};

template <class Tag>
struct TableKernel {
  using Args = TableLaunch;
  static constexpr RC R = Tag::id;
  using Tab = TabT<R>;

  RC_HD static std::int64_t t0(const Args& l, unsigned b) { return static_cast<std::int64_t>(b) * l.tokens_per_block; }
  RC_HD static int nt(const Args& l, unsigned b) {
    const std::int64_t left = l.a.tokens - t0(l, b);
    return static_cast<int>(left < l.tokens_per_block ? left : l.tokens_per_block);
  }
  RC_HD static void phase0(const Args& l, unsigned b, int tid, int n, unsigned char* smem) {
    cos_sin_phase0<R>(l.a.plan, l.a.pos, t0(l, b), nt(l, b), reinterpret_cast<Tab*>(smem), tid, n);
  }
  RC_HD static void phase1(const Args& l, unsigned b, int tid, int n, unsigned char* smem) {
    Tab* sc = reinterpret_cast<Tab*>(smem);
    cos_sin_phase1<R>(l.a.plan, l.a.pos, t0(l, b), nt(l, b), false, l.a.table_dt, sc,
                      sc + l.tokens_per_block * l.a.plan.pairs, tid, n);
  }
  RC_HD static void phase2(const Args& l, unsigned b, int tid, int n, unsigned char* smem) {
    const Tab* sc = reinterpret_cast<const Tab*>(smem);
    const Tab* ss = sc + l.tokens_per_block * l.a.plan.pairs;
    const std::int64_t base = t0(l, b) * l.a.plan.pairs;
    for (int i = tid; i < nt(l, b) * l.a.plan.pairs; i += n) {  // consecutive threads, consecutive elements
      if constexpr (R == RC::accurate_f64) {
        store_double(l.a.cos_out, base + i, l.a.out_dt, sc[i]);
        store_double(l.a.sin_out, base + i, l.a.out_dt, ss[i]);
      } else {
        store_float(l.a.cos_out, base + i, l.a.out_dt, sc[i]);
        store_float(l.a.sin_out, base + i, l.a.out_dt, ss[i]);
      }
    }
  }
};

template <class Tag>
void launch_table(const TableArgs& a) {
  const std::size_t per_token = 2 * sizeof(TabT<Tag::id>) * static_cast<std::size_t>(std::max(a.plan.pairs, 1));
  std::int64_t tpb = std::clamp<std::int64_t>(4096 / std::max(a.plan.pairs, 1), 1, 64);
  tpb = std::min<std::int64_t>(tpb, static_cast<std::int64_t>(kMaxSharedBytes / per_token));
  if (tpb < 1) throw std::invalid_argument("ropecheck::kernels (CUDA): too many pairs for one block's shared memory");
  const std::int64_t blocks = (a.tokens + tpb - 1) / tpb;
  if (blocks > 0x7FFFFFFF) throw std::invalid_argument("ropecheck::kernels (CUDA): too many tokens for one launch");
  run<TableKernel<Tag>>(TableLaunch{a, static_cast<int>(tpb)}, static_cast<unsigned>(blocks),
                        per_token * static_cast<std::size_t>(tpb), a.stream, a.emulate,
                        "launching the cos / sin table kernel");
}

// ---- sinusoidal rows [tokens][d_model] ------------------------------------------------------------

template <class Tag>
struct SinusoidalKernel {
  using Args = SinusoidalArgs;
  static constexpr RC R = Tag::id;
  static constexpr int kElementsPerBlock = 4096;

  RC_HD static void phase0(const Args&, unsigned, int, int, unsigned char*) {}
  RC_HD static void phase1(const Args&, unsigned, int, int, unsigned char*) {}

  // Element o = (token, col) at position p (already offset), the recipe's way (kernels/src
  // rope_kernels.cpp sinusoidal_table).
  RC_HD static void element(const Args& a, std::int64_t p, int col, std::int64_t o) {
    const std::int32_t desc = a.columns[col];
    const int kind = desc >> 24, f = desc & 0xFFFFFF;
    if (kind == 0) {
      store_float(a.out, o, a.out_dt, 0.0f);
      return;
    }
    if constexpr (R == RC::accurate_f64) {
      const double theta = fp::mul(fp::i64_to_f64(p), a.w_f64[f]);
      store_double(a.out, o, a.out_dt, kind == 1 ? fp::sin_f64(theta) : fp::cos_f64(theta));
    } else {
      float s, c;
      if constexpr (R == RC::accurate)
        accurate_sincos(fp::mul(fp::i64_to_f64(p), a.w_f64[f]), s, c);
      else
        recipe_sincos_f32<R>(fp::mul(recipe_position_f32<R>(p), a.w_f32[f]), s, c);
      store_float(a.out, o, a.out_dt, round_to(kind == 1 ? s : c, a.table_dt));
    }
  }
  RC_HD static void phase2(const Args& a, unsigned b, int tid, int n, unsigned char*) {
    const std::int64_t total = a.tokens * a.d_model, first = static_cast<std::int64_t>(b) * kElementsPerBlock;
    const std::int64_t last = first + kElementsPerBlock < total ? first + kElementsPerBlock : total;
    for (std::int64_t i = first + tid; i < last; i += n) {
      const std::int64_t t = i / a.d_model;
      element(a, load_position(a.pos, t, 0) + a.position_offset, static_cast<int>(i - t * a.d_model), i);
    }
  }
};

template <class Tag>
void launch_sinusoidal_recipe(const SinusoidalArgs& a) {
  const std::int64_t n = a.tokens * a.d_model;
  const std::int64_t blocks = (n + SinusoidalKernel<Tag>::kElementsPerBlock - 1) / SinusoidalKernel<Tag>::kElementsPerBlock;
  if (blocks > 0x7FFFFFFF) throw std::invalid_argument("ropecheck::kernels (CUDA): sinusoidal table too large");
  run<SinusoidalKernel<Tag>>(a, static_cast<unsigned>(blocks), 0, a.stream, a.emulate,
                             "launching the sinusoidal table kernel");
}

}  // namespace

void launch_rope_table(const TableArgs& a) {
  if (a.tokens > 0 && a.plan.pairs > 0)
    with_recipe(a.recipe, [&](auto tag) { launch_table<decltype(tag)>(a); });
}

void launch_sinusoidal(const SinusoidalArgs& a) {
  if (a.tokens > 0 && a.d_model > 0)
    with_recipe(a.recipe, [&](auto tag) { launch_sinusoidal_recipe<decltype(tag)>(a); });
}

}  // namespace ropecheck::kernels::cuda_detail
