// What the CPU and CUDA sources share: the positions as the kernels take them, the checks every call
// makes, and the kernel exceptions turned into an unsupported answer.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "ropecheck/kernels/rope_kernels.hpp"
#include "ropecheck/kernels/rope_quantize.hpp"
#include "ropecheck/kut/kernel_under_test.hpp"

namespace ropecheck::kut::detail {

// [3][tokens] (t row, h row, w row) and whether the kernel must read three streams (a multimodal spec,
// or positions whose streams differ).
struct ThreeStreams {
  std::vector<std::int64_t> thw;
  std::int64_t tokens = 0;
  bool three = false;
  kernels::PositionsView view() const {
    return three ? kernels::PositionsView::three_streams(thw, tokens)
                 : kernels::PositionsView::of(std::span<const std::int64_t>(thw.data(), static_cast<std::size_t>(tokens)));
  }
};
ThreeStreams three_streams(std::span<const Position> positions, bool multimodal);

// What every RoPE call of a built-in source starts from: the recipe's plan for the call's spec and
// sequence length, and the positions as the kernels take them. Throws SpecError (run_guarded).
struct RopeSetup {
  kernels::RopePlan plan;
  ThreeStreams pos;
};
RopeSetup rope_setup(const RopeProblem& problem, kernels::Recipe recipe);

inline CallResult unsupported(std::string why) { return {CallResult::Status::unsupported, std::move(why)}; }

// Runs f, answering unsupported with the message of a SpecError (a spec the kernels cannot run) or an
// std::invalid_argument (shapes or dtypes they do not take).
template <class F>
CallResult run_guarded(F&& f) {
  try {
    f();
  } catch (const SpecError& e) {
    return unsupported(e.what());
  } catch (const std::invalid_argument& e) {
    return unsupported(e.what());
  }
  return {};
}

// The common shape checks: RoPE spec, sizes that match. Empty when fine, else the reason.
std::string check_rope_apply(const RopeApplyCall& c);
// x ([tokens][heads][head_dim], any dtype) through the stage in binary32 (kernels/qk_norm.hpp).
std::vector<float> rms_normed_f32(const RmsNormStage& norm, const ConstStorage& x, int heads, int head_dim);
std::string check_rope_table(const RopeTableCall& c);
std::string check_sinusoidal(const SinusoidalCall& c);
std::string check_rope_attention(const RopeAttentionCall& c);
// Revision 3's fused calls: RoPE spec, f32 input, sizes that match (a store's codes, scales and biases
// against quantize_store's; a cache against the description's shape). Empty when fine.
std::string check_rope_quantize(const RopeQuantizeCall& c);
std::string check_append_kv(const KvAppendCall& c);
// The call's input as binary32, through the spec's Q/K norm stage for `input` when it has one.
std::vector<float> input_f32(const RopeSpec& rope, std::string_view input, const ConstStorage& x, int heads);
// A store's bytes into the call's codes, scales and biases: std::invalid_argument when their sizes differ.
void copy_store(const kernels::StoredTensor& st, const RopeQuantizeCall& c);

Capabilities all_capabilities();

}  // namespace ropecheck::kut::detail
