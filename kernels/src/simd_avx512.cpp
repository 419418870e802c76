// The AVX-512 backend (kernel_detail.hpp): 16 lanes of the portable backend's arithmetic, operation for
// operation (bit-identical results; kernels/CMakeLists.txt compiles this file alone with -mavx512f
// -mavx512bw -mavx512vl -mavx512dq, and dispatch.cpp calls it only where the CPU has those).
//
// Self-contained on purpose: no inline function or template shared with a portable unit is instantiated
// here (the ODR note in kernel_detail.hpp); `nm -C` of this object shows only the functions defined below.
// GCC bug 105593, not ours: -Wmaybe-uninitialized on the _mm512_undefined_*() merge source of unmasked intrinsics.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#include <cstdint>

#include "kernel_detail.hpp"

namespace ropecheck::kernels::detail {

namespace {

constexpr int kRne = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

__mmask16 tail_mask16(std::int64_t left) {
  return left >= 16 ? __mmask16(0xFFFF) : (left <= 0 ? __mmask16(0) : __mmask16((1u << left) - 1u));
}
__mmask8 tail_mask8(std::int64_t left) {
  return left >= 8 ? __mmask8(0xFF) : (left <= 0 ? __mmask8(0) : __mmask8((1u << left) - 1u));
}

__m512 neg_where(__mmask16 m, __m512 v) {
  return _mm512_castsi512_ps(
      _mm512_mask_xor_epi32(_mm512_castps_si512(v), m, _mm512_castps_si512(v), _mm512_set1_epi32(INT32_MIN)));
}

// (sin, cos) of r + q pi/2 from ps = sin r, pc = cos r: as portable.cpp's quadrant().
void quadrant(__m512i q, __m512 ps, __m512 pc, __m512* s, __m512* c) {
  const __mmask16 swap = _mm512_test_epi32_mask(q, _mm512_set1_epi32(1));
  const __mmask16 sneg = _mm512_test_epi32_mask(q, _mm512_set1_epi32(2));
  const __mmask16 cneg = _mm512_test_epi32_mask(_mm512_add_epi32(q, _mm512_set1_epi32(1)), _mm512_set1_epi32(2));
  *s = neg_where(sneg, _mm512_mask_blend_ps(swap, ps, pc));
  *c = neg_where(cneg, _mm512_mask_blend_ps(swap, pc, ps));
}

// Half of the reduction: 8 binary64 angles -> 8 f32 reduced arguments, their quadrants, and the lanes
// out of the reduction's range (|theta| > 2^28, inf, NaN).
void reduce8(__m512d t, __m256* r32, __m256i* q, __mmask8* bad) {
  const __m512d abs = _mm512_castsi512_pd(
      _mm512_and_si512(_mm512_castpd_si512(t), _mm512_set1_epi64(0x7FFFFFFFFFFFFFFFLL)));
  *bad = _mm512_cmp_pd_mask(abs, _mm512_set1_pd(kReduceLimit), _CMP_NLE_UQ);
  const __m512d k = _mm512_roundscale_pd(_mm512_mul_pd(t, _mm512_set1_pd(kTwoOverPi)), kRne);
  __m512d r = _mm512_sub_pd(t, _mm512_mul_pd(k, _mm512_set1_pd(kPio2_1)));
  r = _mm512_sub_pd(r, _mm512_mul_pd(k, _mm512_set1_pd(kPio2_2)));
  r = _mm512_sub_pd(r, _mm512_mul_pd(k, _mm512_set1_pd(kPio2_3)));
  *r32 = _mm512_cvtpd_ps(r);
  *q = _mm512_cvtepi64_epi32(_mm512_cvtpd_epi64(k));
}

// 16 angles from theta[0 .. left): sin / cos stored, the out-of-range lanes returned (for the slow path).
[[gnu::always_inline]] inline unsigned sincos16(const double* theta, std::int64_t left, float* s, float* c) {
  const __mmask8 m0 = tail_mask8(left), m1 = tail_mask8(left - 8);
  __m256 r0, r1;
  __m256i q0, q1;
  __mmask8 b0, b1;
  reduce8(_mm512_maskz_loadu_pd(m0, theta), &r0, &q0, &b0);
  reduce8(_mm512_maskz_loadu_pd(m1, theta + 8), &r1, &q1, &b1);
  const __m512 x = _mm512_insertf32x8(_mm512_castps256_ps512(r0), r1, 1);
  const __m512i q = _mm512_inserti32x8(_mm512_castsi256_si512(q0), q1, 1);
  const __m512 z = _mm512_mul_ps(x, x);
  __m512 ps = _mm512_mul_ps(_mm512_set1_ps(kS3), z);
  ps = _mm512_add_ps(ps, _mm512_set1_ps(kS2));
  ps = _mm512_mul_ps(ps, z);
  ps = _mm512_add_ps(ps, _mm512_set1_ps(kS1));
  ps = _mm512_mul_ps(ps, z);
  ps = _mm512_mul_ps(ps, x);
  ps = _mm512_add_ps(ps, x);
  __m512 pc = _mm512_mul_ps(_mm512_set1_ps(kC3), z);
  pc = _mm512_add_ps(pc, _mm512_set1_ps(kC2));
  pc = _mm512_mul_ps(pc, z);
  pc = _mm512_add_ps(pc, _mm512_set1_ps(kC1));
  pc = _mm512_mul_ps(pc, z);
  pc = _mm512_mul_ps(pc, z);
  pc = _mm512_sub_ps(pc, _mm512_mul_ps(_mm512_set1_ps(0.5f), z));
  pc = _mm512_add_ps(pc, _mm512_set1_ps(1.0f));
  __m512 sv, cv;
  quadrant(q, ps, pc, &sv, &cv);
  const __mmask16 m = tail_mask16(left);
  _mm512_mask_storeu_ps(s, m, sv);
  _mm512_mask_storeu_ps(c, m, cv);
  return (static_cast<unsigned>(b0) | (static_cast<unsigned>(b1) << 8)) & static_cast<unsigned>(m);
}

void avx512_sincos(const double* theta, std::int64_t n, float* s, float* c) {
  // Two independent groups a step: each is one long dependency chain (reduction, polynomial), so
  // interleaving them roughly halves the time of a row. Out-of-range lanes are redone at the end.
  unsigned any_bad = 0;
  for (std::int64_t i = 0; i < n; i += 32) {
    const unsigned b0 = sincos16(theta + i, n - i, s + i, c + i);
    const unsigned b1 = n - i > 16 ? sincos16(theta + i + 16, n - i - 16, s + i + 16, c + i + 16) : 0u;
    any_bad |= b0 | b1;
  }
  if (any_bad != 0)
    for (std::int64_t i = 0; i < n; ++i)
      if (!((theta[i] < 0 ? -theta[i] : theta[i]) <= kReduceLimit)) sincos_slow(theta[i], s + i, c + i);  // also NaN
}

void avx512_fast_sincos(const float* theta, std::int64_t n, float* s, float* c) {
  for (std::int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask16(n - i);
    const __m512 x = _mm512_maskz_loadu_ps(m, theta + i);
    const __m512 rev = _mm512_mul_round_ps(x, _mm512_set1_ps(kInvTwoPiRz), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m512 f = _mm512_sub_ps(rev, _mm512_roundscale_ps(rev, kRne));
    const __m512 q = _mm512_roundscale_ps(_mm512_mul_ps(_mm512_set1_ps(4.0f), f), kRne);
    const __m512 g = _mm512_sub_ps(f, _mm512_mul_ps(q, _mm512_set1_ps(0.25f)));
    const __m512 z = _mm512_mul_ps(g, g);
    __m512 ps = _mm512_mul_ps(_mm512_set1_ps(kF7), z);
    ps = _mm512_add_ps(ps, _mm512_set1_ps(kF5));
    ps = _mm512_mul_ps(ps, z);
    ps = _mm512_add_ps(ps, _mm512_set1_ps(kF3));
    ps = _mm512_mul_ps(ps, z);
    ps = _mm512_add_ps(ps, _mm512_set1_ps(kF1));
    ps = _mm512_mul_ps(ps, g);
    __m512 pc = _mm512_mul_ps(_mm512_set1_ps(kG8), z);
    pc = _mm512_add_ps(pc, _mm512_set1_ps(kG6));
    pc = _mm512_mul_ps(pc, z);
    pc = _mm512_add_ps(pc, _mm512_set1_ps(kG4));
    pc = _mm512_mul_ps(pc, z);
    pc = _mm512_add_ps(pc, _mm512_set1_ps(kG2));
    pc = _mm512_mul_ps(pc, z);
    pc = _mm512_add_ps(pc, _mm512_set1_ps(1.0f));
    // NaN converts to 0x80000000, quadrant 0: as the portable code's NaN -> 0.
    const __m512i qi = _mm512_cvtps_epi32(q);
    __m512 sv, cv;
    quadrant(qi, ps, pc, &sv, &cv);
    _mm512_mask_storeu_ps(s + i, m, sv);
    _mm512_mask_storeu_ps(c + i, m, cv);
  }
}

// ---- storage formats, 16 lanes ------------------------------------------------------------------------

// f32 -> bf16 bits in the low half of each 32-bit lane: round to nearest even, NaN quieted (as
// scalar_recipes.cpp's f32_to_bf16_bits).
__m512i bf16_bits(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF))), 16);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)), _mm512_set1_epi32(0x7F800000));
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x0040));
  return _mm512_mask_blend_epi32(nan, rounded, quiet);
}

