#include "ropecheck/golden/plugin.hpp"

#include <algorithm>
#include <optional>

#include "ropecheck/kernel_abi.h"
#include "ropecheck/reference/rope_reference.hpp"
#include "ropecheck/reference/rounding.hpp"
#include "ropecheck/reference/scalar.hpp"
#include "tensor_io_detail.hpp"

namespace ropecheck::golden {

namespace {

TensorDType tensor_dtype(DType d) {
  switch (d) {
    case DType::f64: return TensorDType::f64;
    case DType::f32: return TensorDType::f32;
    case DType::f16: return TensorDType::f16;
    case DType::bf16: return TensorDType::bf16;
  }
  return TensorDType::f64;
}

// What every call shares: the spec resolved once, and the inputs.
struct Inputs {
  std::string spec_json;
  std::vector<std::int64_t> positions;  // [streams][tokens]
  std::int32_t streams = 1;
  std::int64_t tokens = 0;
  std::vector<double> inv_freq, longrope_ext;
  ropecheck_rope_params rope{};
  ropecheck_sinusoidal_params sinusoidal{};
};

Inputs resolve(const GoldenSet& g) {
  Inputs in;
  in.spec_json = g.manifest().at("spec").dump();
  in.tokens = g.tokens();
  const Tensor& pos = g.tensor("positions");
  in.streams = pos.shape.size() == 2 ? static_cast<std::int32_t>(pos.shape[0]) : 1;
  in.positions.resize(static_cast<std::size_t>(pos.numel()));
  for (std::int64_t i = 0; i < pos.numel(); ++i) in.positions[static_cast<std::size_t>(i)] = pos.int_value(i);

  const EncodingSpec& spec = g.spec();
  if (g.is_rope()) {
    const RopeSpec& r = spec.rope;
    const RopeScaling& s = r.scaling;
    {
      // Inverse frequencies: exact (MPFR, 128 bits) rounded to binary64.
      ScopedPrecision prec(kMinWorkingBits);
      const RopeFrequencies<Real> f = rope_frequencies<Real>(r, g.seq_len());
      for (const Real& w : f.inv_freq) in.inv_freq.push_back(to_f64(w));
      if (s.type == ScalingType::longrope) in.longrope_ext = f.long_factors ? s.long_factor : s.short_factor;
    }
    ropecheck_rope_params& p = in.rope;
    p = abi_rope_params(r, g.seq_len().value_or(0));
    p.longrope_ext = nullptr;  // pointers are set per call (the vectors may move)
    p.inv_freq = nullptr;
    p.attention_factor = g.attention_factor();
  } else {
    const SinusoidalSpec& s = spec.sinusoidal;
    ropecheck_sinusoidal_params& p = in.sinusoidal;
    p.d_model = s.d_model;
    p.layout = s.layout == SinusoidalLayout::concatenated ? ROPECHECK_SINUSOIDAL_CONCATENATED : ROPECHECK_SINUSOIDAL_INTERLEAVED;
    p.frequencies = s.frequencies == SinusoidalFrequencies::half_dim_minus_one ? ROPECHECK_SINUSOIDAL_HALF_DIM_MINUS_ONE
                                                                               : ROPECHECK_SINUSOIDAL_VASWANI;
    p.frequency_count = sinusoidal_frequency_count(s);
    p.base = s.base;
    p.position_offset = s.position_offset;
  }
  return in;
}

std::vector<float> f32_values(const Tensor& t) {
  std::vector<float> v(static_cast<std::size_t>(t.numel()));
  for (std::int64_t i = 0; i < t.numel(); ++i) v[static_cast<std::size_t>(i)] = static_cast<float>(t.value(i));
  return v;
}

}  // namespace

std::int32_t abi_dtype(DType d) {
  switch (d) {
    case DType::f64: return ROPECHECK_DTYPE_F64;
    case DType::f32: return ROPECHECK_DTYPE_F32;
    case DType::f16: return ROPECHECK_DTYPE_F16;
    case DType::bf16: return ROPECHECK_DTYPE_BF16;
  }
  return -1;
}

std::int32_t abi_scaling(ScalingType t) {
  switch (t) {
    case ScalingType::none: return ROPECHECK_SCALING_NONE;
    case ScalingType::linear: return ROPECHECK_SCALING_LINEAR;
    case ScalingType::dynamic: return ROPECHECK_SCALING_DYNAMIC;
    case ScalingType::yarn: return ROPECHECK_SCALING_YARN;
    case ScalingType::llama3: return ROPECHECK_SCALING_LLAMA3;
    case ScalingType::longrope: return ROPECHECK_SCALING_LONGROPE;
    case ScalingType::proportional: return ROPECHECK_SCALING_PROPORTIONAL;
  }
  return -1;
}

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

KernelRun run_kernel_plugin(KernelPlugin& k, const GoldenSet& golden) {
  const std::string who = k.who();
  KernelRun run;
  const Inputs in = resolve(golden);
  std::vector<std::string> reasons;  // distinct UNSUPPORTED reasons, for the "no output" error
  auto unsupported = [&](const std::string& note, const std::string& reason) {
    run.notes.push_back(note + " (UNSUPPORTED" + (reason.empty() ? "" : ": " + reason) + ")");
    const std::string r = reason.empty() ? "UNSUPPORTED without a reason" : reason;
    if (std::find(reasons.begin(), reasons.end(), r) == reasons.end()) reasons.push_back(r);
  };
  const std::string undeclared = "the kernel declares it does not support it (ropecheck_kernel_capabilities)";

  std::vector<DType> dtypes;
  for (const std::string& d : golden.dtypes())
    if (const std::optional<DType> t = parse_dtype(d)) dtypes.push_back(*t);

  auto shape_of = [&](const std::string& name) {
    const ManifestTensor* m = golden.find(name);
    if (!m) throw TensorError("golden set " + detail::sanitize(golden.dir().string()) + ": no tensor " + detail::quote_name(name));
    return m->shape;
  };
  auto bytes_of = [](const std::vector<std::int64_t>& shape, DType d) {
    std::size_t n = dtype_size(tensor_dtype(d));
    for (std::int64_t e : shape) n *= static_cast<std::size_t>(e);
    return n;
  };
  auto tensor = [&](int output, const std::string& name, DType d, const std::vector<std::int64_t>& shape) {
    const std::span<const std::uint8_t> b = k.output(output);
    Tensor t{name, tensor_dtype(d), shape, std::vector<std::uint8_t>(b.begin(), b.end())};
    validate(t);
    return t;
  };
  // The problem, for messages: "q_rot.f32: input q, 2048 tokens x 8 heads, f32 output, spec llama-3.1-8b".
  const std::string spec_name = golden.spec().name.empty() ? std::string("(unnamed)") : golden.spec().name;
  auto problem = [&](const std::string& outputs, const std::string& input, DType d) {
    return outputs + ": " + (input.empty() ? "" : "input " + input + ", ") + std::to_string(in.tokens) + " tokens" +
           (input.empty() ? "" : " x " + std::to_string(golden.heads()) + " heads") + ", " + std::string(to_string(d)) +
           " output, spec " + spec_name;
  };

  RopeInputs ri;
  ri.spec_json = in.spec_json;
  ri.rope = in.rope;
  ri.inv_freq = in.inv_freq;
  ri.longrope_ext = in.longrope_ext;
  ri.tokens = in.tokens;
  ri.position_streams = in.streams;
  ri.positions = in.positions;

  if (golden.is_rope()) {
    if (!k.has_rope_apply() && !k.has_rope_cos_sin())
      throw TensorError(who + ": the golden set is RoPE but the kernel exports neither ropecheck_rope_apply nor "
                              "ropecheck_rope_cos_sin");
    if (!k.has_rope_apply()) run.notes.push_back("q_rot / k_rot not checked: the kernel exports no ropecheck_rope_apply");
    if (!k.has_rope_cos_sin()) run.notes.push_back("cos / sin not checked: the kernel exports no ropecheck_rope_cos_sin");
    const std::int32_t heads = golden.heads();
    for (DType d : dtypes) {
      const std::string dt(to_string(d));
      const bool declared = k.declares_dtype(abi_dtype(d));
      if (k.has_rope_apply() && !declared)
        unsupported("q_rot." + dt + ", k_rot." + dt + " skipped: the kernel does not support " + dt + " output", undeclared);
      if (k.has_rope_apply() && declared) {
        bool supported = true;
        std::vector<Tensor> got;
        for (const char* input : {"q", "k"}) {
          const std::string out_name = std::string(input) + "_rot." + dt;
          const std::vector<std::int64_t> shape = shape_of(out_name);
          const std::vector<float> x = f32_values(golden.tensor(input));
          const KernelCall c = k.rope_apply(ri, input, heads, x, abi_dtype(d), bytes_of(shape, d), problem(out_name, input, d));
          if (c.status == KernelCall::Status::unsupported) {
            if (!got.empty())
              throw TensorError(who + " answered UNSUPPORTED for " + out_name + " after computing " + got.front().name);
            unsupported("q_rot." + dt + ", k_rot." + dt + " skipped: the kernel does not support " + dt + " output for this spec",
                        c.message);
            supported = false;
            break;
          }
          if (c.status == KernelCall::Status::failed) run.failures.push_back({{out_name}, c.message});
          got.push_back(tensor(0, out_name, d, shape));
        }
        if (supported)
          for (Tensor& t : got) run.tensors.push_back(std::move(t));
      }
      if (k.has_rope_cos_sin() && !declared)
        unsupported("cos." + dt + ", sin." + dt + " skipped: the kernel does not support " + dt + " tables", undeclared);
      if (k.has_rope_cos_sin() && declared) {
        const std::vector<std::int64_t> shape = shape_of("cos." + dt);
        const KernelCall c = k.rope_cos_sin(ri, abi_dtype(d), bytes_of(shape, d), problem("cos." + dt + " / sin." + dt, "", d));
        if (c.status == KernelCall::Status::unsupported) {
          unsupported("cos." + dt + ", sin." + dt + " skipped: the kernel does not support " + dt + " tables for this spec",
                      c.message);
        } else {
          if (c.status == KernelCall::Status::failed) run.failures.push_back({{"cos." + dt, "sin." + dt}, c.message});
          run.tensors.push_back(tensor(0, "cos." + dt, d, shape));
          run.tensors.push_back(tensor(1, "sin." + dt, d, shape));
        }
      }
    }
  } else {
    if (!k.has_sinusoidal())
      throw TensorError(who + ": the golden set is sinusoidal but the kernel does not export ropecheck_sinusoidal");
    for (DType d : dtypes) {
      const std::string dt(to_string(d));
      const std::string out_name = "pe." + dt;
      if (!k.declares_dtype(abi_dtype(d))) {
        unsupported(out_name + " skipped: the kernel does not support " + dt + " output", undeclared);
        continue;
      }
      const std::vector<std::int64_t> shape = shape_of(out_name);
      const KernelCall c =
          k.sinusoidal(in.spec_json, in.sinusoidal, in.positions, abi_dtype(d), bytes_of(shape, d), problem(out_name, "", d));
      if (c.status == KernelCall::Status::unsupported) {
        unsupported(out_name + " skipped: the kernel does not support " + dt + " output for this spec", c.message);
      } else {
        if (c.status == KernelCall::Status::failed) run.failures.push_back({{out_name}, c.message});
        run.tensors.push_back(tensor(0, out_name, d, shape));
      }
    }
  }

  if (run.tensors.empty()) {
    std::string dts, why;
    for (DType d : dtypes) dts += (dts.empty() ? "" : ", ") + std::string(to_string(d));
    for (const std::string& r : reasons) why += (why.empty() ? "" : "; ") + r;
    throw TensorError(who + " produced no output to check: it answered UNSUPPORTED for every output dtype of the golden set (" +
                      dts + "): " + why);
  }
  return run;
}

}  // namespace ropecheck::golden
