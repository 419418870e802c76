// fp8_cuda_host_check: core's FP8 encoders (core/quantized.hpp) against the CUDA toolkit's own
// definition, the host code of __nv_cvt_double_to_fp8 and __nv_cvt_float_to_fp8 in cuda_fp8.hpp
// (__NV_SATFINITE = the saturate rule, __NV_NOSAT = nonfinite), e4m3 and e5m2, bit for bit; NaN
// inputs compared as NaN (CUDA's e5m2 NaN pattern depends on the input's payload). No GPU is used: the
// device path (cvt.rn.satfinite on sm_89 and later) is not exercised. Seed fixed and printed; exit 1
// on any difference.
#include <cuda_fp8.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "ropecheck/core/quantized.hpp"

using namespace ropecheck::quant;

int main() {
  const unsigned seed = 99;
  std::printf("seed %u\n", seed);
  std::mt19937_64 rng(seed);
  long n = 0, bad = 0;
  auto check = [&](double v) {
    for (Fp8 f : {Fp8::e4m3fn, Fp8::e5m2}) {
      for (Fp8Overflow o : {Fp8Overflow::saturate, Fp8Overflow::nonfinite}) {
        const auto sat = o == Fp8Overflow::saturate ? __NV_SATFINITE : __NV_NOSAT;
        const auto fmt = f == Fp8::e4m3fn ? __NV_E4M3 : __NV_E5M2;
        const auto fv = static_cast<float>(v);
        const unsigned char cd = __nv_cvt_double_to_fp8(v, sat, fmt), cf = __nv_cvt_float_to_fp8(fv, sat, fmt);
        const std::uint8_t md = fp8_encode(v, f, o), mf = fp8_encode(fv, f, o);
        n += 2;
        const auto same = [&](unsigned char c, std::uint8_t m) {
          return std::isnan(v) ? fp8_is_nan(c, f) && fp8_is_nan(m, f) : c == m;
        };
        if (!same(cd, md) || !same(cf, mf)) {
          if (++bad <= 10) std::printf("%a %s %s: cuda %02x %02x, core %02x %02x\n", v, to_string(f).data(), to_string(o).data(), cd, cf, md, mf);
        }
      }
    }
  };
  std::uniform_int_distribution<int> e(-30, 25);
  std::uniform_real_distribution<double> m(1, 2);
  for (int i = 0; i < 1000000; ++i) check(std::ldexp(m(rng), e(rng)) * (i & 1 ? -1 : 1));
  for (Fp8 f : {Fp8::e4m3fn, Fp8::e5m2}) {  // every value, every midpoint, and their neighbours
    for (int b = 0; b < 256; ++b) {
      const double v = fp8_decode(static_cast<std::uint8_t>(b), f);
      if (!std::isfinite(v)) continue;
      const double step = fp8_step(v, f);
      for (double d : {0.0, step / 2, -step / 2, step / 4}) {
        check(v + d);
        check(std::nextafter(v + d, HUGE_VAL));
        check(std::nextafter(v + d, -HUGE_VAL));
      }
    }
  }
  for (double v : {464.0, 480.0, 61440.0, 1e300, HUGE_VAL, -HUGE_VAL, std::nan(""), 0.0, -0.0, 0x1p-10, 0x1p-17}) check(v);
  std::printf("%ld conversions (binary64 and binary32, both formats and rules): %ld differ\n", n, bad);
  return bad == 0 ? 0 : 1;
}
