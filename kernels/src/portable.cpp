// The portable backend: plain C++ versions of the vectorised pieces (kernel_detail.hpp), the
// reference for bit-identity of the AVX-512 backend and the fallback on CPUs without AVX-512.
// Every float operation is written in the order the AVX-512 code performs it.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernel_detail.hpp"
#include "ropecheck/kernels/scalar_recipes.hpp"
#include "storage.hpp"

namespace ropecheck::kernels::detail {

void sincos_slow(double theta, float* s, float* c) {
  *s = static_cast<float>(std::sin(theta));
  *c = static_cast<float>(std::cos(theta));
}

namespace {

// Quadrant fix-up: (sin, cos) of r + q*pi/2 from ps = sin r, pc = cos r.
inline void quadrant(int q, float ps, float pc, float* s, float* c) {
  switch (q & 3) {
    case 0: *s = ps; *c = pc; break;
    case 1: *s = pc; *c = -ps; break;
    case 2: *s = -ps; *c = -pc; break;
    default: *s = -pc; *c = ps; break;
  }
}

inline void sincos_one(double theta, float* s, float* c) {
  if (!(std::fabs(theta) <= kReduceLimit)) {  // also inf and NaN
    sincos_slow(theta, s, c);
    return;
  }
  const double k = std::nearbyint(theta * kTwoOverPi);
  const double r = ((theta - k * kPio2_1) - k * kPio2_2) - k * kPio2_3;
  const auto x = static_cast<float>(r);
  const float z = x * x;
  float ps = kS3 * z;
  ps = ps + kS2;
  ps = ps * z;
  ps = ps + kS1;
  ps = ps * z;
  ps = ps * x;
  ps = ps + x;
  float pc = kC3 * z;
  pc = pc + kC2;
  pc = pc * z;
  pc = pc + kC1;
  pc = pc * z;
  pc = pc * z;
  pc = pc - 0.5f * z;
  pc = pc + 1.0f;
  quadrant(static_cast<int>(static_cast<std::int64_t>(k) & 3), ps, pc, s, c);
}

// a * b rounded toward zero: the exact product (48 bits) in binary64, rounded to nearest, stepped
// back toward zero when that went outward.
inline float mul_rz(float a, float b) {
  const double exact = static_cast<double>(a) * static_cast<double>(b);
  float r = static_cast<float>(exact);
  if (std::fabs(static_cast<double>(r)) > std::fabs(exact)) r = std::nextafter(r, 0.0f);
  return r;
}

inline void fast_sincos_one(float x, float* s, float* c) {
  const float rev = mul_rz(x, kInvTwoPiRz);
  const float f = rev - std::nearbyint(rev);  // exact, in [-1/2, 1/2]
  const float q = std::nearbyint(4.0f * f);
  const float g = f - q * 0.25f;  // exact, in [-1/8, 1/8]
  const float z = g * g;
  float ps = kF7 * z;
  ps = ps + kF5;
  ps = ps * z;
  ps = ps + kF3;
  ps = ps * z;
  ps = ps + kF1;
  ps = ps * g;
  float pc = kG8 * z;
  pc = pc + kG6;
  pc = pc * z;
  pc = pc + kG4;
  pc = pc * z;
  pc = pc + kG2;
  pc = pc * z;
  pc = pc + 1.0f;
  quadrant(std::isnan(q) ? 0 : static_cast<int>(q), ps, pc, s, c);  // q in [-2, 2]; & 3 maps mod 4
}

void portable_sincos(const double* theta, std::int64_t n, float* s, float* c) {
  for (std::int64_t i = 0; i < n; ++i) sincos_one(theta[i], s + i, c + i);
}

void portable_fast_sincos(const float* theta, std::int64_t n, float* s, float* c) {
  for (std::int64_t i = 0; i < n; ++i) fast_sincos_one(theta[i], s + i, c + i);
}

// ---- rotation ----------------------------------------------------------------------------------------

template <Mode M>
inline float rmode(float v) {
  if constexpr (M == Mode::bf16)
    return bf16_bits_to_f32(f32_to_bf16_bits(v));
  else if constexpr (M == Mode::f16)
    return f16_bits_to_f32(f32_to_f16_bits(v));
  else
    return v;
}

// Reads element i of a row as the mode's input: f32 modes get the value rounded once to the mode's
// format (exact unless the input is wider), f64 gets it exactly.
template <DType In, Mode M>
inline auto load_in(const void* base, std::int64_t i) {
  if constexpr (M == Mode::f64)
    return load_as_double<In>(base, i);
  else if constexpr (In == DType::f64)
    return round_double_to_float(load_as_double<In>(base, i), M == Mode::bf16 ? DType::bf16 : (M == Mode::f16 ? DType::f16 : DType::f32));
  else
    return rmode<M>(load_as_float<In>(base, i));
}

// The prepared rows (Backend::prepare).
template <Mode M>
void prepare_mode(const float* c, const float* s, std::int64_t P, float att, bool interleaved, float* cc, float* ss) {
  for (std::int64_t j = 0; j < P; ++j) {
    const float cj = rmode<M>(c[j] * att), sj = rmode<M>(s[j] * att);
    const std::int64_t ia = interleaved ? 2 * j : j, ib = interleaved ? 2 * j + 1 : j + P;
    cc[ia] = cj;
    cc[ib] = cj;
    ss[ia] = -sj;
    ss[ib] = sj;
  }
}

void portable_prepare(const float* c, const float* s, std::int64_t P, float att, Mode mode, bool interleaved, float* cc,
                      float* ss) {
  switch (mode) {
    case Mode::bf16: prepare_mode<Mode::bf16>(c, s, P, att, interleaved, cc, ss); break;
    case Mode::f16: prepare_mode<Mode::f16>(c, s, P, att, interleaved, cc, ss); break;
    default: prepare_mode<Mode::f32>(c, s, P, att, interleaved, cc, ss); break;
  }
}

template <DType In, DType Out, Mode M>
void rotate_portable(const RotateJob& job) {
  const int P = job.pairs, D = job.head_dim;
  const auto* in = static_cast<const unsigned char*>(job.in);
  auto* out = static_cast<unsigned char*>(job.out);
  constexpr std::int64_t in_size = dtype_size(In), out_size = dtype_size(Out);
  for (std::int64_t h = 0; h < job.heads; ++h) {
    const void* x = in + h * job.in_stride_head * in_size;
    void* y = out + h * job.out_stride_head * out_size;
    const std::int64_t si = job.in_stride_dim, so = job.out_stride_dim;
    // Pass-through channels first: an in-place call never reads a channel after writing it anyway.
    for (std::int64_t ch = 2 * P; ch < D; ++ch) store_converted<In, Out>(x, ch * si, y, ch * so);
    // Each pair is read whole before either channel is written (in place is safe).
    for (int j = 0; j < P; ++j) {
      const int ia = job.interleaved ? 2 * j : j, ib = job.interleaved ? 2 * j + 1 : j + P;
      const auto a = load_in<In, M>(x, ia * si), b = load_in<In, M>(x, ib * si);
      if constexpr (M == Mode::f64) {
        const double ya = a * job.ccd[ia] + b * job.ssd[ia];
        const double yb = b * job.ccd[ib] + a * job.ssd[ib];
        store_double<Out>(y, ia * so, ya);
        store_double<Out>(y, ib * so, yb);
      } else {
        const float ya = rmode<M>(rmode<M>(a * job.cc[ia]) + rmode<M>(b * job.ss[ia]));
        const float yb = rmode<M>(rmode<M>(b * job.cc[ib]) + rmode<M>(a * job.ss[ib]));
        store_float<Out>(y, ia * so, ya);
        store_float<Out>(y, ib * so, yb);
      }
    }
  }
}

DType dtype_of(Fmt f) {
  switch (f) {
    case Fmt::f64: return DType::f64;
    case Fmt::f32: return DType::f32;
    case Fmt::f16: return DType::f16;
    case Fmt::bf16: return DType::bf16;
  }
  return DType::f32;
}

template <DType In, DType Out>
RotateFn pick_mode(Mode m) {
  switch (m) {
    case Mode::f32: return &rotate_portable<In, Out, Mode::f32>;
    case Mode::bf16: return &rotate_portable<In, Out, Mode::bf16>;
    case Mode::f16: return &rotate_portable<In, Out, Mode::f16>;
    case Mode::f64: return &rotate_portable<In, Out, Mode::f64>;
  }
  return nullptr;
}

template <DType In>
RotateFn pick_out(DType out, Mode m) {
  switch (out) {
    case DType::f32: return pick_mode<In, DType::f32>(m);
    case DType::bf16: return pick_mode<In, DType::bf16>(m);
    case DType::f16: return pick_mode<In, DType::f16>(m);
    case DType::f64: return pick_mode<In, DType::f64>(m);
  }
  return nullptr;
}

// Every (in, out, mode), any strides and either layout: never nullptr.
RotateFn portable_rotate_fn(Fmt in, Fmt out, Mode mode, bool /*interleaved*/, bool /*unit_dim_stride*/) {
  const DType o = dtype_of(out);
  switch (in) {
    case Fmt::f32: return pick_out<DType::f32>(o, mode);
    case Fmt::bf16: return pick_out<DType::bf16>(o, mode);
    case Fmt::f16: return pick_out<DType::f16>(o, mode);
    case Fmt::f64: return pick_out<DType::f64>(o, mode);
  }
  return nullptr;
}

}  // namespace

const Backend& portable_backend() {
  static const Backend b{&portable_sincos, &portable_fast_sincos, &portable_prepare, &portable_rotate_fn, "portable"};
  return b;
}

}  // namespace ropecheck::kernels::detail
