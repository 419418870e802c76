// Exact reduction of a binary64 angle modulo 2*pi: what a recipe's angle means on the unit circle,
// for investigations that compare angles (drift). MPFR for large arguments, so it lives here and not
// in the kernels, which hand out their angles unreduced (rope_kernels.hpp recipe_angle_row).
#pragma once

namespace ropecheck {

// x - n * 2pi for the integer n nearest x / 2pi, rounded once to binary64 (within about 1 ulp for
// |x| < 2^27 by a three-part Cody-Waite constant, correctly rounded through MPFR beyond). NaN for a
// non-finite x. Thread-safe (MPFR values with explicit precision).
double reduce_two_pi(double x);

}  // namespace ropecheck
