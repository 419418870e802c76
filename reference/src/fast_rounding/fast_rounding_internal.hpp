// What the fast correct-rounding units share (private to reference/): the kernel attributes, the
// batched double-double sin / cos and rotation kernels, the mpfr_t holder and the Ziv fallback.
// Every unit that includes this is built with -ffp-contract=off (reference/CMakeLists.txt): each
// FMA is an explicit std::fma, so each rounding the error analysis counts is the one the machine
// performs.
#pragma once

#include <mpfr.h>

#include <array>
#include <limits>
#include <span>

#include "ropecheck/reference/double_double.hpp"
#include "ropecheck/reference/mpfr_value.hpp"

// The hot kernels use FMA (2Prod). Built for baseline x86-64 (no -mfma), std::fma would be a
// library call; target_clones compiles the kernels twice, with and without FMA instructions,
// and picks one at load time (the results are identical: std::fma is exact either way).
#if defined(__GNUC__) && defined(__x86_64__) && defined(__linux__) && !defined(__FMA__) && \
    !defined(ROPECHECK_NO_FMA_CLONES)
#define ROPECHECK_KERNEL __attribute__((target_clones("fma", "default")))
#else
#define ROPECHECK_KERNEL
#endif
#if defined(__GNUC__)
#define ROPECHECK_INLINE __attribute__((always_inline)) inline
#else
#define ROPECHECK_INLINE inline
#endif

namespace ropecheck::fast_rounding_detail {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The two kernels below are defined with ROPECHECK_KERNEL; the declarations go without it (on a
// declaration GCC would emit the load-time dispatcher in every caller's unit).

// sin / cos of p * (inv[0] + inv[1] + inv[2]) in DD (dd_trig.cpp); ok[j] = 0 where the fast path
// gives up.
struct AngleIn {
  double p;
  std::array<double, 3> inv;
};
void sincos_batch(const AngleIn* in, int n, double inv_rel_err, SinCosDD* out, unsigned char* ok);

// The rotated pair values of one head in DD with their error bounds (rotate.cpp).
struct RotIn {
  int ia, ib;
};
void rotate_head(const double* x, const RotIn* ch, const SinCosDD* sc, const unsigned char* ok, int n, DD att,
                 bool att_one, bool att_exact, double att_rel_err, DD* y, double* e);


// The MPFR fallback (ziv.cpp).
struct ZivInputs {
  double p = 0;               // the position (an integer, exact)
  mpfr_srcptr inv = nullptr;  // stored inverse frequency: +0 exactly, or relative error <= 2^-guard_bits
  mpfr_srcptr att = nullptr;  // attention factor (rot only), same convention
  bool att_exact = false;
  long guard_bits = 0;  // stored precision - 64
};

enum class ZivQuantity { cos, sin, rot };

int ziv_round(const ZivInputs& in, ZivQuantity q, double u, double v, std::span<const DType> types, double* results,
              unsigned char* need);

}  // namespace ropecheck::fast_rounding_detail
