// A tiny extern "C" face of the fast CPU kernels (kernels/rope_kernels.hpp) for Python's ctypes, so
// that bench/torch_side_by_side.py can run our rope_apply on the very buffers PyTorch holds (in place,
// no copies) and time both in one process. Built as a MODULE library (librope_ctypes_shim.so); not
// installed, not an API: the Python script is its only client.
//
// Plain C types only: strings for the spec, recipe and dtype; raw pointers to contiguous
// [tokens, heads, head_dim] buffers; int64 positions (one stream). No exception crosses the C
// boundary: every entry point catches and leaves a one-line message for rc_shim_last_error().
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "ropecheck/kernels/recipe.hpp"
#include "ropecheck/kernels/rope_kernels.hpp"
#include "ropecheck/reference/presets.hpp"
#include "ropecheck/core/dtype.hpp"
#include "ropecheck/core/spec.hpp"
#include "ropecheck/core/spec_json.hpp"

#define RC_SHIM_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

namespace rk = ropecheck::kernels;

// Per calling thread, like errno: Python calls from one thread, but nothing here needs a lock.
thread_local std::string last_error;

// Return codes: 0 done, 2 unusable input (bad name, shape, null pointer), 1 anything else.
constexpr int kOk = 0, kFailed = 1, kBadInput = 2;

struct BadInput : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// Runs f, turning exceptions into a return code and a message (the C boundary).
template <class F>
int guarded(const char* what, F&& f) {
  try {
    f();
    last_error.clear();
    return kOk;
  } catch (const BadInput& e) {
    last_error = std::string(what) + ": " + e.what();
    return kBadInput;
  } catch (const ropecheck::SpecError& e) {
    last_error = std::string(what) + ": " + e.what();
    return kBadInput;
  } catch (const std::invalid_argument& e) {  // rope_apply's shape checks
    last_error = std::string(what) + ": " + e.what();
    return kBadInput;
  } catch (const std::exception& e) {
    last_error = std::string(what) + ": " + e.what();
    return kFailed;
  } catch (...) {
    last_error = std::string(what) + ": unknown exception";
    return kFailed;
  }
}

void require(bool ok, const std::string& message) {
  if (!ok) throw BadInput(message);
}

// A preset name, or spec JSON text (reference/SPEC_FORMAT.md) when it starts with '{'.
ropecheck::RopeSpec rope_spec_from(std::string_view text) {
  ropecheck::EncodingSpec spec;
  if (!text.empty() && text.front() == '{') {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
      throw BadInput(std::string("spec is malformed JSON: ") + e.what());
    }
    spec = ropecheck::spec_from_json(j);
  } else {
    spec = ropecheck::load_preset(text);
  }
  require(spec.family == ropecheck::Family::rope, "spec '" + spec.name + "' is sinusoidal, not RoPE");
  return spec.rope;
}

}  // namespace

// Bumped when a signature below changes; the script checks it.
RC_SHIM_EXPORT int rc_shim_abi_version() { return 1; }

RC_SHIM_EXPORT const char* rc_shim_last_error() { return last_error.c_str(); }

// "avx512" or "portable": the path rope_apply takes by default here.
RC_SHIM_EXPORT const char* rc_shim_cpu_path() {
  static const std::string path(rk::cpu_path());
  return path.c_str();
}

// Builds a plan: spec = preset name or spec JSON text, recipe = its command-line name ("hf",
// "accurate", ...), seq_len < 0 = none given (make_rope_plan's nullopt). Writes the plan to *out
// (free it with rc_shim_plan_free). Returns 0, or 2 / 1 with rc_shim_last_error() set.
RC_SHIM_EXPORT int rc_shim_plan_new(const char* spec, const char* recipe, std::int64_t seq_len, void** out) {
  return guarded("rc_shim_plan_new", [&] {
    require(out != nullptr, "out is null");
    *out = nullptr;
    require(spec != nullptr && recipe != nullptr, "spec or recipe is null");
    const std::optional<rk::Recipe> r = rk::parse_recipe(recipe);
    require(r.has_value(), std::string("unknown recipe '") + recipe + "'");
    const std::optional<std::int64_t> len = seq_len < 0 ? std::nullopt : std::optional<std::int64_t>(seq_len);
    auto plan = std::make_unique<rk::RopePlan>(rk::make_rope_plan(rope_spec_from(spec), *r, len));
    *out = plan.release();
  });
}

RC_SHIM_EXPORT void rc_shim_plan_free(void* plan) { delete static_cast<rk::RopePlan*>(plan); }

// Rotates q [tokens, q_heads, head_dim] and k [tokens, k_heads, head_dim] (contiguous, both of
// `dtype`: "f32", "bf16", "f16" or "f64") in place, token t at positions[t]. k may be null (then
// k_heads is ignored). threads as KernelOptions::threads (0: OpenMP's default, 1: none).
RC_SHIM_EXPORT int rc_shim_rope_apply(const void* plan, const char* dtype, void* q, std::int64_t q_heads, void* k,
                                      std::int64_t k_heads, std::int64_t tokens, std::int64_t head_dim,
                                      const std::int64_t* positions, int threads) {
  return guarded("rc_shim_rope_apply", [&] {
    require(plan != nullptr, "plan is null");
    require(dtype != nullptr, "dtype is null");
    const std::optional<ropecheck::DType> dt = ropecheck::parse_dtype(dtype);
    require(dt.has_value(), std::string("unknown dtype '") + dtype + "' (f32, bf16, f16, f64)");
    require(q != nullptr && positions != nullptr, "q or positions is null");
    require(tokens >= 0 && q_heads >= 0 && head_dim >= 0 && (k == nullptr || k_heads >= 0),
            "negative tokens, heads or head_dim");
    require(threads >= 0, "threads is negative");
    const auto& p = *static_cast<const rk::RopePlan*>(plan);
    rk::PositionsView pos;
    pos.data = positions;
    pos.is_int64 = true;
    pos.tokens = tokens;
    const rk::TensorView qv = rk::TensorView::contiguous(q, *dt, tokens, q_heads, head_dim);
    rk::TensorView kv;  // data == nullptr: no k
    if (k != nullptr) kv = rk::TensorView::contiguous(k, *dt, tokens, k_heads, head_dim);
    rk::KernelOptions opts;
    opts.threads = threads;
    rk::rope_apply(p, pos, qv, qv, kv, kv, opts);
  });
}