// A full vector (m == 0xFFFF) takes the unmasked instructions: masked loads and especially masked
// narrowing stores (vpmovdw to memory) are several times slower on current Intel cores.
template <Fmt T>
__m512 load16(const void* p, __mmask16 m) {
  if constexpr (T == Fmt::f32) {
    return m == 0xFFFF ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(m, p);
  } else {
    const __m256i h = m == 0xFFFF ? _mm256_loadu_si256(static_cast<const __m256i*>(p)) : _mm256_maskz_loadu_epi16(m, p);
    if constexpr (T == Fmt::bf16)
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    else
      return _mm512_maskz_cvtph_ps(0xFFFF, h);
  }
}

template <Fmt T>
void store16(void* p, __mmask16 m, __m512 v) {
  if constexpr (T == Fmt::f32) {
    if (m == 0xFFFF)
      _mm512_storeu_ps(p, v);
    else
      _mm512_mask_storeu_ps(p, m, v);
  } else {
    const __m256i h = T == Fmt::bf16 ? _mm512_cvtepi32_epi16(bf16_bits(v)) : _mm512_maskz_cvtps_ph(0xFFFF, v, kRne);
    if (m == 0xFFFF)
      _mm256_storeu_si256(static_cast<__m256i*>(p), h);
    else
      _mm256_mask_storeu_epi16(p, m, h);
  }
}

