#include "ropecheck/checker/kernel_run.hpp"

#include <algorithm>
#include <cstddef>
#include <optional>

#include "ropecheck/io/detail/tensor_io.hpp"

namespace ropecheck::checker {
// The checker's vocabulary from the modules below it.
using golden::GoldenSet;
using golden::ManifestTensor;
using io::Tensor;
using io::TensorDType;
using io::shape_string;
using io::tensor_dtype;

namespace {

std::vector<float> f32_values(const Tensor& t) {
  std::vector<float> v(static_cast<std::size_t>(t.numel()));
  for (std::int64_t i = 0; i < t.numel(); ++i) v[static_cast<std::size_t>(i)] = static_cast<float>(t.value(i));
  return v;
}

kut::Storage storage_of(Tensor& t, DType d) { return {d, std::as_writable_bytes(std::span(t.data))}; }

}  // namespace

KernelRun run_kernel(kut::KernelUnderTest& k, const GoldenSet& golden) {
  const kut::Info& info = k.info();
  const kut::Capabilities& caps = info.capabilities;
  const std::string& who = info.name;
  KernelRun run;
  std::vector<std::string> reasons;  // distinct unsupported reasons, for the "no output" error
  auto unsupported = [&](const std::string& note, const std::string& reason) {
    run.notes.push_back(note + " (UNSUPPORTED" + (reason.empty() ? "" : ": " + reason) + ")");
    const std::string r = reason.empty() ? "UNSUPPORTED without a reason" : reason;
    if (std::find(reasons.begin(), reasons.end(), r) == reasons.end()) reasons.push_back(r);
  };
  const std::string undeclared = "the kernel declares it does not support it (ropecheck_kernel_capabilities)";

  std::vector<DType> dtypes;
  for (const std::string& d : golden.dtypes())
    if (const std::optional<DType> t = parse_dtype(d)) dtypes.push_back(*t);

  // A NaN-free zeroed output tensor shaped like the golden output `name`.
  auto output_like = [&](const std::string& name, DType d) {
    const ManifestTensor* m = golden.find(name);
    if (!m) throw InputError("golden set " + sanitize(golden.dir().string()) + ": no tensor " + quote_name(name));
    Tensor t{name, tensor_dtype(d), m->shape, {}};
    t.data.assign(static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype), 0);
    return t;
  };
  // The problem, for messages: "q_rot.f32: input q, 2048 tokens x 8 heads, f32 output, spec llama-3.1-8b".
  const std::string spec_name = golden.spec().name.empty() ? std::string("(unnamed)") : golden.spec().name;
  auto problem = [&](const std::string& outputs, const std::string& input, DType d) {
    return outputs + ": " + (input.empty() ? "" : "input " + input + ", ") + std::to_string(golden.tokens()) + " tokens" +
           (input.empty() ? "" : " x " + std::to_string(golden.heads()) + " heads") + ", " + std::string(to_string(d)) +
           " output, spec " + spec_name;
  };
  auto failed = [&](const kut::CallResult& c, std::vector<std::string> outputs) {
    if (c.status == kut::CallResult::Status::failed) run.failures.push_back({std::move(outputs), c.message});
  };

