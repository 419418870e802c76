#include "ropecheck/checker/kernel_run.hpp"

#include <algorithm>
#include <cstddef>
#include <map>
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

namespace {

// One run of a kernel on a golden set's inputs: the calls, their notes and failures.
struct Runner {
  Runner(kut::KernelUnderTest& kernel, const GoldenSet& set) : k(kernel), golden(set) {}

  kut::KernelUnderTest& k;
  const GoldenSet& golden;
  const kut::Capabilities& caps = k.info().capabilities;
  const std::string& who = k.info().name;
  KernelRun run;
  std::vector<std::string> reasons;                            // distinct unsupported reasons, for "no output"
  std::map<std::string, std::vector<std::string>> outputs_of;  // a call's problem -> its outputs, for finish()
  std::vector<DType> dtypes;
  const std::string undeclared = "the kernel declares it does not support it (ropecheck_kernel_capabilities)";

  void unsupported(const std::string& note, const std::string& reason) {
    run.notes.push_back(note + " (UNSUPPORTED" + (reason.empty() ? "" : ": " + reason) + ")");
    const std::string r = reason.empty() ? "UNSUPPORTED without a reason" : reason;
    if (std::find(reasons.begin(), reasons.end(), r) == reasons.end()) reasons.push_back(r);
  }

  // A NaN-free zeroed output tensor shaped like the golden output `name`.
  Tensor output_like(const std::string& name, DType d) const {
    const ManifestTensor* m = golden.find(name);
    if (!m) throw InputError("golden set " + sanitize(golden.dir().string()) + ": no tensor " + quote_name(name));
    Tensor t{name, tensor_dtype(d), m->shape, {}};
    t.data.assign(static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype), 0);
    return t;
  }

  // The problem, for messages: "q_rot.f32: input q, 2048 tokens x 8 heads, f32 output, spec llama-3.1-8b";
  // remembered with the outputs it is for.
  std::string problem(const std::string& outputs, const std::string& input, DType d, std::vector<std::string> names) {
    const std::string spec_name = golden.spec().name.empty() ? std::string("(unnamed)") : golden.spec().name;
    std::string what = outputs + ": " + (input.empty() ? "" : "input " + input + ", ") + std::to_string(golden.tokens()) +
                       " tokens" + (input.empty() ? "" : " x " + std::to_string(golden.heads()) + " heads") + ", " +
                       std::string(to_string(d)) + " output, spec " + spec_name;
    outputs_of[what] = std::move(names);
    return what;
  }

  void failed(const kut::CallResult& c, std::vector<std::string> outputs) {
    if (c.status == kut::CallResult::Status::failed) run.failures.push_back({std::move(outputs), c.message});
  }

  // q_rot / k_rot in dtype d.
  void rope_apply(DType d, const std::vector<float>& q, const std::vector<float>& kx) {
    const std::string dt(to_string(d));
    std::vector<Tensor> got;
    for (const char* input : {"q", "k"}) {
      const std::string out_name = std::string(input) + "_rot." + dt;
      Tensor out = output_like(out_name, d);
      const std::vector<float>& x = input[0] == 'q' ? q : kx;
      const std::string what = problem(out_name, input, d, {out_name});
      kut::RopeApplyCall call;
      call.problem = {&golden.spec(), golden.seq_len(), golden.positions(), what};
      call.input = input;
      call.heads = golden.heads();
      call.x = {DType::f32, std::as_bytes(std::span(x))};
      call.out = storage_of(out, d);
      const kut::CallResult c = k.rope_apply(call);
      if (c.status == kut::CallResult::Status::unsupported) {
        if (!got.empty()) throw InputError(who + " answered UNSUPPORTED for " + out_name + " after computing " + got.front().name);
        unsupported("q_rot." + dt + ", k_rot." + dt + " skipped: the kernel does not support " + dt + " output for this spec",
                    c.message);
        return;
      }
      failed(c, {out_name});
      validate(out);
      got.push_back(std::move(out));
    }
    for (Tensor& t : got) run.tensors.push_back(std::move(t));
  }

