// The MLA layout (core/SPEC_FORMAT.md, "MLA"): a rotary block at rotary_offset inside a wider head
// (DeepSeek's q = [q_nope | q_pe]). The block is rotated as a head of its own, through a view of the
// same memory (the recipe's arithmetic unchanged: the block's plan is the spec's at offset 0, the same
// frequencies), and the channels around it are copied, converted to the output dtype.
#include "mla_slice.hpp"

#include <stdexcept>
#include <string>

namespace ropecheck::kernels::detail {
namespace {

std::int64_t element_bytes(DType t) { return format_info(t).storage_bits / 8; }

// The view of channels [offset, offset + width) of every head.
TensorView channels(const TensorView& v, int offset, int width) {
  TensorView s = v;
  if (s.data != nullptr) s.data = static_cast<std::byte*>(s.data) + offset * v.stride_dim * element_bytes(v.dtype);
  s.head_dim = width;
  return s;
}

// Channels outside [lo, hi) copied from in to out (exact where out's dtype holds the value, else rounded
// once to nearest even, as a pass-through channel is).
void copy_outside(const TensorView& in, const TensorView& out, int lo, int hi) {
  const std::int64_t bi = element_bytes(in.dtype), bo = element_bytes(out.dtype);
  for (std::int64_t t = 0; t < in.tokens; ++t)
    for (std::int64_t h = 0; h < in.heads; ++h)
      for (std::int64_t c = 0; c < in.head_dim; ++c) {
        if (c >= lo && c < hi) continue;
        const auto* x = static_cast<const std::byte*>(in.data) + (t * in.stride_token + h * in.stride_head + c * in.stride_dim) * bi;
        auto* y = static_cast<std::byte*>(out.data) + (t * out.stride_token + h * out.stride_head + c * out.stride_dim) * bo;
        store_element(y, load_element(x, in.dtype), out.dtype);
      }
}

}  // namespace

RopePlan slice_plan(const RopePlan& plan) {
  RopePlan s = plan;
  s.spec.head_dim = plan.spec.rotary_dim;
  s.spec.rotary_offset = 0;
  s.spec.key_layout = KeyLayout::per_head;
  s.head_dim = plan.spec.rotary_dim;
  return s;
}

void rope_apply_slice(const RopePlan& plan, const PositionsView& positions, const TensorView& q_in, const TensorView& q_out,
                      const TensorView& k_in, const TensorView& k_out, const KernelOptions& opts) {
  const int o = plan.spec.rotary_offset, R = plan.spec.rotary_dim;
  const bool has_k = k_in.data != nullptr || k_out.data != nullptr || k_in.heads != 0 || k_out.heads != 0;
  for (const TensorView* v : {&q_in, &q_out, &k_in, &k_out}) {
    if (v == &k_in && !has_k) break;
    if (v->head_dim != plan.head_dim)
      throw std::invalid_argument("ropecheck: rope_apply: head_dim (" + std::to_string(v->head_dim) + ") != spec head_dim (" +
                                  std::to_string(plan.head_dim) + ")");
  }
  // Copy first: with out == in the copy is the identity and the rotation below reads the block untouched.
  copy_outside(q_in, q_out, o, o + R);
  if (has_k) copy_outside(k_in, k_out, o, o + R);
  rope_apply(slice_plan(plan), positions, channels(q_in, o, R), channels(q_out, o, R), has_k ? channels(k_in, o, R) : TensorView{},
             has_k ? channels(k_out, o, R) : TensorView{}, opts);
}

}  // namespace ropecheck::kernels::detail