// Rounds to the mode's format, kept as f32 (f32: identity).
template <Mode M>
__m512 rmode(__m512 v) {
  if constexpr (M == Mode::bf16)
    return _mm512_castsi512_ps(_mm512_slli_epi32(bf16_bits(v), 16));
  else if constexpr (M == Mode::f16)
    return _mm512_maskz_cvtph_ps(0xFFFF, _mm512_maskz_cvtps_ph(0xFFFF, v, kRne));
  else
    return v;
}

// ---- the prepared rows -------------------------------------------------------------------------------

template <Mode M>
void prepare_mode(const float* c, const float* s, std::int64_t P, float att, bool interleaved, float* cc, float* ss) {
  const __m512 va = _mm512_set1_ps(att);
  // Interleaved: lanes 0..7 / 8..15 of c, each twice; the even channel of a pair carries -s.
  const __m512i lo = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
  const __m512i hi = _mm512_set_epi32(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8);
  const __mmask16 even = 0x5555;
  for (std::int64_t j = 0; j < P; j += 16) {
    const std::int64_t left = P - j;
    const __mmask16 m = tail_mask16(left);
    const __m512 cj = rmode<M>(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, c + j), va));
    const __m512 sj = rmode<M>(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, s + j), va));
    if (!interleaved) {
      _mm512_mask_storeu_ps(cc + j, m, cj);
      _mm512_mask_storeu_ps(cc + P + j, m, cj);
      _mm512_mask_storeu_ps(ss + j, m, neg_where(0xFFFF, sj));
      _mm512_mask_storeu_ps(ss + P + j, m, sj);
    } else {
      const __mmask16 m0 = tail_mask16(2 * left), m1 = tail_mask16(2 * left - 16 > 0 ? 2 * left - 16 : 0);
      _mm512_mask_storeu_ps(cc + 2 * j, m0, _mm512_permutexvar_ps(lo, cj));
      _mm512_mask_storeu_ps(ss + 2 * j, m0, neg_where(even, _mm512_permutexvar_ps(lo, sj)));
      if (m1 != 0) {
        _mm512_mask_storeu_ps(cc + 2 * j + 16, m1, _mm512_permutexvar_ps(hi, cj));
        _mm512_mask_storeu_ps(ss + 2 * j + 16, m1, neg_where(even, _mm512_permutexvar_ps(hi, sj)));
      }
    }
  }
}

