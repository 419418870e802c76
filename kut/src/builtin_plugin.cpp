// ropecheck's own CPU kernels as a kernel plugin (libropecheck_builtin_kernels.so): every entry point
// of ropecheck/kernel_abi.h, answered by the built-in CPU source of kernels under test
// (builtin_sources.hpp), so that `--kernel LIB.so:RECIPE` computes exactly what `--kernel
// builtin:RECIPE` computes, and any ctypes / FFI client drives ropecheck's kernels through the one
// installed C contract.
//
// The fused entry point (ropecheck_rope_attention, revision 2) is the recipe's fused RoPE + attention
// (kernels/rope_attention.hpp), scores included; revision 3's ropecheck_rope_quantize and
// ropecheck_rope_append_kv are the recipe's rotation followed by kernels/rope_quantize.hpp's store and
// kernels/kv_append.hpp's append (the description read back through kut/abi_fused.hpp).
//
// Options (ropecheck_kernel_configure, kernel_abi.h revision 1): items separated by ':', each a recipe
// name (kernels/RECIPES.md), `threads=N` (0: OpenMP's default, 1: no threading) or `portable` (no
// AVX-512). Unconfigured: recipe accurate, OpenMP's default threads. No exception crosses the C
// boundary: a failure returns 2 with the reason in the problem's message.
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropecheck/core/spec_json.hpp"
#include "ropecheck/kernel_abi.h"
#include "ropecheck/kut/abi_fused.hpp"
#include "ropecheck/kut/builtin_sources.hpp"

namespace {

namespace k = ropecheck::kernels;
namespace kut = ropecheck::kut;
using ropecheck::DType;

constexpr int kFailed = 2;

struct Config {
  k::Recipe recipe = k::Recipe::accurate;
  k::KernelOptions options;
};

// One configuration at a time, as the ABI calls: one call after another, from one thread.
struct State {
  Config config;
  std::unique_ptr<kut::KernelUnderTest> kernel = kut::make_cpu_kernel(config.recipe, config.options);
  std::string name = kut::cpu_kernel_name(config.recipe, config.options);
  std::string spec_json;  // the last spec parsed, and what it parsed to
  ropecheck::EncodingSpec spec;
};

State& state() {
  static State s;
  return s;
}

void write_message(char* message, std::uint32_t capacity, const std::string& text) {
  if (message && capacity > 0) std::snprintf(message, capacity, "%s", text.c_str());
}

std::optional<DType> dtype_of(std::int32_t d) {
  switch (d) {
    case ROPECHECK_DTYPE_F64: return DType::f64;
    case ROPECHECK_DTYPE_F32: return DType::f32;
    case ROPECHECK_DTYPE_F16: return DType::f16;
    case ROPECHECK_DTYPE_BF16: return DType::bf16;
    default: return std::nullopt;
  }
}

const ropecheck::EncodingSpec& spec_of(const char* json) {
  State& s = state();
  if (s.spec_json != json) {
    s.spec = ropecheck::spec_from_json(nlohmann::json::parse(json));
    s.spec_json = json;
  }
  return s.spec;
}

// The call's answer as an ABI return code, its message in the problem's buffer.
int answer(const kut::CallResult& r, char* message, std::uint32_t capacity) {
  if (!r.message.empty()) write_message(message, capacity, r.message);
  switch (r.status) {
    case kut::CallResult::Status::ok: return ROPECHECK_OK;
    case kut::CallResult::Status::unsupported: return ROPECHECK_UNSUPPORTED;
    case kut::CallResult::Status::failed: return kFailed;
  }
  return kFailed;
}

// Runs f (which returns an ABI code), turning an exception into a failure with its message.
template <class F>
int guarded(char* message, std::uint32_t capacity, F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    write_message(message, capacity, e.what());
  } catch (...) {
    write_message(message, capacity, "unknown exception");
  }
  return kFailed;
}

std::size_t element_size(DType d) { return d == DType::f64 ? 8 : d == DType::f32 ? 4 : 2; }

