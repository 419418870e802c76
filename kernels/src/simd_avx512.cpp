// The AVX-512 backend (kernel_detail.hpp): 16 lanes of the portable backend's arithmetic, operation for
// operation (bit-identical results; kernels/CMakeLists.txt compiles this file alone with -mavx512f
// -mavx512bw -mavx512vl -mavx512dq, and dispatch.cpp calls it only where the CPU has those).
//
// Self-contained on purpose: no inline function or template shared with a portable translation unit
// is instantiated here (see the ODR note in kernel_detail.hpp); `nm -C` of this object shows only the
// functions defined below.
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as the merge source of their unmasked forms,
// which -Wmaybe-uninitialized reports once inlined (GCC bug 105593): not a defect of this file.
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

__mmask16 tail_mask16(std::int64_t left) { return left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1u); }
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

void avx512_sincos(const double* theta, std::int64_t n, float* s, float* c) {
  for (std::int64_t i = 0; i < n; i += 16) {
    const std::int64_t left = n - i;
    const __mmask8 m0 = tail_mask8(left), m1 = tail_mask8(left - 8);
    __m256 r0, r1;
    __m256i q0, q1;
    __mmask8 b0, b1;
    reduce8(_mm512_maskz_loadu_pd(m0, theta + i), &r0, &q0, &b0);
    reduce8(_mm512_maskz_loadu_pd(m1, theta + i + 8), &r1, &q1, &b1);
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
    _mm512_mask_storeu_ps(s + i, m, sv);
    _mm512_mask_storeu_ps(c + i, m, cv);
    const unsigned bad = (static_cast<unsigned>(b0) | (static_cast<unsigned>(b1) << 8)) & static_cast<unsigned>(m);
    if (bad != 0)
      for (int l = 0; l < 16; ++l)
        if (bad & (1u << l)) sincos_slow(theta[i + l], s + i + l, c + i + l);
  }
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

template <Fmt T>
__m512 load16(const void* p, __mmask16 m) {
  if constexpr (T == Fmt::f32) {
    return _mm512_maskz_loadu_ps(m, p);
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(m, p);
    if constexpr (T == Fmt::bf16)
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    else
      return _mm512_maskz_cvtph_ps(0xFFFF, h);
  }
}

template <Fmt T>
void store16(void* p, __mmask16 m, __m512 v) {
  if constexpr (T == Fmt::f32)
    _mm512_mask_storeu_ps(p, m, v);
  else if constexpr (T == Fmt::bf16)
    _mm256_mask_storeu_epi16(p, m, _mm512_cvtepi32_epi16(bf16_bits(v)));
  else
    _mm256_mask_storeu_epi16(p, m, _mm512_maskz_cvtps_ph(0xFFFF, v, kRne));
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

constexpr std::int64_t size_of(Fmt t) { return t == Fmt::f32 ? 4 : 2; }

// ---- rotation --------------------------------------------------------------------------------------------

template <Fmt In, Fmt Out>
void pass_through(const unsigned char* x, unsigned char* y, int from, int to) {
  for (int ch = from; ch < to; ch += 16) {
    const __mmask16 m = tail_mask16(to - ch);
    store16<Out>(y + ch * size_of(Out), m, load16<In>(x + ch * size_of(In), m));
  }
}

// Half-split: pair j = channels (j, j + P); a and b come from two contiguous runs.
template <Fmt In, Fmt Out, Mode M>
void rotate_half_split(const RotateJob& job) {
  const int P = job.pairs, D = job.head_dim;
  const auto* in = static_cast<const unsigned char*>(job.in);
  auto* out = static_cast<unsigned char*>(job.out);
  for (std::int64_t h = 0; h < job.heads; ++h) {
    const unsigned char* x = in + h * job.in_stride_head * size_of(In);
    unsigned char* y = out + h * job.out_stride_head * size_of(Out);
    pass_through<In, Out>(x, y, 2 * P, D);
    for (int j = 0; j < P; j += 16) {
      const __mmask16 m = tail_mask16(P - j);
      const __m512 a = rmode<M>(load16<In>(x + j * size_of(In), m));
      const __m512 b = rmode<M>(load16<In>(x + (P + j) * size_of(In), m));
      const __m512 ca = _mm512_maskz_loadu_ps(m, job.cc + j), sa = _mm512_maskz_loadu_ps(m, job.ss + j);
      const __m512 cb = _mm512_maskz_loadu_ps(m, job.cc + P + j), sb = _mm512_maskz_loadu_ps(m, job.ss + P + j);
      const __m512 ya = rmode<M>(_mm512_add_ps(rmode<M>(_mm512_mul_ps(a, ca)), rmode<M>(_mm512_mul_ps(b, sa))));
      const __m512 yb = rmode<M>(_mm512_add_ps(rmode<M>(_mm512_mul_ps(b, cb)), rmode<M>(_mm512_mul_ps(a, sb))));
      store16<Out>(y + j * size_of(Out), m, ya);
      store16<Out>(y + (P + j) * size_of(Out), m, yb);
    }
  }
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
  static const Backend b{&avx512_sincos, &avx512_fast_sincos, &avx512_rotate_fn, "avx512"};
  return b;
}

}  // namespace ropecheck::kernels::detail