void avx512_prepare(const float* c, const float* s, std::int64_t P, float att, Mode mode, bool interleaved, float* cc,
                    float* ss) {
  switch (mode) {
    case Mode::bf16: prepare_mode<Mode::bf16>(c, s, P, att, interleaved, cc, ss); break;
    case Mode::f16: prepare_mode<Mode::f16>(c, s, P, att, interleaved, cc, ss); break;
    default: prepare_mode<Mode::f32>(c, s, P, att, interleaved, cc, ss); break;
  }
}

constexpr std::int64_t size_of(Fmt t) { return t == Fmt::f32 ? 4 : 2; }

// ---- rotation --------------------------------------------------------------------------------------------

// PREFETCHT0 as a volatile asm statement: GCC 12's IPA pure-const pass marks _mm_prefetch /
// __builtin_prefetch "looping const" and then deletes the calls of a helper whose result is unused,
// which silently removed every prefetch of this file (checked with objdump: no prefetcht0 left).
[[gnu::always_inline]] inline void prefetch_line(std::uintptr_t address) {
  asm volatile("prefetcht0 (%0)" : : "r"(address));
}

// Prefetches one head `ahead` bytes after x (input) and y (output, when it is another buffer).
// Address arithmetic in integers: the target may lie past the tensor, and a prefetch never faults.
template <Fmt In, Fmt Out>
void prefetch_head(const RotateJob& job, const unsigned char* x, const unsigned char* y) {
  if (job.prefetch_in_bytes == 0) return;
  const auto xi = reinterpret_cast<std::uintptr_t>(x) + static_cast<std::uintptr_t>(job.prefetch_in_bytes);
  for (std::int64_t l = 0; l < job.head_dim * size_of(In); l += 64) prefetch_line(xi + static_cast<std::uintptr_t>(l));
  if (job.prefetch_out_bytes == 0 || job.stream_out) return;  // streamed output lines are never read
  const auto yi = reinterpret_cast<std::uintptr_t>(y) + static_cast<std::uintptr_t>(job.prefetch_out_bytes);
  for (std::int64_t l = 0; l < job.head_dim * size_of(Out); l += 64) prefetch_line(yi + static_cast<std::uintptr_t>(l));
}

template <Fmt In, Fmt Out>
void pass_through(const unsigned char* x, unsigned char* y, int from, int to) {
  for (int ch = from; ch < to; ch += 16) {
    const __mmask16 m = tail_mask16(to - ch);
    store16<Out>(y + ch * size_of(Out), m, load16<In>(x + ch * size_of(In), m));
  }
}

