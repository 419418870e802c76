// The rotation of one pair in the recipe's arithmetic (the CPU's RotateJob, kernel_detail.hpp):
//   y_a = R(R(x_a * c) + R(x_b * (-s))),  y_b = R(R(x_b * c) + R(x_a * s))
// with R the rounding to the table dtype (identity in f32) and x already on that dtype's grid;
// binary64 throughout for the f64 mode. Every operation goes through fp.cuh: no FMA contraction.
#pragma once

#include "fp.cuh"
#include "launch.hpp"
#include "recipe_math.cuh"

namespace ropecheck::kernels::cuda_detail {

template <DT M>
RC_HD void rotate_pair(float a, float b, float c, float s, float& ya, float& yb) {
  ya = round_to<M>(fp::add(round_to<M>(fp::mul(a, c)), round_to<M>(fp::mul(b, -s))));
  yb = round_to<M>(fp::add(round_to<M>(fp::mul(b, c)), round_to<M>(fp::mul(a, s))));
}

RC_HD void rotate_pair(float a, float b, float c, float s, float& ya, float& yb, DT m) {
  switch (m) {
    case DT::bf16: rotate_pair<DT::bf16>(a, b, c, s, ya, yb); break;
    case DT::f16: rotate_pair<DT::f16>(a, b, c, s, ya, yb); break;
    default: rotate_pair<DT::f32>(a, b, c, s, ya, yb); break;
  }
}

RC_HD void rotate_pair_f64(double a, double b, double c, double s, double& ya, double& yb) {
  ya = fp::add(fp::mul(a, c), fp::mul(b, -s));
  yb = fp::add(fp::mul(b, c), fp::mul(a, s));
}

// Element i of a tensor of dtype t, read onto the grid of the rotation's format m (f32, f16, bf16):
// one rounding (a binary64 input is rounded directly, not through f32).
RC_HD float load_on_grid(const void* p, std::int64_t i, DT t, DT m) {
  if (t == DT::f64) return round_double_to_float(static_cast<const double*>(p)[i], m);
  return round_to(load_as_float(p, i, t), m);
}

// A binary64 value stored with one rounding to t.
RC_HD void store_double(void* p, std::int64_t i, DT t, double v) {
  if (t == DT::f64)
    static_cast<double*>(p)[i] = v;
  else
    store_float(p, i, t, round_double_to_float(v, t));
}

// Element i of `in` (dtype ti) copied to element o of `out` (dtype to) with one rounding.
RC_HD void copy_converted(const void* in, std::int64_t i, DT ti, void* out, std::int64_t o,
                                               DT to) {
  if (ti == DT::f64)
    store_double(out, o, to, static_cast<const double*>(in)[i]);
  else
    store_float(out, o, to, load_as_float(in, i, ti));
}

}  // namespace ropecheck::kernels::cuda_detail
