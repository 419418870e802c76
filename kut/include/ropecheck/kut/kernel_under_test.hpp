// The kernel under test: one interface for every implementation that `check`, `props` and `drift`
// judge. Three sources implement it: ropecheck's own CPU recipes and its CUDA kernels (kut/sources.hpp)
// and C-ABI kernel plugins (golden/plugin_kernel.hpp, through the plugin client). Each consumer has one
// generic caller over this interface; none knows which source it is talking to.
//
// Calls take typed storage: the dtype and the raw elements of the input and of the output. A call
// comes back ok, unsupported (the kernel does not implement this spec / dtype; its message says why)
// or failed (a plugin crashed, hung, exited, broke its buffers, ...: the plugin client's message);
// the outputs of a failed call read as NaN.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ropecheck/core/attention_params.hpp"
#include "ropecheck/core/dtype.hpp"
#include "ropecheck/core/kv_cache.hpp"
#include "ropecheck/core/quantized_store_spec.hpp"
#include "ropecheck/core/spec.hpp"

namespace ropecheck::kut {

// What a kernel declares it implements. An entry point it lacks is never called.
struct Capabilities {
  bool rope_apply = false;    // rotated q / k
  bool rope_cos_sin = false;  // the cos / sin table [tokens][pairs], no attention factor
  bool sinusoidal = false;    // sinusoidal rows [tokens][d_model]
  bool rope_attention = false;    // fused RoPE + attention outputs (RopeAttentionCall)
  bool attention_scores = false;  // ... and its scores, when asked for
  bool rope_quantize = false;     // rotate then store quantized (RopeQuantizeCall)
  bool rope_append_kv = false;    // rotate k then append k / v to a KV cache (KvAppendCall)
  std::vector<DType> output_dtypes;  // the output dtypes it may produce (others are never requested)
  bool negative_positions = false;   // whether positions may be negative
  bool supports(DType d) const;
};

struct Info {
  std::string name;         // how it was named: "builtin:hf (avx512)", "cuda:hf (host emulation)", "kernel 'x' (lib.so)"
  std::string description;  // one line
  Capabilities capabilities;
  // Code ropecheck does not own (a plugin): a call that returns ok with non-finite outputs from
  // finite inputs is counted as a failed call by consumers that know every true output is finite.
  bool external = false;
};

struct CallResult {
  enum class Status { ok, unsupported, failed };
  Status status = Status::ok;
  std::string message;  // unsupported: the kernel's reason (may be empty); failed: what happened
  bool ok() const { return status == Status::ok; }
};

// Elements of one dtype, read-only or writable; `bytes` holds count * element size bytes.
struct ConstStorage {
  DType dtype = DType::f32;
  std::span<const std::byte> bytes;
  std::size_t count() const;
};
struct Storage {
  DType dtype = DType::f32;
  std::span<std::byte> bytes;
  std::size_t count() const;
};

// What every RoPE call shares. Frequencies are resolved with `seq_len` (dynamic / LongRoPE; nullopt:
// without a run-time length, at max_position_embeddings / the short factors).
struct RopeProblem {
  const EncodingSpec* spec = nullptr;          // family rope
  std::optional<std::int64_t> seq_len;
  std::span<const Position> positions;         // one per token
  std::string_view what;                       // the problem in words, for messages
};

// Rotates x ([tokens][heads][head_dim]) into out (same shape), attention factor folded in.
struct RopeApplyCall {
  RopeProblem problem;
  std::string_view input = "q";  // "q" or "k": a kernel may have separate paths
  int heads = 0;
  ConstStorage x;
  Storage out;
};

// cos / sin [tokens][pairs] in out dtype.
struct RopeTableCall {
  RopeProblem problem;
  Storage cos, sin;
};

// Sinusoidal rows [tokens][d_model].
struct SinusoidalCall {
  const EncodingSpec* spec = nullptr;  // family sinusoidal
  std::span<const std::int64_t> positions;
  std::string_view what;
  Storage out;
};

// Rotation and attention fused, for kernels that never expose rotated q / k (ONNX Runtime
// GroupQueryAttention with do_rotary, FlashAttention with rotary cos / sin, MLX rope + SDPA): one block
// of T tokens at problem.positions and one GQA group, q [T][G][D] (G = attention->group), k [T][D], v
// [T][Dv] (one key / value head), out [T][G][Dv]; the mask is by token index within the block
// (attention_keys). scores, when not empty, [G][attention_score_count(T)] in out's dtype: the soft-capped
// logits, row by row (attention::BlockLayout's order); a kernel that cannot expose them answers
// unsupported. The parameters are attention::AttentionSpec's (core/attention_params.hpp).
struct RopeAttentionCall {
  RopeProblem problem;
  const AttentionParams* attention = nullptr;
  ConstStorage q, k, v;
  Storage out;
  Storage scores;  // empty: not asked for
};

// Rotate then store quantized (kernel_abi.h revision 3): x [T][H][D] rotated as RopeApplyCall does (to
// binary32), then stored per `store` as golden --stores lays it out (golden/GOLDEN_FORMAT.md, "Quantized
// stores"): codes (FP8 codes, GGML blocks, MLX uint32 words), scales (FP8 f32, MLX in the scale dtype)
// and biases (MLX), each sized by the caller from the set's tensors; empty when the store has none.
struct RopeQuantizeCall {
  RopeProblem problem;
  std::string_view input = "q";
  int heads = 0;
  ConstStorage x;
  const quant::StoreSpec* store = nullptr;
  std::span<std::byte> codes, scales, biases;
};

// Rotate k at each appended token's position (problem.positions, one per token of the batch) and append
// it and v (stored in the cache's dtype) to the cache `cache` describes (core/kv_cache.hpp): k, v [T][H][D]
// f32 (v empty: no v cache); k_cache, v_cache kv::cache_shape(*cache, H, D) in one dtype, holding the
// sentinel bytes already: only the appended slots may change.
struct KvAppendCall {
  RopeProblem problem;
  const kv::CacheSpec* cache = nullptr;
  int heads = 0;
  ConstStorage k, v;
  Storage k_cache, v_cache;
};

// Thrown by a call that could not be made for a reason that is not the kernel's (a plugin's host process
// killed, again and again, by a signal ropecheck did not send and the kernel did not raise): no
// verdict can be given (exit 2). Every consumer lets it through; props rethrows it after the property.
class KernelRunInterrupted : public InputError {
 public:
  using InputError::InputError;
};

// What the end of a kernel's run found (KernelUnderTest::finish): calls whose outputs changed after
// they had returned (`what` is the call's problem, as it was passed), and notes (a plugin host that had
// to be killed when it was stopped).
struct RunEnd {
  struct Late {
    std::string what, message;
  };
  std::vector<Late> failures;
  std::vector<std::string> notes;
};

struct RecipeRows;  // kut/builtin_sources.hpp: which built-in recipe computes the kernel's rows

class KernelUnderTest {
 public:
  virtual ~KernelUnderTest() = default;
  virtual const Info& info() const = 0;
  virtual CallResult rope_apply(const RopeApplyCall& call) = 0;
  virtual CallResult rope_cos_sin(const RopeTableCall& call) = 0;
  virtual CallResult sinusoidal(const SinusoidalCall& call) = 0;
  // Optional (Capabilities::rope_attention): unsupported unless a source implements it.
  virtual CallResult rope_attention(const RopeAttentionCall&) {
    return {CallResult::Status::unsupported, "the kernel has no fused RoPE + attention entry point"};
  }
  // Optional (Capabilities::rope_quantize, ::rope_append_kv; kernel_abi.h revision 3).
  virtual CallResult rope_quantize(const RopeQuantizeCall&) {
    return {CallResult::Status::unsupported, "the kernel has no fused RoPE + quantized store entry point"};
  }
  virtual CallResult rope_append_kv(const KvAppendCall&) {
    return {CallResult::Status::unsupported, "the kernel has no fused RoPE + KV-cache append entry point"};
  }
  // After failed calls a kernel may stop being called ("not called: ..."); consumers that move on to
  // an unrelated problem (the next property) call this so the kernel gets calls again.
  virtual void forgive() {}
  // Ends the run: a plugin's host is stopped (bounded) and the last outputs are compared with what the
  // call returned. Calls after it start anew.
  virtual RunEnd finish() { return {}; }
  // The built-in recipe behind the kernel, whose angle and f32 trig rows drift measures; nullptr for
  // a plugin (the ABI does not expose them).
  virtual const RecipeRows* recipe_rows() const { return nullptr; }
};

}  // namespace ropecheck::kut