// ---- bf16 in and out, half-split, 32 pairs a step -------------------------------------------------------
//
// The hot case of bf16 activations (Llama at bf16): a and b each come in one 64-byte load of 32 values;
// unpacking them against zero gives their f32 bit patterns directly, in the order "lo" = values
// 8k..8k+3, "hi" = 8k+4..8k+7 of each 128-bit lane k, and packus_epi32 puts the results back in the
// original order. The prepared rows are permuted into that order once per call.
//
// Rounding to bf16 without the NaN fix-up of bf16_bits(): every NaN here has zero low 16 bits (a NaN
// loaded from bf16, one propagated from it, or the default NaN of an invalid operation), so
// u + 0x7FFF + lsb cannot carry out of a NaN; the result is still a NaN (possibly not quieted, where
// portable.cpp sets the quiet bit: NaN payloads are not part of the contract).
constexpr int kMaxFastPairs = 256;

__m512i bf16_round_bits_nonan(__m512 v) {  // the rounded bf16 in the high half of each lane
  // u + 0x7FFF, plus 1 where bit 16 (the bf16 lsb) is set: ties to even.
  const __m512i u = _mm512_castps_si512(v);
  const __mmask16 odd = _mm512_test_epi32_mask(u, _mm512_set1_epi32(0x10000));
  const __m512i t = _mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF));
  return _mm512_mask_add_epi32(t, odd, t, _mm512_set1_epi32(1));
}
__m512 rbf_nonan(__m512 v) {
  return _mm512_castsi512_ps(_mm512_and_si512(bf16_round_bits_nonan(v), _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
}

template <Mode M>
void rotate_bf16_half_split_32(const RotateJob& job) {
  const int P = job.pairs, D = job.head_dim;
  // Rows in unpack order: c, s_a (= -s), s_b (= +s), each [chunk][lo 16 | hi 16].
  alignas(64) float rows[3][kMaxFastPairs];
  const __m512i idx_lo = _mm512_set_epi32(27, 26, 25, 24, 19, 18, 17, 16, 11, 10, 9, 8, 3, 2, 1, 0);
  const __m512i idx_hi = _mm512_set_epi32(31, 30, 29, 28, 23, 22, 21, 20, 15, 14, 13, 12, 7, 6, 5, 4);
  const float* src[3] = {job.cc, job.ss, job.ss + P};
  for (int r = 0; r < 3; ++r)
    for (int j = 0; j < P; j += 32) {
      const __m512 v0 = _mm512_loadu_ps(src[r] + j), v1 = _mm512_loadu_ps(src[r] + j + 16);
      _mm512_store_ps(rows[r] + j, _mm512_permutex2var_ps(v0, idx_lo, v1));
      _mm512_store_ps(rows[r] + j + 16, _mm512_permutex2var_ps(v0, idx_hi, v1));
    }
  const auto* in = static_cast<const unsigned char*>(job.in);
  auto* out = static_cast<unsigned char*>(job.out);
  const __m512i zero = _mm512_setzero_si512();
  for (std::int64_t h = 0; h < job.heads; ++h) {
    const unsigned char* x = in + h * job.in_stride_head * 2;
    unsigned char* y = out + h * job.out_stride_head * 2;
    prefetch_head<Fmt::bf16, Fmt::bf16>(job, x, y);
    pass_through<Fmt::bf16, Fmt::bf16>(x, y, 2 * P, D);
    for (int j = 0; j < P; j += 32) {
      const __m512i va = _mm512_loadu_si512(x + 2 * j), vb = _mm512_loadu_si512(x + 2 * (P + j));
      const __m512 a[2] = {_mm512_castsi512_ps(_mm512_unpacklo_epi16(zero, va)), _mm512_castsi512_ps(_mm512_unpackhi_epi16(zero, va))};
      const __m512 b[2] = {_mm512_castsi512_ps(_mm512_unpacklo_epi16(zero, vb)), _mm512_castsi512_ps(_mm512_unpackhi_epi16(zero, vb))};
      __m512i ya[2], yb[2];
      for (int k = 0; k < 2; ++k) {
        const __m512 c = _mm512_load_ps(rows[0] + j + 16 * k);
        const __m512 sa = _mm512_load_ps(rows[1] + j + 16 * k), sb = _mm512_load_ps(rows[2] + j + 16 * k);
        __m512 ra, rb;
        if constexpr (M == Mode::bf16) {  // every product and sum rounded to bf16 (a, b, c, s are bf16 values)
          ra = _mm512_add_ps(rbf_nonan(_mm512_mul_ps(a[k], c)), rbf_nonan(_mm512_mul_ps(b[k], sa)));
          rb = _mm512_add_ps(rbf_nonan(_mm512_mul_ps(b[k], c)), rbf_nonan(_mm512_mul_ps(a[k], sb)));
        } else {
          ra = _mm512_add_ps(_mm512_mul_ps(a[k], c), _mm512_mul_ps(b[k], sa));
          rb = _mm512_add_ps(_mm512_mul_ps(b[k], c), _mm512_mul_ps(a[k], sb));
        }
        ya[k] = _mm512_srli_epi32(bf16_round_bits_nonan(ra), 16);
        yb[k] = _mm512_srli_epi32(bf16_round_bits_nonan(rb), 16);
      }
      const __m512i oa = _mm512_packus_epi32(ya[0], ya[1]), ob = _mm512_packus_epi32(yb[0], yb[1]);
      if (job.stream_out) {
        _mm512_stream_si512(reinterpret_cast<__m512i*>(y + 2 * j), oa);
        _mm512_stream_si512(reinterpret_cast<__m512i*>(y + 2 * (P + j)), ob);
      } else {
        _mm512_storeu_si512(y + 2 * j, oa);
        _mm512_storeu_si512(y + 2 * (P + j), ob);
      }
    }
  }
  if (job.stream_out) _mm_sfence();  // streaming stores visible before the caller's next step
}

// Half-split: pair j = channels (j, j + P); a and b come from two contiguous runs.
template <Fmt In, Fmt Out, Mode M>
void rotate_half_split(const RotateJob& job) {
  const int P = job.pairs, D = job.head_dim;
  if constexpr (In == Fmt::bf16 && Out == Fmt::bf16 && (M == Mode::f32 || M == Mode::bf16)) {
    if (P % 32 == 0 && P <= kMaxFastPairs) {
      rotate_bf16_half_split_32<M>(job);
      return;
    }
  }
  const auto* in = static_cast<const unsigned char*>(job.in);
  auto* out = static_cast<unsigned char*>(job.out);
  for (std::int64_t h = 0; h < job.heads; ++h) {
    const unsigned char* x = in + h * job.in_stride_head * size_of(In);
    unsigned char* y = out + h * job.out_stride_head * size_of(Out);
    prefetch_head<In, Out>(job, x, y);
    pass_through<In, Out>(x, y, 2 * P, D);
    for (int j = 0; j < P; j += 16) {
      const __mmask16 m = tail_mask16(P - j);
      const __m512 a = rmode<M>(load16<In>(x + j * size_of(In), m));
      const __m512 b = rmode<M>(load16<In>(x + (P + j) * size_of(In), m));
      const __m512 ca = _mm512_maskz_loadu_ps(m, job.cc + j), sa = _mm512_maskz_loadu_ps(m, job.ss + j);
      const __m512 cb = _mm512_maskz_loadu_ps(m, job.cc + P + j), sb = _mm512_maskz_loadu_ps(m, job.ss + P + j);
      const __m512 ya = rmode<M>(_mm512_add_ps(rmode<M>(_mm512_mul_ps(a, ca)), rmode<M>(_mm512_mul_ps(b, sa))));
      const __m512 yb = rmode<M>(_mm512_add_ps(rmode<M>(_mm512_mul_ps(b, cb)), rmode<M>(_mm512_mul_ps(a, sb))));
      if (Out == Fmt::f32 && job.stream_out && m == 0xFFFF) {
        _mm512_stream_ps(reinterpret_cast<float*>(y + j * size_of(Out)), ya);
        _mm512_stream_ps(reinterpret_cast<float*>(y + (P + j) * size_of(Out)), yb);
      } else {
        store16<Out>(y + j * size_of(Out), m, ya);
        store16<Out>(y + (P + j) * size_of(Out), m, yb);
      }
    }
  }
  if (job.stream_out) _mm_sfence();
}

// Interleaved: pair j = channels (2j, 2j + 1); the partner of every channel is one lane swap away.
template <Fmt In, Fmt Out, Mode M>
void rotate_interleaved(const RotateJob& job) {
  const int P = job.pairs, D = job.head_dim;
  const auto* in = static_cast<const unsigned char*>(job.in);
  auto* out = static_cast<unsigned char*>(job.out);
  for (std::int64_t h = 0; h < job.heads; ++h) {
    const unsigned char* x = in + h * job.in_stride_head * size_of(In);
    unsigned char* y = out + h * job.out_stride_head * size_of(Out);
    prefetch_head<In, Out>(job, x, y);
    pass_through<In, Out>(x, y, 2 * P, D);
    for (int i = 0; i < 2 * P; i += 16) {
      const __mmask16 m = tail_mask16(2 * P - i);  // 2P is even: a pair is never split
      const __m512 v = rmode<M>(load16<In>(x + i * size_of(In), m));
      const __m512 partner = _mm512_permute_ps(v, 0xB1);
      const __m512 cc = _mm512_maskz_loadu_ps(m, job.cc + i), ss = _mm512_maskz_loadu_ps(m, job.ss + i);
      const __m512 r = rmode<M>(_mm512_add_ps(rmode<M>(_mm512_mul_ps(v, cc)), rmode<M>(_mm512_mul_ps(partner, ss))));
      store16<Out>(y + i * size_of(Out), m, r);
    }
  }
}

template <Fmt In, Fmt Out>
RotateFn pick_mode(Mode mode, bool interleaved) {
  switch (mode) {
    case Mode::f32: return interleaved ? &rotate_interleaved<In, Out, Mode::f32> : &rotate_half_split<In, Out, Mode::f32>;
    case Mode::bf16:
      return interleaved ? &rotate_interleaved<In, Out, Mode::bf16> : &rotate_half_split<In, Out, Mode::bf16>;
    case Mode::f16: return interleaved ? &rotate_interleaved<In, Out, Mode::f16> : &rotate_half_split<In, Out, Mode::f16>;
    case Mode::f64: break;
  }
  return nullptr;
}

template <Fmt In>
RotateFn pick_out(Fmt out, Mode mode, bool interleaved) {
  switch (out) {
    case Fmt::f32: return pick_mode<In, Fmt::f32>(mode, interleaved);
    case Fmt::bf16: return pick_mode<In, Fmt::bf16>(mode, interleaved);
    case Fmt::f16: return pick_mode<In, Fmt::f16>(mode, interleaved);
    case Fmt::f64: break;
  }
  return nullptr;
}

// Unit channel stride, f32 / bf16 / f16 in and out, an f32-family mode; nullptr otherwise (the
// portable rotation runs: general strides, f64).
RotateFn avx512_rotate_fn(Fmt in, Fmt out, Mode mode, bool interleaved, bool unit_dim_stride) {
  if (!unit_dim_stride) return nullptr;
  switch (in) {
    case Fmt::f32: return pick_out<Fmt::f32>(out, mode, interleaved);
    case Fmt::bf16: return pick_out<Fmt::bf16>(out, mode, interleaved);
    case Fmt::f16: return pick_out<Fmt::f16>(out, mode, interleaved);
    case Fmt::f64: break;
  }
  return nullptr;
}

}  // namespace

const Backend& avx512_backend_impl() {
  static const Backend b{&avx512_sincos, &avx512_fast_sincos, &avx512_prepare, &avx512_rotate_fn, "avx512"};
  return b;
}

}  // namespace ropecheck::kernels::detail
