// Internal to kernels/src: the constants every path shares, the per-token work units, and the
// function table through which rope_kernels.cpp reaches the portable or the AVX-512 code.
//
// Bit-identity rule: the portable and AVX-512 paths compute the same IEEE operations in the same
// order (no FMA anywhere: the library is built with -ffp-contract=off and neither path calls fma).
// The constants live here as constexpr values so both translation units read the same numbers.
//
// ODR note: kernels/src/simd_avx512.cpp is compiled with -mavx512*. It must not instantiate any
// inline function or template that a portable translation unit also instantiates (the linker keeps
// one copy of such COMDAT code and might keep the AVX-512 one), so this header declares plain
// functions and constexpr constants only.
#pragma once

#include <cstdint>

namespace ropecheck::kernels::detail {

// ---- accurate sin / cos: reduction modulo pi/2 in binary64 ------------------------------------------

// k = nearbyint(theta * 2/pi); r = ((theta - k*P1) - k*P2) - k*P3 (Cody-Waite, three parts).
// P1 and P2 carry 25 significant bits, so k*P1 and k*P2 are exact for |k| < 2^28; theta - k*P1 is
// exact (Sterbenz); P1 + P2 + P3 is pi/2 to 2^-109. Valid for |theta| <= kReduceLimit = 2^28
// (about 2.7e8 = 16 * 2^24 * max w): the reduced argument is then within about 2^-53 of the exact
// theta - k*pi/2. Beyond it (and for inf / NaN) the slow path sincos_slow runs instead.
inline constexpr double kTwoOverPi = 0x1.45f306dc9c883p-1;
inline constexpr double kPio2_1 = 0x1.921fb5p+0;
inline constexpr double kPio2_2 = 0x1.110b46p-26;
inline constexpr double kPio2_3 = 0x1.1a62633145c07p-54;
inline constexpr double kReduceLimit = 0x1p28;

// f32 polynomials on [-pi/4, pi/4] (the minimax fits of Cephes sinf / cosf, S. Moshier): with z = r*r,
//   sin r = ((kS3*z + kS2)*z + kS1)*z*r + r                          (degree 7)
//   cos r = ((kC3*z + kC2)*z + kC1)*z*z - 0.5*z + 1                  (degree 8)
// evaluated left to right, each operation rounded to f32.
inline constexpr float kS1 = -1.6666654611e-1f;
inline constexpr float kS2 = 8.3321608736e-3f;
inline constexpr float kS3 = -1.9515295891e-4f;
inline constexpr float kC1 = 4.166664568298827e-2f;
inline constexpr float kC2 = -1.388731625493765e-3f;
inline constexpr float kC3 = 2.443315711809948e-5f;

// ---- the fast-math __sinf / __cosf model -------------------------------------------------------------

// rev = x * fl32(1/2pi) rounded toward zero (one f32 product); f = rev - nearbyint(rev) in
// [-1/2, 1/2] (exact); q = nearbyint(4f), g = f - q/4 in [-1/8, 1/8] (exact); then
//   sin(2 pi g) = g * (kF1 + z*(kF3 + z*(kF5 + z*kF7)))             z = g*g (Taylor, degree 7)
//   cos(2 pi g) = 1 + z*(kG2 + z*(kG4 + z*(kG6 + z*kG8)))           (Taylor, degree 8)
// in f32. Truncation error at |2 pi g| = pi/4: 2^-21.6 for sin, 2^-25.3 for cos: the 2^-21.4
// absolute error the CUDA guide gives for __sinf on [-pi, pi].
inline constexpr float kInvTwoPiRz = 0x1.45f306p-3f;  // fl32(1 / 2pi) rounded toward zero
inline constexpr float kF1 = 6.28318530717958648f;    // 2pi
inline constexpr float kF3 = -41.3417022403997f;      // -(2pi)^3 / 3!
inline constexpr float kF5 = 81.6052492760750f;       // (2pi)^5 / 5!
inline constexpr float kF7 = -76.7058597530613f;      // -(2pi)^7 / 7!
inline constexpr float kG2 = -19.7392088021787f;      // -(2pi)^2 / 2!
inline constexpr float kG4 = 64.9393940226683f;       // (2pi)^4 / 4!
inline constexpr float kG6 = -85.4568172687572f;      // -(2pi)^6 / 6!
inline constexpr float kG8 = 60.2446387941201f;       // (2pi)^8 / 8!

// The slow path of the accurate reduction (|theta| > kReduceLimit, inf, NaN): glibc's binary64
// sin / cos (full Payne-Hanek reduction, < 1 ulp of binary64) rounded once to f32. Defined in the
// portable translation unit; the AVX-512 code calls it for the lanes out of range.
void sincos_slow(double theta, float* s, float* c);

// ---- the work units --------------------------------------------------------------------------------

// The arithmetic a rotation runs in: the recipe's table dtype (recipe.hpp table_dtype).
enum class Mode : std::uint8_t { f32, bf16, f16, f64 };

// A storage dtype as the backends see it: ropecheck::DType lives in reference/rounding.hpp, which
// pulls in Boost.Multiprecision, whose inline code must stay out of the AVX-512 translation unit.
// storage.hpp converts (fmt_of).
enum class Fmt : std::uint8_t { f64, f32, f16, bf16 };

// One token of one tensor: `heads` head vectors, each rotated by the same prepared row. The row is in
// channel order: y[i] = R(R(x[i] * cc[i]) + R(x[partner(i)] * ss[i])) where partner(i) is the other
// channel of i's pair, ss = -s on the pair's first channel and +s on its second, R the rounding to
// the mode's format (identity in f32), x already on the mode's grid. Channels in [2 * pairs, head_dim)
// pass through (converted to the output dtype). Mode f64 reads ccd / ssd instead.
struct RotateJob {
  const void* in = nullptr;
  void* out = nullptr;
  std::int64_t heads = 0;
  std::int64_t in_stride_head = 0, in_stride_dim = 1;
  std::int64_t out_stride_head = 0, out_stride_dim = 1;
  int pairs = 0, head_dim = 0;
  bool interleaved = false;  // pair j = channels (2j, 2j + 1); else (j, j + pairs)
  // Software prefetch: the same head this many bytes ahead in the input (and output) is fetched
  // while this one is rotated: the head of a token `ahead` tokens later, so the distance follows the
  // view's layout. 0: none (the last tokens). The hardware prefetchers alone leave the AVX-512 loop
  // well below memcpy speed (they stop at page boundaries); performance only, never the results.
  std::int64_t prefetch_in_bytes = 0, prefetch_out_bytes = 0;
  // Non-temporal (streaming) stores for full, 64-byte aligned output vectors: set for large out-of-place
  // outputs, where they save the read-for-ownership of every output line (memcpy does the same).
  // Performance only; the backend fences its streaming stores before returning.
  bool stream_out = false;
  const float* cc = nullptr;
  const float* ss = nullptr;
  const double* ccd = nullptr;
  const double* ssd = nullptr;
};
using RotateFn = void (*)(const RotateJob&);

// The vectorised pieces; each has a portable and an AVX-512 implementation with identical results.
struct Backend {
  // Accurate sin / cos of binary64 angles (the reduction above, f32 polynomials), n values.
  void (*sincos)(const double* theta, std::int64_t n, float* s, float* c);
  // The fast-math model of f32 angles.
  void (*fast_sincos)(const float* theta, std::int64_t n, float* s, float* c);
  // The prepared rows of a rotation in an f32-family mode (RotateJob::cc / ss, 2 * pairs values each):
  // c' = R(fl32(c * att)), s' = R(fl32(s * att)), R the rounding to the mode's format, in channel order.
  void (*prepare)(const float* c, const float* s, std::int64_t pairs, float att, Mode mode, bool interleaved, float* cc,
                  float* ss);
  // The rotation of one token's heads, or nullptr where this backend has no specialisation
  // (then the portable one runs).
  RotateFn (*rotate_fn)(Fmt in, Fmt out, Mode mode, bool interleaved, bool unit_dim_stride);
  const char* name;
};

const Backend& portable_backend();
// nullptr when the CPU (or the compiler) has no AVX-512.
const Backend* avx512_backend();

}  // namespace ropecheck::kernels::detail