  // cos / sin in dtype d.
  void rope_cos_sin(DType d) {
    const std::string dt(to_string(d));
    Tensor co = output_like("cos." + dt, d), so = output_like("sin." + dt, d);
    const std::string what = problem("cos." + dt + " / sin." + dt, "", d, {"cos." + dt, "sin." + dt});
    kut::RopeTableCall call;
    call.problem = {&golden.spec(), golden.seq_len(), golden.positions(), what};
    call.cos = storage_of(co, d);
    call.sin = storage_of(so, d);
    const kut::CallResult c = k.rope_cos_sin(call);
    if (c.status == kut::CallResult::Status::unsupported) {
      unsupported("cos." + dt + ", sin." + dt + " skipped: the kernel does not support " + dt + " tables for this spec", c.message);
      return;
    }
    failed(c, {"cos." + dt, "sin." + dt});
    validate(co);
    validate(so);
    run.tensors.push_back(std::move(co));
    run.tensors.push_back(std::move(so));
  }

  void rope() {
    if (!caps.rope_apply && !caps.rope_cos_sin)
      throw InputError(who + ": the golden set is RoPE but the kernel exports neither ropecheck_rope_apply nor "
                              "ropecheck_rope_cos_sin");
    if (!caps.rope_apply) run.notes.push_back("q_rot / k_rot not checked: the kernel exports no ropecheck_rope_apply");
    if (!caps.rope_cos_sin) run.notes.push_back("cos / sin not checked: the kernel exports no ropecheck_rope_cos_sin");
    const std::vector<float> q = f32_values(golden.tensor("q")), kx = f32_values(golden.tensor("k"));
    for (DType d : dtypes) {
      const std::string dt(to_string(d));
      const bool declared = caps.supports(d);
      if (caps.rope_apply && !declared)
        unsupported("q_rot." + dt + ", k_rot." + dt + " skipped: the kernel does not support " + dt + " output", undeclared);
      if (caps.rope_apply && declared) rope_apply(d, q, kx);
      if (caps.rope_cos_sin && !declared)
        unsupported("cos." + dt + ", sin." + dt + " skipped: the kernel does not support " + dt + " tables", undeclared);
      if (caps.rope_cos_sin && declared) rope_cos_sin(d);
    }
  }

  void sinusoidal() {
    if (!caps.sinusoidal)
      throw InputError(who + ": the golden set is sinusoidal but the kernel does not export ropecheck_sinusoidal");
    const std::vector<Position>& positions = golden.positions();
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
      const std::string what = problem(out_name, "", d, {out_name});
      kut::SinusoidalCall call;
      call.spec = &golden.spec();
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

  // The run's end (a plugin's host stopped): an output changed after its call returned fails that call.
  void finish() {
    const kut::RunEnd end = k.finish();
    for (const std::string& n : end.notes) run.notes.push_back(n);
    for (const kut::RunEnd::Late& l : end.failures) run.failures.push_back({outputs_of[l.what], l.message});
    if (!run.tensors.empty()) return;
    std::string dts, why;
    for (DType d : dtypes) dts += (dts.empty() ? "" : ", ") + std::string(to_string(d));
    for (const std::string& r : reasons) why += (why.empty() ? "" : "; ") + r;
    throw InputError(who + " produced no output to check: it answered UNSUPPORTED for every output dtype of the golden set (" +
                      dts + "): " + why);
  }
};

}  // namespace

KernelRun run_kernel(kut::KernelUnderTest& k, const GoldenSet& golden) {
  Runner r(k, golden);
  for (const std::string& d : golden.dtypes())
    if (const std::optional<DType> t = parse_dtype(d)) r.dtypes.push_back(*t);
  if (golden.is_rope())
    r.rope();
  else
    r.sinusoidal();
  r.finish();
  return std::move(r.run);
}

}  // namespace ropecheck::checker
