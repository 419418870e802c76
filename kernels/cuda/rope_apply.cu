// cuda_rope_apply's kernels. One block per chunk of tokens: phases 0 and 1 compute cos / sin of the
// chunk's (token, pair)s once into shared memory (cos_sin_block.cuh), phase 2 streams every head row
// of q and k through the rotation. Two variants of phase 2:
//   fast    same dtype in and out (f32, f16, bf16), unit stride along head_dim, rows 16-byte
//           aligned: one 16-byte load and store per 4 (f32) or 8 (f16 / bf16) channels;
//   generic any dtypes, any strides: one pair (or pass-through channel) at a time.
// Both compute the same values (the tests compare them through strided views).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "cos_sin_block.cuh"
#include "exec.cuh"
#include "fp.cuh"
#include "launch.hpp"
#include "recipe_math.cuh"
#include "rotate.cuh"

namespace ropecheck::kernels::cuda_detail {
namespace {

// Input bytes per block the chunking aims at (32 KiB: eight 16-byte loads per thread of 256): enough
// work per block to hide its cos / sin phase behind the other resident blocks' streaming, few
// enough tokens per block that the grid fills every SM many times.
constexpr std::int64_t kBytesPerBlock = 32768;
constexpr int kMaxTokensPerBlock = 64;
constexpr std::size_t kMaxSharedBytes = 48 * 1024;

// The table dtype the fast path is instantiated with; the host's table_dtype() (recipe.hpp) must
// agree (launch_fast checks).
template <RC R, DT S>
RC_HD constexpr DT fast_table_dt() {
  if constexpr (R == RC::hf) return S;
  else if constexpr (R == RC::bf16_table) return DT::bf16;
  else if constexpr (R == RC::f16_table) return DT::f16;
  else return DT::f32;
}

template <DT S>
RC_HD constexpr int vec_elems() {
  return S == DT::f32 ? 4 : 8;  // 16 bytes
}

template <DT S>
RC_HD void unpack(const uint4& r, float (&x)[vec_elems<S>()]) {
  const std::uint32_t w[4] = {r.x, r.y, r.z, r.w};
RC_UNROLL
  for (int i = 0; i < 4; ++i) {
    if constexpr (S == DT::f32) {
      x[i] = fp::from_bits(w[i]);
    } else {
      const auto lo = static_cast<std::uint16_t>(w[i] & 0xFFFFu), hi = static_cast<std::uint16_t>(w[i] >> 16);
      x[2 * i] = S == DT::bf16 ? bf16_bits_to_f32(lo) : f16_bits_to_f32(lo);
      x[2 * i + 1] = S == DT::bf16 ? bf16_bits_to_f32(hi) : f16_bits_to_f32(hi);
    }
  }
}

template <DT S>
RC_HD uint4 pack(const float (&y)[vec_elems<S>()]) {
  std::uint32_t w[4];
RC_UNROLL
  for (int i = 0; i < 4; ++i) {
    if constexpr (S == DT::f32) {
      w[i] = fp::bits(y[i]);
    } else {
      const std::uint32_t lo = S == DT::bf16 ? f32_to_bf16_bits(y[2 * i]) : f32_to_f16_bits(y[2 * i]);
      const std::uint32_t hi = S == DT::bf16 ? f32_to_bf16_bits(y[2 * i + 1]) : f32_to_f16_bits(y[2 * i + 1]);
      w[i] = lo | (hi << 16);
    }
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// Tokens [t0, t0 + nt) of a block.
RC_HD std::int64_t first_token(unsigned block, int tokens_per_block) {
  return static_cast<std::int64_t>(block) * tokens_per_block;
}
RC_HD int token_count(std::int64_t tokens, std::int64_t t0, int tokens_per_block) {
  const std::int64_t left = tokens - t0;
  return static_cast<int>(left < tokens_per_block ? left : tokens_per_block);
}

// Block-local head row `row` of token `token`: rows [0, heads_q) are q's heads, the rest k's.
struct RowRef {
  const unsigned char* in;
  unsigned char* out;
};
template <std::int64_t Size>
RC_HD RowRef row_ref(const ApplyArgs& a, std::int64_t token, std::int64_t row) {
  const bool is_k = row >= a.t[0].heads;
  const TensorArgs& t = is_k ? a.t[1] : a.t[0];
  const std::int64_t h = is_k ? row - a.t[0].heads : row;
  return {static_cast<const unsigned char*>(t.in) + (token * t.in_tok + h * t.in_head) * Size,
          static_cast<unsigned char*>(t.out) + (token * t.out_tok + h * t.out_head) * Size};
}

struct FastArgs {
  ApplyArgs a;
  int tokens_per_block, units_rot, units_row;
};

// Fast path: S in and out, unit stride, 16-byte aligned rows (the rotary block's offset a multiple of
// the vector). units_rot rotation units per row
// (half-split: pairs / V, each the V-channel vectors at j and j + pairs; interleaved: 2 pairs / V,
// each V / 2 adjacent pairs), then the pass-through vectors up to units_row.
template <class Tag, DT S>
struct FastKernel {
  using Args = FastArgs;
  static constexpr RC R = Tag::id;
  static constexpr int V = vec_elems<S>();
  static constexpr DT M = fast_table_dt<R, S>();
  static constexpr std::int64_t kSize = S == DT::f32 ? 4 : 2;

  RC_HD static void phase0(const Args& f, unsigned b, int tid, int n, unsigned char* smem) {
    const std::int64_t t0 = first_token(b, f.tokens_per_block);
    cos_sin_phase0<R>(f.a.plan, f.a.pos, t0, token_count(f.a.tokens, t0, f.tokens_per_block),
                      reinterpret_cast<float*>(smem), tid, n);
  }
  RC_HD static void phase1(const Args& f, unsigned b, int tid, int n, unsigned char* smem) {
    const std::int64_t t0 = first_token(b, f.tokens_per_block);
    float* sc = reinterpret_cast<float*>(smem);
    cos_sin_phase1<R>(f.a.plan, f.a.pos, t0, token_count(f.a.tokens, t0, f.tokens_per_block), true, M, sc,
                      sc + f.tokens_per_block * f.a.plan.pairs, tid, n);
  }
  RC_HD static void unit(const Args& f, std::int64_t t0, const float* sc, const float* ss, int ti, int h, int u) {
    const ApplyArgs& a = f.a;
    const int P = a.plan.pairs;
    const RowRef r = row_ref<kSize>(a, t0 + ti, h);
    const int o = a.plan.rotary_offset;  // the rotary block's first channel (MLA: 128)
    const float* c = sc + ti * P;
    const float* s = ss + ti * P;
    if (u < f.units_rot) {
      if (!a.plan.interleaved) {
        const int j0 = u * V;
        const uint4 ra = *reinterpret_cast<const uint4*>(r.in + (o + j0) * kSize);
        const uint4 rb = *reinterpret_cast<const uint4*>(r.in + (o + j0 + P) * kSize);
        float xa[V], xb[V], ya[V], yb[V];
        unpack<S>(ra, xa);
        unpack<S>(rb, xb);
RC_UNROLL
        for (int e = 0; e < V; ++e)
          rotate_pair<M>(round_to<M>(xa[e]), round_to<M>(xb[e]), c[j0 + e], s[j0 + e], ya[e], yb[e]);
        *reinterpret_cast<uint4*>(r.out + (o + j0) * kSize) = pack<S>(ya);
        *reinterpret_cast<uint4*>(r.out + (o + j0 + P) * kSize) = pack<S>(yb);
      } else {
        const int ch0 = o + u * V, j0 = u * V / 2;
        const uint4 rx = *reinterpret_cast<const uint4*>(r.in + ch0 * kSize);
        float x[V], y[V];
        unpack<S>(rx, x);
RC_UNROLL
        for (int e = 0; e < V / 2; ++e)
          rotate_pair<M>(round_to<M>(x[2 * e]), round_to<M>(x[2 * e + 1]), c[j0 + e], s[j0 + e], y[2 * e],
                         y[2 * e + 1]);
        *reinterpret_cast<uint4*>(r.out + ch0 * kSize) = pack<S>(y);
      }
    } else {  // pass-through channels (before the block, then after it): same dtype, a plain copy
      int ch0 = (u - f.units_rot) * V;
      if (ch0 >= o) ch0 += 2 * P;
      *reinterpret_cast<uint4*>(r.out + ch0 * kSize) = *reinterpret_cast<const uint4*>(r.in + ch0 * kSize);
    }
  }
  RC_HD static void phase2(const Args& f, unsigned b, int tid, int n, unsigned char* smem) {
    const std::int64_t t0 = first_token(b, f.tokens_per_block);
    const int nt = token_count(f.a.tokens, t0, f.tokens_per_block);
    const float* sc = reinterpret_cast<const float*>(smem);
    const float* ss = sc + f.tokens_per_block * f.a.plan.pairs;
    const int rows_per_token = static_cast<int>(f.a.t[0].heads + (f.a.ntensors > 1 ? f.a.t[1].heads : 0));
    const int units_row = f.units_row;
    // Consecutive threads take consecutive units of a row (coalesced). When the thread count is a
    // multiple of the units per row (the usual case: 8, 16 or 32), each thread keeps its unit and
    // walks the rows without a division per step.
    if (n % units_row == 0) {
      const int u = tid % units_row, step = n / units_row, row0 = tid / units_row;
      int ti = row0 / rows_per_token, h = row0 - ti * rows_per_token;
      while (ti < nt) {
        unit(f, t0, sc, ss, ti, h, u);
        h += step;
        while (h >= rows_per_token) {
          h -= rows_per_token;
          ++ti;
        }
      }
    } else {
      const int items = nt * rows_per_token * units_row;
      for (int i = tid; i < items; i += n) {
        const int row = i / units_row, ti = row / rows_per_token;
        unit(f, t0, sc, ss, ti, row - ti * rows_per_token, i - row * units_row);
      }
    }
  }
};

struct GenericArgs {
  ApplyArgs a;
  int tokens_per_block;
};

// Generic path: any dtypes (per tensor, in and out), any element strides. units_row = pairs +
// pass-through channels; unit u < pairs rotates pair u, the rest copy one channel each.
template <class Tag>
struct GenericKernel {
  using Args = GenericArgs;
  static constexpr RC R = Tag::id;
  using Tab = TabT<R>;

  RC_HD static void phase0(const Args& g, unsigned b, int tid, int n, unsigned char* smem) {
    const std::int64_t t0 = first_token(b, g.tokens_per_block);
    cos_sin_phase0<R>(g.a.plan, g.a.pos, t0, token_count(g.a.tokens, t0, g.tokens_per_block),
                      reinterpret_cast<Tab*>(smem), tid, n);
  }
  RC_HD static void phase1(const Args& g, unsigned b, int tid, int n, unsigned char* smem) {
    const std::int64_t t0 = first_token(b, g.tokens_per_block);
    Tab* sc = reinterpret_cast<Tab*>(smem);
    cos_sin_phase1<R>(g.a.plan, g.a.pos, t0, token_count(g.a.tokens, t0, g.tokens_per_block), true, g.a.table_dt,
                      sc, sc + g.tokens_per_block * g.a.plan.pairs, tid, n);
  }
  RC_HD static void phase2(const Args& g, unsigned b, int tid, int n, unsigned char* smem) {
    const ApplyArgs& a = g.a;
    const std::int64_t t0 = first_token(b, g.tokens_per_block);
    const int nt = token_count(a.tokens, t0, g.tokens_per_block);
    const Tab* sc = reinterpret_cast<const Tab*>(smem);
    const Tab* ss = sc + g.tokens_per_block * a.plan.pairs;
    const int P = a.plan.pairs, D = a.plan.head_dim;
    const int units_row = P + (D - 2 * P);
    const int rows_per_token = static_cast<int>(a.t[0].heads + (a.ntensors > 1 ? a.t[1].heads : 0));
    const int items = nt * rows_per_token * units_row;
    for (int i = tid; i < items; i += n) {
      const int row = i / units_row, u = i - row * units_row;
      const int ti = row / rows_per_token;
      const std::int64_t hrow = row - ti * rows_per_token;
      const bool is_k = hrow >= a.t[0].heads;
      const TensorArgs& t = is_k ? a.t[1] : a.t[0];
      const std::int64_t h = is_k ? hrow - a.t[0].heads : hrow, token = t0 + ti;
      const std::int64_t ib = token * t.in_tok + h * t.in_head, ob = token * t.out_tok + h * t.out_head;
      const int o = a.plan.rotary_offset;
      if (u >= P) {  // pass-through channel u - P: before the rotary block, or after it
        const std::int64_t ch = u - P < o ? u - P : P + u;
        copy_converted(t.in, ib + ch * t.in_dim, t.in_dt, t.out, ob + ch * t.out_dim, t.out_dt);
        continue;
      }
      const std::int64_t ca = o + (a.plan.interleaved ? 2 * u : u), cb = o + (a.plan.interleaved ? 2 * u + 1 : u + P);
      const Tab c = sc[ti * P + u], s = ss[ti * P + u];
      if (a.table_dt == DT::f64) {
        double ya, yb;
        rotate_pair_f64(load_as_double(t.in, ib + ca * t.in_dim, t.in_dt),
                        load_as_double(t.in, ib + cb * t.in_dim, t.in_dt), static_cast<double>(c),
                        static_cast<double>(s), ya, yb);
        store_double(t.out, ob + ca * t.out_dim, t.out_dt, ya);
        store_double(t.out, ob + cb * t.out_dim, t.out_dt, yb);
      } else {
        float ya, yb;
        rotate_pair(load_on_grid(t.in, ib + ca * t.in_dim, t.in_dt, a.table_dt),
                    load_on_grid(t.in, ib + cb * t.in_dim, t.in_dt, a.table_dt), static_cast<float>(c),
                    static_cast<float>(s), ya, yb, a.table_dt);
        store_float(t.out, ob + ca * t.out_dim, t.out_dt, ya);
        store_float(t.out, ob + cb * t.out_dim, t.out_dt, yb);
      }
    }
  }
};

// ---- host side -----------------------------------------------------------------------------------

std::int64_t dt_size(DT t) { return t == DT::f64 ? 8 : (t == DT::f32 ? 4 : 2); }

bool aligned16(const void* p, std::int64_t stride_a, std::int64_t stride_b, std::int64_t size) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0 && (stride_a * size) % 16 == 0 && (stride_b * size) % 16 == 0;
}

// Fast-path eligibility of every tensor of the call; V channels per 16-byte unit.
bool fast_eligible(const ApplyArgs& a, DT s) {
  if (s == DT::f64) return false;
  const std::int64_t V = 16 / dt_size(s), P = a.plan.pairs, D = a.plan.head_dim;
  if ((a.plan.interleaved ? 2 * P : P) % V != 0 || (D - 2 * P) % V != 0 || a.plan.rotary_offset % V != 0) return false;
  for (int k = 0; k < a.ntensors; ++k) {
    const TensorArgs& t = a.t[k];
    if (t.in_dt != s || t.out_dt != s || t.in_dim != 1 || t.out_dim != 1) return false;
    if (!aligned16(t.in, t.in_tok, t.in_head, dt_size(s)) || !aligned16(t.out, t.out_tok, t.out_head, dt_size(s)))
      return false;
  }
  return true;
}

struct Chunking {
  int tokens_per_block;
  std::size_t shared_bytes;
  unsigned blocks;
};

Chunking chunk(const ApplyArgs& a, std::size_t tab_size) {
  const std::int64_t rows = a.t[0].heads + (a.ntensors > 1 ? a.t[1].heads : 0);
  const std::int64_t per_token = std::max<std::int64_t>(1, rows * a.plan.head_dim * dt_size(a.t[0].in_dt));
  const std::size_t per_token_shared = 2 * tab_size * static_cast<std::size_t>(a.plan.pairs);
  std::int64_t tpb = std::clamp<std::int64_t>(kBytesPerBlock / per_token, 1, kMaxTokensPerBlock);
  tpb = std::min<std::int64_t>(tpb, static_cast<std::int64_t>(kMaxSharedBytes / std::max<std::size_t>(per_token_shared, 1)));
  if (tpb < 1)
    throw std::invalid_argument("ropecheck::kernels (CUDA): head_dim " + std::to_string(a.plan.head_dim) +
                                " needs more shared memory for one token's cos / sin than a block has");
  // Items per block (tokens x rows x units) are counted in int.
  if (tpb * rows * a.plan.head_dim > (std::int64_t{1} << 30))
    throw std::invalid_argument("ropecheck::kernels (CUDA): heads x head_dim of one token is too large");
  const std::int64_t blocks = (a.tokens + tpb - 1) / tpb;
  if (blocks > 0x7FFFFFFF) throw std::invalid_argument("ropecheck::kernels (CUDA): too many tokens for one launch");
  return {static_cast<int>(tpb), per_token_shared * static_cast<std::size_t>(tpb), static_cast<unsigned>(blocks)};
}

template <class Tag, DT S>
void launch_fast(const ApplyArgs& a) {
  if (a.table_dt != fast_table_dt<Tag::id, S>())
    throw std::logic_error("ropecheck::kernels (CUDA): table dtype of the host and of the fast kernel disagree");
  const Chunking ch = chunk(a, sizeof(float));
  const int V = vec_elems<S>(), P = a.plan.pairs, D = a.plan.head_dim;
  const int units_rot = (a.plan.interleaved ? 2 * P : P) / V;
  run<FastKernel<Tag, S>>(FastArgs{a, ch.tokens_per_block, units_rot, units_rot + (D - 2 * P) / V}, ch.blocks,
                          ch.shared_bytes, a.stream, a.emulate, "launching the RoPE kernel (fast path)");
}

template <class Tag>
void launch_recipe(const ApplyArgs& a) {
  if constexpr (Tag::id != RC::accurate_f64) {
    const DT s = a.t[0].in_dt;
    if (fast_eligible(a, s)) {
      switch (s) {
        case DT::f32: return launch_fast<Tag, DT::f32>(a);
        case DT::bf16: return launch_fast<Tag, DT::bf16>(a);
        case DT::f16: return launch_fast<Tag, DT::f16>(a);
        case DT::f64: break;
      }
    }
  }
  const Chunking ch = chunk(a, sizeof(TabT<Tag::id>));
  run<GenericKernel<Tag>>(GenericArgs{a, ch.tokens_per_block}, ch.blocks, ch.shared_bytes, a.stream, a.emulate,
                          "launching the RoPE kernel (generic path)");
}

}  // namespace

void launch_rope_apply(const ApplyArgs& a) {
  if (a.tokens == 0) return;
  with_recipe(a.recipe, [&](auto tag) { launch_recipe<decltype(tag)>(a); });
}

}  // namespace ropecheck::kernels::cuda_detail
