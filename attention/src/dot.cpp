// Compensated dot products of double-double vectors (the fast path's hot loops) and their bound.
//
// The sum of (ah + al)(bh + bl) over n terms, in blocks of b = kDotBlock terms. Within a block
// (Ogita, Rump and Oishi's Dot2, with the cross terms):
//   p = RN(ah bh), pe = fma(ah, bh, -p)          ah bh = p + pe exactly (2Prod)
//   (s, te) = 2Sum(s, p)                          s_old + p = s + te exactly
//   comp = RN(comp + RN(RN(pe + te) + fma(ah, bl, RN(al bh))))
// so the block's exact sum is s + (sum of pe + te + ah bl + al bh) + sum al bl, and s + comp errs by
//   <= gamma(b + 4) T + sum |al bl|,  T = sum (|pe| + |te| + |ah bl| + |al bh|)
// (each of the block's summands passes through at most b + 3 roundings, Higham's recursive summation
// bound). With |pe| <= u |p|, |te| <= u |s_i|, |s_i| <= (1 + gamma(b + 1)) A_b, |al| <= u |ah|,
// |bl| <= u |bh| (normalized DDs) and A_b = sum over the block of |ah bh|:
//   T <= u (b + 3)(1 + gamma(b + 1)) A_b,  block error <= (gamma(b + 4)(b + 3)(1 + gamma(b + 1)) / u + 1) u^2 A_b.
// The block's (s, comp) is made a DD by 2Sum (exactly) and added to the running DD total by
// AccurateDWPlusDW (<= 3u^2 / (1 - 4u) of the exact running total, itself <= 1.0001 A); the first
// addition, onto zero, is exact. For b = 32: <= 1262 u^2 A_b per block and 3.01 u^2 A per later block:
//   |error| <= u^2 A (1262 + 3.02 (blocks - 1)) (1 + 2^-40) + n 2^-1072 (underflowing products)
// (dot_bound). n = 128 gives 2^-95.7 A; the weighted sums of a 2048-key row 2^-95.5 A.
#include <algorithm>
#include <cmath>

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif

#include "engine_impl.hpp"
#include "kernel.hpp"

