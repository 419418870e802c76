// Internal to kernels/src: the recipe's math for one position (angles, cos / sin, the prepared rows a
// rotation reads). One RowEngine per thread, allocated before any hot loop; its methods never allocate.
#pragma once

#include <cstdint>
#include <vector>

#include "kernel_detail.hpp"
#include "ropecheck/kernels/rope_kernels.hpp"

namespace ropecheck::kernels::detail {

Mode mode_of(DType table);

class RowEngine {
 public:
  RowEngine(const RopePlan& plan, const Backend& backend);

  // The recipe's angles at p: binary64 for accurate (theta_d), f32 for every other recipe (theta_f,
  // and theta_d holding the same values exactly).
  void angles(const Position& p);
  // Plain f32 cos / sin of the angles (recipe_cos_sin_row); call angles first.
  void cos_sin();
  // The rows a rotation in `mode` reads (RotateJob::cc / ss or ccd / ssd), attention factor folded;
  // call cos_sin first (mode f64 with accurate needs only angles).
  void prepare(Mode mode);
  // Plain cos / sin in binary64 (accurate's f64 path); call angles first. Fills cd / sd.
  void cos_sin_f64();

  const double* theta_d() const { return theta_d_.data(); }
  const float* theta_f() const { return theta_f_.data(); }
  const float* c() const { return c_.data(); }
  const float* s() const { return s_.data(); }
  const double* cd() const { return cd_.data(); }
  const double* sd() const { return sd_.data(); }
  const float* cc() const { return cc_.data(); }
  const float* ss() const { return ss_.data(); }
  const double* ccd() const { return ccd_.data(); }
  const double* ssd() const { return ssd_.data(); }

 private:
  const RopePlan& plan_;
  const Backend& be_;
  std::vector<double> theta_d_, cd_, sd_, ccd_, ssd_;
  std::vector<float> theta_f_, c_, s_, cc_, ss_;
};

// The position a recipe multiplies by, in f32: fl32(p), or p held in bf16 / f16 (the known-bad
// position recipes; f16 is infinite from 65520).
float recipe_position_f32(Recipe r, std::int64_t p);

}  // namespace ropecheck::kernels::detail