  const EncodingSpec& spec = golden.spec();
  const std::vector<Position>& positions = golden.positions();
  if (golden.is_rope()) {
    if (!caps.rope_apply && !caps.rope_cos_sin) {
      run.declined = who + ": the golden set is RoPE but the kernel exports neither ropecheck_rope_apply nor "
                           "ropecheck_rope_cos_sin";
      return run;
    }
    if (!caps.rope_apply) run.notes.push_back("q_rot / k_rot not checked: the kernel exports no ropecheck_rope_apply");
    if (!caps.rope_cos_sin) run.notes.push_back("cos / sin not checked: the kernel exports no ropecheck_rope_cos_sin");
    const std::vector<float> q = f32_values(golden.tensor("q")), kx = f32_values(golden.tensor("k"));
    for (DType d : dtypes) {
      const std::string dt(to_string(d));
      const bool declared = caps.supports(d);
      if (caps.rope_apply && !declared)
        unsupported("q_rot." + dt + ", k_rot." + dt + " skipped: the kernel does not support " + dt + " output", undeclared);
      if (caps.rope_apply && declared) {
        bool supported = true;
        std::vector<Tensor> got;
        for (const char* input : {"q", "k"}) {
          const std::string out_name = std::string(input) + "_rot." + dt;
          Tensor out = output_like(out_name, d);
          const std::vector<float>& x = input[0] == 'q' ? q : kx;
          const std::string what = problem(out_name, input, d);
          kut::RopeApplyCall call;
          call.problem = {&spec, golden.seq_len(), positions, what};
          call.input = input;
          call.heads = golden.heads();
          call.x = {DType::f32, std::as_bytes(std::span(x))};
          call.out = storage_of(out, d);
          const kut::CallResult c = k.rope_apply(call);
          if (c.status == kut::CallResult::Status::unsupported) {
            if (!got.empty())
              throw InputError(who + " answered UNSUPPORTED for " + out_name + " after computing " + got.front().name);
            unsupported("q_rot." + dt + ", k_rot." + dt + " skipped: the kernel does not support " + dt + " output for this spec",
                        c.message);
            supported = false;
            break;
          }
          failed(c, {out_name});
          validate(out);
          got.push_back(std::move(out));
        }
        if (supported)
          for (Tensor& t : got) run.tensors.push_back(std::move(t));
      }
      if (caps.rope_cos_sin && !declared)
        unsupported("cos." + dt + ", sin." + dt + " skipped: the kernel does not support " + dt + " tables", undeclared);
      if (caps.rope_cos_sin && declared) {
        Tensor co = output_like("cos." + dt, d), so = output_like("sin." + dt, d);
        const std::string what = problem("cos." + dt + " / sin." + dt, "", d);
        kut::RopeTableCall call;
        call.problem = {&spec, golden.seq_len(), positions, what};
        call.cos = storage_of(co, d);
        call.sin = storage_of(so, d);
        const kut::CallResult c = k.rope_cos_sin(call);
        if (c.status == kut::CallResult::Status::unsupported) {
          unsupported("cos." + dt + ", sin." + dt + " skipped: the kernel does not support " + dt + " tables for this spec",
                      c.message);
        } else {
          failed(c, {"cos." + dt, "sin." + dt});
          validate(co);
          validate(so);
          run.tensors.push_back(std::move(co));
          run.tensors.push_back(std::move(so));
        }
      }
    }
  } else {
    if (!caps.sinusoidal) {
      run.declined = who + ": the golden set is sinusoidal but the kernel does not export ropecheck_sinusoidal";
      return run;
    }
    std::vector<std::int64_t> pos(positions.size());
    for (std::size_t t = 0; t < positions.size(); ++t) pos[t] = positions[t].t;
    for (DType d : dtypes) {
      const std::string dt(to_string(d));
      const std::string out_name = "pe." + dt;
      if (!caps.supports(d)) {
        unsupported(out_name + " skipped: the kernel does not support " + dt + " output", undeclared);
        continue;
      }
      Tensor pe = output_like(out_name, d);
      const std::string what = problem(out_name, "", d);
      kut::SinusoidalCall call;
      call.spec = &spec;
      call.positions = pos;
      call.what = what;
      call.out = storage_of(pe, d);
      const kut::CallResult c = k.sinusoidal(call);
      if (c.status == kut::CallResult::Status::unsupported) {
        unsupported(out_name + " skipped: the kernel does not support " + dt + " output for this spec", c.message);
      } else {
        failed(c, {out_name});
        validate(pe);
        run.tensors.push_back(std::move(pe));
      }
    }
  }

  if (run.tensors.empty()) {
    std::string dts, why;
    for (DType d : dtypes) dts += (dts.empty() ? "" : ", ") + std::string(to_string(d));
    for (const std::string& r : reasons) why += (why.empty() ? "" : "; ") + r;
    run.declined = who + " answered UNSUPPORTED for every output dtype of the golden set (" + dts + "): " + why;
  }
  return run;
}

}  // namespace ropecheck::checker
