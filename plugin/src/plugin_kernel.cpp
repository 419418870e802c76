#include "ropecheck/plugin/plugin_kernel.hpp"

#include <cstring>
#include <string>
#include <vector>

#include "ropecheck/core/spec_json.hpp"
#include "ropecheck/formulas/rope.hpp"
#include "ropecheck/reference/rounding.hpp"
#include "ropecheck/reference/scalar.hpp"
#include "ropecheck/formulas/sinusoidal.hpp"
#include "ropecheck/io/tensor.hpp"

namespace ropecheck::plugin {

// What every call on one spec and sequence length shares.
struct PluginKernel::Resolved {
  std::string key;  // spec JSON + seq_len
  std::string spec_json;
  std::optional<std::int64_t> seq_len;
  std::vector<double> inv_freq, longrope_ext;
  ropecheck_rope_params rope{};
  std::vector<std::int64_t> positions;  // [streams][tokens], per call
};

namespace {

constexpr std::size_t kMaxResolved = 256;  // bounded: a long props run generates many specs

std::int32_t streams_of(const EncodingSpec& spec) {
  return spec.family == Family::rope && spec.rope.mrope != MropeMode::none ? 3 : 1;
}

}  // namespace

PluginKernel::PluginKernel(KernelPlugin plugin) : plugin_(std::move(plugin)) {
  info_.name = plugin_.who();
  info_.description = "kernel plugin " + plugin_.path().string();
  info_.external = true;
  kut::Capabilities& c = info_.capabilities;
  c.rope_apply = plugin_.has_rope_apply();
  c.rope_cos_sin = plugin_.has_rope_cos_sin();
  c.sinusoidal = plugin_.has_sinusoidal();
  c.rope_attention = plugin_.has_rope_attention();
  c.rope_quantize = plugin_.has_rope_quantize();
  c.rope_append_kv = plugin_.has_rope_append_kv();
  c.attention_scores = c.rope_attention && (plugin_.capabilities() & ROPECHECK_CAP_ATTENTION_SCORES) != 0;
  for (DType d : {DType::f64, DType::f32, DType::f16, DType::bf16})
    if (plugin_.declares_dtype(abi_dtype(d))) c.output_dtypes.push_back(d);
  c.negative_positions = plugin_.negative_positions();
}

PluginKernel::~PluginKernel() = default;

PluginKernel::Resolved& PluginKernel::resolve(const EncodingSpec& spec, std::optional<std::int64_t> seq_len) {
  std::string json = spec_to_json(spec).dump();
  std::string key = json + "|" + (seq_len ? std::to_string(*seq_len) : std::string("-"));
  if (const auto it = resolved_.find(key); it != resolved_.end()) return *it->second;
  if (resolved_.size() >= kMaxResolved) resolved_.clear();
  auto r = std::make_unique<Resolved>();
  r->key = std::move(key);
  r->spec_json = std::move(json);
  r->seq_len = seq_len;
  if (spec.family == Family::rope) {
    const RopeSpec& rs = spec.rope;
    double att = 1;
    {
      // Inverse frequencies: exact (MPFR, 128 bits) rounded to binary64.
      ScopedPrecision prec(kMinWorkingBits);
      const RopeFrequencies<Real> f = rope_frequencies<Real>(rs, seq_len);
      for (const Real& w : f.inv_freq) r->inv_freq.push_back(to_f64(w));
      att = to_f64(f.attention_factor);
      if (rs.scaling.type == ScalingType::longrope) r->longrope_ext = f.long_factors ? rs.scaling.long_factor : rs.scaling.short_factor;
    }
    r->rope = abi_rope_params(rs, seq_len.value_or(0));
    r->rope.attention_factor = att;
  }
  Resolved& out = *r;
  resolved_.emplace(out.key, std::move(r));
  return out;
}

RopeInputs PluginKernel::rope_inputs(const kut::RopeProblem& problem) {
  const EncodingSpec& spec = *problem.spec;
  Resolved& r = resolve(spec, problem.seq_len);
  const std::span<const Position> pos = problem.positions;
  const auto T = static_cast<std::int64_t>(pos.size());
  const std::int32_t streams = streams_of(spec);
  r.positions.resize(static_cast<std::size_t>(streams * T));
  for (std::int64_t t = 0; t < T; ++t) {
    const Position& q = pos[static_cast<std::size_t>(t)];
    r.positions[static_cast<std::size_t>(t)] = q.t;
    if (streams == 3) r.positions[static_cast<std::size_t>(T + t)] = q.h, r.positions[static_cast<std::size_t>(2 * T + t)] = q.w;
  }
  RopeInputs in;
  in.spec_json = r.spec_json;
  in.rope = r.rope;
  in.inv_freq = r.inv_freq;
  in.longrope_ext = r.longrope_ext;
  in.tokens = T;
  in.position_streams = streams;
  in.positions = r.positions;
  return in;
}

kut::CallResult PluginKernel::finish(const KernelCall& c, std::initializer_list<kut::Storage> outs) {
  if (c.status == KernelCall::Status::unsupported) return {kut::CallResult::Status::unsupported, c.message};
  int i = 0;
  for (const kut::Storage& o : outs) {  // NaN after a failed call
    const std::span<const std::uint8_t> b = plugin_.output(i++);
    std::memcpy(o.bytes.data(), b.data(), std::min(b.size(), o.bytes.size()));
  }
  if (c.status == KernelCall::Status::failed) return {kut::CallResult::Status::failed, c.message};
  return {kut::CallResult::Status::ok, c.message};
}

kut::CallResult PluginKernel::rope_apply(const kut::RopeApplyCall& call) {
  const EncodingSpec& spec = *call.problem.spec;
  if (!info_.capabilities.rope_apply || spec.family != Family::rope)
    return {kut::CallResult::Status::unsupported, "the kernel exports no ropecheck_rope_apply for this spec"};
  if (call.x.dtype != DType::f32) return {kut::CallResult::Status::unsupported, "the kernel ABI takes f32 input"};
  if (const std::string why = undeclared_stage(spec.rope, call.input); !why.empty())
    return {kut::CallResult::Status::unsupported, why};
  const RopeInputs in = rope_inputs(call.problem);
  const std::span<const float> x(reinterpret_cast<const float*>(call.x.bytes.data()), call.x.count());
  const std::string input(call.input);
  const KernelCall c =
      plugin_.rope_apply(in, input.c_str(), call.heads, x, abi_dtype(call.out.dtype), call.out.bytes.size(), call.problem.what);
  return finish(c, {call.out});
}

kut::CallResult PluginKernel::rope_cos_sin(const kut::RopeTableCall& call) {
  const EncodingSpec& spec = *call.problem.spec;
  if (!info_.capabilities.rope_cos_sin || spec.family != Family::rope)
    return {kut::CallResult::Status::unsupported, "the kernel exports no ropecheck_rope_cos_sin for this spec"};
  const RopeInputs in = rope_inputs(call.problem);
  const KernelCall c = plugin_.rope_cos_sin(in, abi_dtype(call.cos.dtype), call.cos.bytes.size(), call.problem.what);
  return finish(c, {call.cos, call.sin});
}

kut::CallResult PluginKernel::sinusoidal(const kut::SinusoidalCall& call) {
  if (!info_.capabilities.sinusoidal || call.spec->family != Family::sinusoidal)
    return {kut::CallResult::Status::unsupported, "the kernel exports no ropecheck_sinusoidal for this spec"};
  const Resolved& r = resolve(*call.spec, std::nullopt);
  const KernelCall c = plugin_.sinusoidal(r.spec_json, abi_sinusoidal_params(call.spec->sinusoidal), call.positions,
                                          abi_dtype(call.out.dtype), call.out.bytes.size(), call.what);
  return finish(c, {call.out});
}

kut::CallResult PluginKernel::rope_attention(const kut::RopeAttentionCall& call) {
  const EncodingSpec& spec = *call.problem.spec;
  if (!info_.capabilities.rope_attention || spec.family != Family::rope || !call.attention)
    return {kut::CallResult::Status::unsupported, "the kernel exports no ropecheck_rope_attention for this spec"};
  if (call.q.dtype != DType::f32 || call.k.dtype != DType::f32 || call.v.dtype != DType::f32)
    return {kut::CallResult::Status::unsupported, "the kernel ABI takes f32 input"};
  auto floats = [](const kut::ConstStorage& s) {
    return std::span<const float>(reinterpret_cast<const float*>(s.bytes.data()), s.count());
  };
  const RopeInputs in = rope_inputs(call.problem);
  AttentionInputs a;
  a.params = abi_attention_params(*call.attention, spec.rope.head_dim);
  a.sinks = call.attention->sinks;
  a.q = floats(call.q), a.k = floats(call.k), a.v = floats(call.v);
  const KernelCall c = plugin_.rope_attention(in, a, abi_dtype(call.out.dtype), call.out.bytes.size(), call.scores.bytes.size(),
                                              call.problem.what);
  if (call.scores.bytes.empty()) return finish(c, {call.out});
  return finish(c, {call.out, call.scores});
}

std::unique_ptr<PluginKernel> load_plugin_kernel(const std::filesystem::path& library, const PluginClientOptions& options) {
  return std::make_unique<PluginKernel>(load_kernel_plugin(library, options));
}

// kernel_abi.h numbers the scalings in ScalingType's order (a contract it states; Kut.AbiScalingNumbersAreTheSpecOrder
// checks every ROPECHECK_SCALING_* against to_string), so a new scaling needs no branch here.
std::int32_t abi_scaling(ScalingType t) { return static_cast<std::int32_t>(t); }

std::int32_t abi_mrope(MropeMode m) {
  switch (m) {
    case MropeMode::none: return ROPECHECK_MROPE_NONE;
    case MropeMode::chunked: return ROPECHECK_MROPE_CHUNKED;
    case MropeMode::interleaved: return ROPECHECK_MROPE_INTERLEAVED;
  }
  return -1;
}

ropecheck_rope_params abi_rope_params(const RopeSpec& r, std::int64_t seq_len) {
  const RopeScaling& s = r.scaling;
  const int P = rope_pairs(r);
  ropecheck_rope_params p{};
  p.head_dim = r.head_dim;
  p.rotary_dim = r.rotary_dim;
  p.pairs = P;
  p.layout = r.layout == RopeLayout::interleaved ? ROPECHECK_LAYOUT_INTERLEAVED : ROPECHECK_LAYOUT_HALF_SPLIT;
  p.base = r.base;
  p.scaling_type = abi_scaling(s.type);
  p.mrope_mode = abi_mrope(r.mrope);
  for (std::size_t i = 0; i < 3; ++i) p.mrope_section[i] = r.mrope == MropeMode::none ? 0 : r.mrope_section[i];
  p.yarn_truncate = s.type == ScalingType::yarn ? (s.truncate ? 1 : 0) : 0;
  p.factor = s.type == ScalingType::none ? 1.0 : effective_factor(r);
  p.max_position_embeddings = r.max_position_embeddings;
  const bool has_orig = s.type == ScalingType::yarn || s.type == ScalingType::longrope || s.type == ScalingType::llama3;
  p.original_max_position_embeddings = has_orig ? effective_original_max_positions(r) : 0;
  p.seq_len = seq_len;
  const bool llama3 = s.type == ScalingType::llama3, yarn = s.type == ScalingType::yarn;
  p.low_freq_factor = llama3 ? s.low_freq_factor : 0.0;
  p.high_freq_factor = llama3 ? s.high_freq_factor : 0.0;
  p.beta_fast = yarn ? s.beta_fast : 0.0;
  p.beta_slow = yarn ? s.beta_slow : 0.0;
  p.mscale = yarn ? s.mscale.value_or(0.0) : 0.0;
  p.mscale_all_dim = yarn ? s.mscale_all_dim.value_or(0.0) : 0.0;
  p.longrope_ext = nullptr;  // pointers and the attention factor are the caller's
  p.inv_freq = nullptr;
  return p;
}

ropecheck_sinusoidal_params abi_sinusoidal_params(const SinusoidalSpec& s) {
  ropecheck_sinusoidal_params p{};
  p.d_model = s.d_model;
  p.layout = s.layout == SinusoidalLayout::concatenated ? ROPECHECK_SINUSOIDAL_CONCATENATED : ROPECHECK_SINUSOIDAL_INTERLEAVED;
  p.frequencies = s.frequencies == SinusoidalFrequencies::half_dim_minus_one ? ROPECHECK_SINUSOIDAL_HALF_DIM_MINUS_ONE
                                                                             : ROPECHECK_SINUSOIDAL_VASWANI;
  p.frequency_count = sinusoidal_frequency_count(s);
  p.base = s.base;
  p.position_offset = s.position_offset;
  return p;
}

ropecheck_attention_params abi_attention_params(const AttentionParams& a, int head_dim) {
  ropecheck_attention_params p{};
  p.group = a.group;
  p.value_dim = attention_value_dim(a, head_dim);
  p.scale_dim = attention_scale_dim(a, head_dim);
  if (a.scale) {
    p.scale = *a.scale;
  } else {
    ScopedPrecision prec(kMinWorkingBits);
    p.scale = to_f64(Real(1) / sqrt(Real(p.scale_dim)));
  }
  p.causal = a.causal ? 1 : 0;
  p.softcap = a.softcap.value_or(0.0);
  p.window = a.window;
  p.sinks = nullptr;
  return p;
}

}  // namespace ropecheck::plugin