// Positions [streams][tokens] as the kernel-under-test interface takes them, one per token.
std::vector<ropecheck::Position> positions_of(const std::int64_t* p, std::int64_t tokens, std::int32_t streams) {
  std::vector<ropecheck::Position> out(static_cast<std::size_t>(tokens));
  for (std::int64_t t = 0; t < tokens; ++t) {
    const std::int64_t pt = p[t];
    out[static_cast<std::size_t>(t)] = streams == 3 ? ropecheck::Position{pt, p[tokens + t], p[2 * tokens + t]}
                                                    : ropecheck::Position::uniform(pt);
  }
  return out;
}

// What both RoPE entry points take from their problem, as the kernel under test takes it (seq_len 0:
// none given). problem() points into `positions`.
struct RopeInputs {
  const ropecheck::EncodingSpec* spec = nullptr;
  std::vector<ropecheck::Position> positions;
  std::optional<std::int64_t> seq_len;
  kut::RopeProblem problem() const { return {spec, seq_len, positions, "kernel ABI call"}; }
};

template <class Problem>
RopeInputs rope_inputs(const Problem& p) {
  return {&spec_of(p.spec_json), positions_of(p.positions, p.tokens, p.position_streams),
          p.rope.seq_len > 0 ? std::optional<std::int64_t>(p.rope.seq_len) : std::nullopt};
}

// The ABI's attention parameters (revision 2) as the kernel under test takes them: a scale given as
// 1 / sqrt(scale_dim) stays that (the recipe forms it itself), a model's scale is taken as given.
ropecheck::AttentionParams attention_of(const ropecheck_attention_params& a) {
  ropecheck::AttentionParams out;
  out.group = a.group;
  out.value_dim = a.value_dim;
  if (a.scale_dim > 0)
    out.scale_dim = a.scale_dim;
  else
    out.scale = a.scale;
  if (a.softcap > 0) out.softcap = a.softcap;
  out.causal = a.causal != 0;
  out.window = a.window;
  if (a.sinks && a.group > 0) out.sinks.assign(a.sinks, a.sinks + a.group);
  return out;
}

// Parses the options; empty when fine, else the reason.
std::string parse_config(std::string_view text, Config& c) {
  while (!text.empty()) {
    const std::size_t end = text.find(':');
    const std::string_view item = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (item == "portable") {
      c.options.portable = true;
    } else if (item.starts_with("threads=")) {
      const std::string_view v = item.substr(8);
      int n = -1;
      const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
      if (ec != std::errc() || p != v.data() + v.size() || n < 0)
        return "threads must be a whole number >= 0, got '" + std::string(v) + "'";
      c.options.threads = n;
    } else if (const std::optional<k::Recipe> r = k::parse_recipe(item)) {
      c.recipe = *r;
    } else {
      std::string known;
      for (const k::RecipeInfo& i : k::recipes()) known += (known.empty() ? "" : ", ") + std::string(i.name);
      return "unknown option '" + std::string(item) + "' (a recipe: " + known + "; threads=N; portable)";
    }
  }
  return {};
}

}  // namespace

