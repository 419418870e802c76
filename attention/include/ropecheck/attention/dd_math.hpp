// Double-double exp, expm1, tanh and division with rigorous error bounds: what the attention engine's
// fast path adds to reference/double_double.hpp. Defined in attention/src/dd_math.cpp, built with
// -ffp-contract=off like every unit of the module, so each rounding the analysis counts is the one the
// machine performs; the analyses are written at each function there, and tests/attention/test_dd_math.cpp
// measures the bounds against MPFR. Public for those tests; callers outside attention/ have no use for it.
#pragma once

#include <cmath>

#include "ropecheck/reference/double_double.hpp"

namespace ropecheck::attention::detail {

constexpr double kU = 0x1p-53;      // unit roundoff of binary64
constexpr double kU2 = 0x1p-106;    // u^2
constexpr double kUp = 1 + 0x1p-40; // inflation of a bound evaluated in double (its own few roundings)

// gamma_n = n u / (1 - n u) (Higham): the relative error of n roundings.
inline double gamma(double n) { return n * kU / (1 - n * kU); }

// x / y with |x/y - z| <= kDivRel |z| (Joldes, Muller, Popescu, ACM TOMS 44(2) 2017, DWDivDW2 with
// DWTimesFP3 for the product: 15u^2 + 56u^3 proven; budgeted 2^-99).
constexpr double kDivRel = 0x1p-99;
DD div(DD x, DD y);

// e^x for a DD x (taken as exact) with x.hi in [-650, 700]: |e^x - out| <= kExpRel |out| + 2^-1070.
// false outside that range (e^-650 < 2^-937: the caller counts such a term as 0 within 2^-937 of it).
constexpr double kExpRel = 0x1p-101;
bool exp_dd(DD x, DD& out);

// e^x - 1 for a DD x with |x.hi| <= 700: |expm1(x) - out| <= kExpm1Rel |out|; false beyond.
constexpr double kExpm1Rel = 0x1p-97;
bool expm1_dd(DD x, DD& out);

// tanh x for a DD x: |tanh x - out| <= err (absolute), returned.
double tanh_dd(DD x, DD& out);

}  // namespace ropecheck::attention::detail
