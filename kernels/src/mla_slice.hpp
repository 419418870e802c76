// The MLA layout's rotary slice (mla_slice.cpp), reached from rope_apply when the spec places its rotary
// block at an offset.
#pragma once

#include "ropecheck/kernels/rope_kernels.hpp"

namespace ropecheck::kernels::detail {

// The plan of the rotary block alone: a head of rotary_dim channels at offset 0, the same frequencies.
RopePlan slice_plan(const RopePlan& plan);
// rope_apply for a plan whose spec has rotary_offset != 0: the block rotated through a view, the other
// channels copied (converted to out's dtype).
void rope_apply_slice(const RopePlan& plan, const PositionsView& positions, const TensorView& q_in, const TensorView& q_out,
                      const TensorView& k_in, const TensorView& k_out, const KernelOptions& opts);

}  // namespace ropecheck::kernels::detail