extern "C" {

ROPECHECK_KERNEL_EXPORT uint32_t ropecheck_kernel_abi_version(void) { return ROPECHECK_KERNEL_ABI_VERSION; }

ROPECHECK_KERNEL_EXPORT const char* ropecheck_kernel_name(void) { return state().name.c_str(); }

ROPECHECK_KERNEL_EXPORT uint64_t ropecheck_kernel_capabilities(void) {
  return ROPECHECK_CAP_NEGATIVE_POSITIONS | ROPECHECK_CAP_ATTENTION_SCORES | ROPECHECK_CAP_QK_NORM | ROPECHECK_CAP_MLA |
         ROPECHECK_CAP_OUT_F64 | ROPECHECK_CAP_OUT_F32 | ROPECHECK_CAP_OUT_F16 |
         ROPECHECK_CAP_OUT_BF16;
}

ROPECHECK_KERNEL_EXPORT int ropecheck_kernel_configure(const char* options, char* message, uint32_t message_capacity) {
  return guarded(message, message_capacity, [&] {
    Config c;
    if (const std::string why = parse_config(options ? options : "", c); !why.empty()) {
      write_message(message, message_capacity, why);
      return ROPECHECK_UNSUPPORTED;
    }
    State& s = state();
    s.kernel = kut::make_cpu_kernel(c.recipe, c.options);
    s.name = kut::cpu_kernel_name(c.recipe, c.options);
    s.config = c;
    return ROPECHECK_OK;
  });
}

ROPECHECK_KERNEL_EXPORT int ropecheck_rope_apply(const ropecheck_rope_problem* p) {
  return guarded(p->message, p->message_capacity, [&] {
    const std::optional<DType> out = dtype_of(p->out_dtype);
    if (!out) return ROPECHECK_UNSUPPORTED;
    const RopeInputs in = rope_inputs(*p);
    const auto n = static_cast<std::size_t>(p->tokens) * static_cast<std::size_t>(p->heads) *
                   static_cast<std::size_t>(p->rope.head_dim);
    kut::RopeApplyCall call;
    call.problem = in.problem();
    call.input = p->input_name ? p->input_name : "q";
    call.heads = p->heads;
    call.x = {DType::f32, std::as_bytes(std::span(p->x, n))};
    call.out = {*out, std::span(static_cast<std::byte*>(p->out), n * element_size(*out))};
    return answer(state().kernel->rope_apply(call), p->message, p->message_capacity);
  });
}

ROPECHECK_KERNEL_EXPORT int ropecheck_rope_cos_sin(const ropecheck_table_problem* p) {
  return guarded(p->message, p->message_capacity, [&] {
    const std::optional<DType> out = dtype_of(p->out_dtype);
    if (!out) return ROPECHECK_UNSUPPORTED;
    const RopeInputs in = rope_inputs(*p);
    const std::size_t bytes = static_cast<std::size_t>(p->tokens) * static_cast<std::size_t>(p->rope.pairs) * element_size(*out);
    kut::RopeTableCall call;
    call.problem = in.problem();
    call.cos = {*out, std::span(static_cast<std::byte*>(p->cos), bytes)};
    call.sin = {*out, std::span(static_cast<std::byte*>(p->sin), bytes)};
    return answer(state().kernel->rope_cos_sin(call), p->message, p->message_capacity);
  });
}

ROPECHECK_KERNEL_EXPORT int ropecheck_sinusoidal(const ropecheck_sinusoidal_problem* p) {
  return guarded(p->message, p->message_capacity, [&] {
    const std::optional<DType> out = dtype_of(p->out_dtype);
    if (!out) return ROPECHECK_UNSUPPORTED;
    const ropecheck::EncodingSpec& spec = spec_of(p->spec_json);
    const auto tokens = static_cast<std::size_t>(p->tokens);
    kut::SinusoidalCall call;
    call.spec = &spec;
    call.positions = std::span(p->positions, tokens);
    call.what = "kernel ABI call";
    call.out = {*out, std::span(static_cast<std::byte*>(p->out),
                                tokens * static_cast<std::size_t>(p->sinusoidal.d_model) * element_size(*out))};
    return answer(state().kernel->sinusoidal(call), p->message, p->message_capacity);
  });
}

ROPECHECK_KERNEL_EXPORT int ropecheck_rope_attention(const ropecheck_rope_attention_problem* p) {
  return guarded(p->message, p->message_capacity, [&] {
    const std::optional<DType> out = dtype_of(p->out_dtype);
    if (!out || p->attention.group < 1 || p->attention.value_dim < 1) return ROPECHECK_UNSUPPORTED;
    const RopeInputs in = rope_inputs(*p);
    const ropecheck::AttentionParams a = attention_of(p->attention);
    const auto T = static_cast<std::size_t>(p->tokens), G = static_cast<std::size_t>(a.group);
    const auto D = static_cast<std::size_t>(p->rope.head_dim), Dv = static_cast<std::size_t>(a.value_dim);
    const auto pairs = static_cast<std::size_t>(ropecheck::attention_score_count(a, p->tokens));
    kut::RopeAttentionCall call;
    call.problem = in.problem();
    call.attention = &a;
    call.q = {DType::f32, std::as_bytes(std::span(p->q, T * G * D))};
    call.k = {DType::f32, std::as_bytes(std::span(p->k, T * D))};
    call.v = {DType::f32, std::as_bytes(std::span(p->v, T * Dv))};
    call.out = {*out, std::span(static_cast<std::byte*>(p->out), T * G * Dv * element_size(*out))};
    if (p->scores) call.scores = {*out, std::span(static_cast<std::byte*>(p->scores), G * pairs * element_size(*out))};
    return answer(state().kernel->rope_attention(call), p->message, p->message_capacity);
  });
}

ROPECHECK_KERNEL_EXPORT int ropecheck_rope_quantize(const ropecheck_rope_quantize_problem* p) {
  return guarded(p->message, p->message_capacity, [&] {
    std::string why;
    const std::optional<ropecheck::quant::StoreSpec> store = kut::store_from_abi(p->store, why);
    if (!store) {
      write_message(p->message, p->message_capacity, why);
      return ROPECHECK_UNSUPPORTED;
    }
    const RopeInputs in = rope_inputs(*p);
    const auto n = static_cast<std::size_t>(p->tokens) * static_cast<std::size_t>(p->heads) *
                   static_cast<std::size_t>(p->rope.head_dim);
    auto bytes = [](void* b, std::uint64_t size) {
      return b ? std::span(static_cast<std::byte*>(b), static_cast<std::size_t>(size)) : std::span<std::byte>();
    };
    kut::RopeQuantizeCall call;
    call.problem = in.problem();
    call.input = p->input_name ? p->input_name : "q";
    call.heads = p->heads;
    call.x = {DType::f32, std::as_bytes(std::span(p->x, n))};
    call.store = &*store;
    call.codes = bytes(p->codes, p->codes_bytes);
    call.scales = bytes(p->scales, p->scales_bytes);
    call.biases = bytes(p->biases, p->biases_bytes);
    return answer(state().kernel->rope_quantize(call), p->message, p->message_capacity);
  });
}

ROPECHECK_KERNEL_EXPORT int ropecheck_rope_append_kv(const ropecheck_rope_append_kv_problem* p) {
  return guarded(p->message, p->message_capacity, [&] {
    const std::optional<DType> out = dtype_of(p->out_dtype);
    if (!out) return ROPECHECK_UNSUPPORTED;
    const ropecheck::kv::CacheSpec cache = kut::cache_from_abi(p->cache, p->tokens);
    const RopeInputs in = rope_inputs(*p);
    const auto n = static_cast<std::size_t>(p->tokens) * static_cast<std::size_t>(p->heads) *
                   static_cast<std::size_t>(p->rope.head_dim);
    const std::size_t cache_bytes = static_cast<std::size_t>(cache.slots()) * static_cast<std::size_t>(p->heads) *
                                    static_cast<std::size_t>(p->rope.head_dim) * element_size(*out);
    kut::KvAppendCall call;
    call.problem = in.problem();
    call.cache = &cache;
    call.heads = p->heads;
    call.k = {DType::f32, std::as_bytes(std::span(p->k, n))};
    if (p->v) call.v = {DType::f32, std::as_bytes(std::span(p->v, n))};
    call.k_cache = {*out, std::span(static_cast<std::byte*>(p->k_cache), cache_bytes)};
    if (p->v && p->v_cache) call.v_cache = {*out, std::span(static_cast<std::byte*>(p->v_cache), cache_bytes)};
    return answer(state().kernel->rope_append_kv(call), p->message, p->message_capacity);
  });
}

}  // extern "C"