namespace ropecheck::attention::detail {
namespace {

using dd::two_sum;

#if defined(__GNUC__)
#define ROPECHECK_ATTN_INLINE __attribute__((always_inline)) inline
#else
#define ROPECHECK_ATTN_INLINE inline
#endif

// One step of a block: (s, comp) += (ah + al)(bh + bl).
ROPECHECK_ATTN_INLINE void step(double ah, double al, double bh, double bl, double& s, double& comp) {
  const double p = ah * bh;
  const double pe = std::fma(ah, bh, -p);
  const double sn = s + p;
  const double bb = sn - s;
  const double te = (s - (sn - bb)) + (p - bb);
  s = sn;
  comp = comp + ((pe + te) + std::fma(ah, bl, al * bh));
}

ROPECHECK_ATTN_INLINE DD close_block(DD total, double s, double comp) {
  const DD blk = two_sum(s, comp);
  return dd::add(total, blk);
}

}  // namespace

double dot_bound(std::int64_t n, double A) {
  constexpr double b = kDotBlock;
  static const double per_block = gamma(b + 4) * (b + 3) * (1 + gamma(b + 1)) / kU + 1;
  const double blocks = static_cast<double>((n + kDotBlock - 1) / kDotBlock);
  return kU2 * A * (per_block + 3.02 * std::max(0.0, blocks - 1)) * kUp + static_cast<double>(n) * 0x1p-1072;
}

ROPECHECK_ATTN_KERNEL
DD dot_one(const double* ah, const double* al, const double* bh, const double* bl, int n) {
  DD total{0.0, 0.0};
  for (int start = 0; start < n; start += kDotBlock) {
    const int end = std::min(n, start + kDotBlock);
    double s = 0, comp = 0;
    for (int c = start; c < end; ++c) step(ah[c], al[c], bh[c], bl[c], s, comp);
    total = close_block(total, s, comp);
  }
  return total;
}

KeyPanel make_panel(const RotatedSet& k) {
  KeyPanel p;
  p.keys = static_cast<std::int64_t>(k.norm_hi.size());
  p.D = k.D;
  const std::size_t D = static_cast<std::size_t>(k.D);
  const std::size_t blocks = static_cast<std::size_t>((p.keys + kLanes - 1) / kLanes);
  p.hi.assign(blocks * D * kLanes, 0.0);
  p.lo.assign(blocks * D * kLanes, 0.0);
  for (std::int64_t j = 0; j < p.keys; ++j) {
    const std::size_t base = static_cast<std::size_t>(j / kLanes) * D * kLanes + static_cast<std::size_t>(j % kLanes);
    const double* h = k.h(j, 0);
    const double* l = k.l(j, 0);
    for (std::size_t c = 0; c < D; ++c) {
      p.hi[base + kLanes * c] = h[c];
      p.lo[base + kLanes * c] = l[c];
    }
  }
  return p;
}

namespace {

// kLanes keys at once: the same operations as dot_one, lane by lane (no reassociation, so each lane's
// roundings are dot_one's): the portable loop, and the same in AVX2 + FMA intrinsics where the CPU has
// them (GCC does not vectorize the portable one).
void dots_portable(const double* qh, const double* ql, const KeyPanel& panel, std::int64_t first, std::int64_t count,
                   DD* out) {
  const int D = panel.D;
  const std::int64_t end = first + count;
  for (std::int64_t blk = first / kLanes; blk * kLanes < end; ++blk) {
    const double* kh = panel.hi.data() + static_cast<std::size_t>(blk) * static_cast<std::size_t>(D) * kLanes;
    const double* kl = panel.lo.data() + static_cast<std::size_t>(blk) * static_cast<std::size_t>(D) * kLanes;
    double th[kLanes] = {}, tl[kLanes] = {};
    for (int start = 0; start < D; start += kDotBlock) {
      const int stop = std::min(D, start + kDotBlock);
      double s[kLanes] = {}, comp[kLanes] = {};
      for (int c = start; c < stop; ++c) {
        const double a = qh[c], al = ql[c];
        for (int lane = 0; lane < kLanes; ++lane)
          step(a, al, kh[kLanes * c + lane], kl[kLanes * c + lane], s[lane], comp[lane]);
      }
      for (int lane = 0; lane < kLanes; ++lane) {
        const DD t = close_block({th[lane], tl[lane]}, s[lane], comp[lane]);
        th[lane] = t.hi;
        tl[lane] = t.lo;
      }
    }
    for (int lane = 0; lane < kLanes; ++lane) {
      const std::int64_t j = blk * kLanes + lane;
      if (j >= first && j < end) out[j - first] = {th[lane], tl[lane]};
    }
  }
}

#if defined(__GNUC__) && defined(__x86_64__)
#define ROPECHECK_ATTN_AVX2 1
using V = __m256d;
#define ROPECHECK_AVX2_FN __attribute__((target("avx2,fma"), always_inline)) inline

ROPECHECK_AVX2_FN void step_v(V a, V al, V bh, V bl, V& s, V& comp) {
  const V p = _mm256_mul_pd(a, bh);
  const V pe = _mm256_fmsub_pd(a, bh, p);
  const V sn = _mm256_add_pd(s, p);
  const V bb = _mm256_sub_pd(sn, s);
  const V te = _mm256_add_pd(_mm256_sub_pd(s, _mm256_sub_pd(sn, bb)), _mm256_sub_pd(p, bb));
  s = sn;
  comp = _mm256_add_pd(comp, _mm256_add_pd(_mm256_add_pd(pe, te), _mm256_fmadd_pd(a, bl, _mm256_mul_pd(al, bh))));
}

// close_block lane by lane: 2Sum, then AccurateDWPlusDW (reference/double_double.hpp), in vectors.
ROPECHECK_AVX2_FN void two_sum_v(V a, V b, V& s, V& e) {
  s = _mm256_add_pd(a, b);
  const V bb = _mm256_sub_pd(s, a);
  e = _mm256_add_pd(_mm256_sub_pd(a, _mm256_sub_pd(s, bb)), _mm256_sub_pd(b, bb));
}
ROPECHECK_AVX2_FN void fast_two_sum_v(V a, V b, V& s, V& e) {
  s = _mm256_add_pd(a, b);
  e = _mm256_sub_pd(b, _mm256_sub_pd(s, a));
}
ROPECHECK_AVX2_FN void close_block_v(V& th, V& tl, V s, V comp) {
  V bh, bl, sh, sl, uh, ul, vh, vl;
  two_sum_v(s, comp, bh, bl);
  two_sum_v(th, bh, sh, sl);
  two_sum_v(tl, bl, uh, ul);
  const V c = _mm256_add_pd(sl, uh);
  fast_two_sum_v(sh, c, vh, vl);
  const V w = _mm256_add_pd(ul, vl);
  fast_two_sum_v(vh, w, th, tl);
}

__attribute__((target("avx2,fma"))) void dots_avx2(const double* qh, const double* ql, const KeyPanel& panel,
                                                   std::int64_t first, std::int64_t count, DD* out) {
  static_assert(kLanes == 8, "two vectors of four lanes");
  const int D = panel.D;
  const std::int64_t end = first + count;
  for (std::int64_t blk = first / kLanes; blk * kLanes < end; ++blk) {
    const double* kh = panel.hi.data() + static_cast<std::size_t>(blk) * static_cast<std::size_t>(D) * kLanes;
    const double* kl = panel.lo.data() + static_cast<std::size_t>(blk) * static_cast<std::size_t>(D) * kLanes;
    V th0 = _mm256_setzero_pd(), tl0 = th0, th1 = th0, tl1 = th0;
    for (int start = 0; start < D; start += kDotBlock) {
      const int stop = std::min(D, start + kDotBlock);
      V s0 = _mm256_setzero_pd(), c0 = s0, s1 = s0, c1 = s0;
      for (int c = start; c < stop; ++c) {
        const V a = _mm256_set1_pd(qh[c]), al = _mm256_set1_pd(ql[c]);
        const double* h = kh + kLanes * c;
        const double* l = kl + kLanes * c;
        step_v(a, al, _mm256_loadu_pd(h), _mm256_loadu_pd(l), s0, c0);
        step_v(a, al, _mm256_loadu_pd(h + 4), _mm256_loadu_pd(l + 4), s1, c1);
      }
      close_block_v(th0, tl0, s0, c0);
      close_block_v(th1, tl1, s1, c1);
    }
    alignas(32) double hi[kLanes], lo[kLanes];
    _mm256_store_pd(hi, th0);
    _mm256_store_pd(hi + 4, th1);
    _mm256_store_pd(lo, tl0);
    _mm256_store_pd(lo + 4, tl1);
    for (int lane = 0; lane < kLanes; ++lane) {
      const std::int64_t j = blk * kLanes + lane;
      if (j >= first && j < end) out[j - first] = {hi[lane], lo[lane]};
    }
  }
}
#endif

}  // namespace

void dots(const double* qh, const double* ql, const KeyPanel& panel, std::int64_t first, std::int64_t count, DD* out) {
#if ROPECHECK_ATTN_AVX2
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (avx2) return dots_avx2(qh, ql, panel, first, count, out);
#endif
  dots_portable(qh, ql, panel, first, count, out);
}

ROPECHECK_ATTN_KERNEL
void weighted_sums(const DD* e, const double* v, std::int64_t stride, std::int64_t count, int dv, DD* acc,
                   double* s, double* comp) {
  for (int c = 0; c < dv; ++c) acc[c] = {0.0, 0.0};
  for (std::int64_t start = 0; start < count; start += kDotBlock) {
    const std::int64_t stop = std::min(count, start + kDotBlock);
    for (int c = 0; c < dv; ++c) s[c] = comp[c] = 0.0;
    for (std::int64_t j = start; j < stop; ++j) {
      const double eh = e[j].hi, el = e[j].lo;
      const double* vj = v + j * stride;
      for (int c = 0; c < dv; ++c) step(eh, el, vj[c], 0.0, s[c], comp[c]);
    }
    for (int c = 0; c < dv; ++c) acc[c] = close_block(acc[c], s[c], comp[c]);
  }
}

}  // namespace ropecheck::attention::detail
