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

const char* const kUndeclared = "the kernel declares it does not support it (ropecheck_kernel_capabilities)";

// One run_kernel: the kernel, the set, what was computed, and the notes and reasons on the way.
class Runner {
 public:
  Runner(kut::KernelUnderTest& k, const GoldenSet& g) : k_(k), g_(g), caps_(k.info().capabilities), who_(k.info().name) {
    for (const std::string& d : g.dtypes())
      if (const std::optional<DType> t = parse_dtype(d)) dtypes_.push_back(*t);
  }
  KernelRun rope();
  KernelRun sinusoidal();

 private:
  void rope_apply(DType d, const std::vector<float>& q, const std::vector<float>& kx);
  void rope_tables(DType d);
  KernelRun finish();

  // A dtype skipped: the note, and the kernel's reason for "declined" when nothing is computed.
  void unsupported(const std::string& note, const std::string& reason) {
    run_.notes.push_back(note + " (UNSUPPORTED" + (reason.empty() ? "" : ": " + reason) + ")");
    const std::string r = reason.empty() ? "UNSUPPORTED without a reason" : reason;
    if (std::find(reasons_.begin(), reasons_.end(), r) == reasons_.end()) reasons_.push_back(r);
  }
  // A NaN-free zeroed output tensor shaped like the golden output `name`.
  Tensor output_like(const std::string& name, DType d) const {
    const ManifestTensor* m = g_.find(name);
    if (!m) throw InputError("golden set " + sanitize(g_.dir().string()) + ": no tensor " + quote_name(name));
    return io::make_zeros(name, tensor_dtype(d), m->shape);
  }
  // The problem, for messages: "q_rot.f32: input q, 2048 tokens x 8 heads, f32 output, spec llama-3.1-8b";
  // remembered with the outputs it is for, so a late write reported by finish() fails the right outputs.
  std::string problem(const std::string& outputs, const std::string& input, DType d, std::vector<std::string> names) {
    const std::string spec_name = g_.spec().name.empty() ? std::string("(unnamed)") : g_.spec().name;
    std::string what = outputs + ": " + (input.empty() ? "" : "input " + input + ", ") + std::to_string(g_.tokens()) + " tokens" +
           (input.empty() ? "" : " x " + std::to_string(g_.heads()) + " heads") + ", " + std::string(to_string(d)) +
           " output, spec " + spec_name;
    outputs_of_[what] = std::move(names);
    return what;
  }
  void failed(const kut::CallResult& c, std::vector<std::string> outputs) {
    if (c.status == kut::CallResult::Status::failed) run_.failures.push_back({std::move(outputs), c.message});
  }

  kut::KernelUnderTest& k_;
  const GoldenSet& g_;
  const kut::Capabilities& caps_;
  const std::string& who_;
  std::vector<DType> dtypes_;
  KernelRun run_;
  std::vector<std::string> reasons_;                            // distinct unsupported reasons, for "declined"
  std::map<std::string, std::vector<std::string>> outputs_of_;  // a call's problem -> its outputs, for finish()
};

void Runner::rope_apply(DType d, const std::vector<float>& q, const std::vector<float>& kx) {
  const std::string dt(to_string(d));
  std::vector<Tensor> got;
  for (const char* input : {"q", "k"}) {
    const std::string out_name = std::string(input) + "_rot." + dt;
    Tensor out = output_like(out_name, d);
    const std::vector<float>& x = input[0] == 'q' ? q : kx;
    const std::string what = problem(out_name, input, d, {out_name});
    kut::RopeApplyCall call;
    call.problem = {&g_.spec(), g_.seq_len(), g_.positions(), what};
    call.input = input;
    call.heads = g_.heads();
    call.x = {DType::f32, std::as_bytes(std::span(x))};
    call.out = storage_of(out, d);
    const kut::CallResult c = k_.rope_apply(call);
    if (c.status == kut::CallResult::Status::unsupported) {
      if (!got.empty()) throw InputError(who_ + " answered UNSUPPORTED for " + out_name + " after computing " + got.front().name);
      unsupported("q_rot." + dt + ", k_rot." + dt + " skipped: the kernel does not support " + dt + " output for this spec",
                  c.message);
      return;
    }
    failed(c, {out_name});
    validate(out);
    got.push_back(std::move(out));
  }
  for (Tensor& t : got) run_.tensors.push_back(std::move(t));
}

void Runner::rope_tables(DType d) {
  const std::string dt(to_string(d));
  Tensor co = output_like("cos." + dt, d), so = output_like("sin." + dt, d);
  const std::string what = problem("cos." + dt + " / sin." + dt, "", d, {"cos." + dt, "sin." + dt});
  kut::RopeTableCall call;
  call.problem = {&g_.spec(), g_.seq_len(), g_.positions(), what};
  call.cos = storage_of(co, d);
  call.sin = storage_of(so, d);
  const kut::CallResult c = k_.rope_cos_sin(call);
  if (c.status == kut::CallResult::Status::unsupported) {
    unsupported("cos." + dt + ", sin." + dt + " skipped: the kernel does not support " + dt + " tables for this spec", c.message);
    return;
  }
  failed(c, {"cos." + dt, "sin." + dt});
  validate(co);
  validate(so);
  run_.tensors.push_back(std::move(co));
  run_.tensors.push_back(std::move(so));
}

KernelRun Runner::rope() {
  if (!caps_.rope_apply && !caps_.rope_cos_sin) {
    run_.declined = who_ + ": the golden set is RoPE but the kernel exports neither ropecheck_rope_apply nor "
                           "ropecheck_rope_cos_sin";
    return run_;
  }
  if (!caps_.rope_apply) run_.notes.push_back("q_rot / k_rot not checked: the kernel exports no ropecheck_rope_apply");
  if (!caps_.rope_cos_sin) run_.notes.push_back("cos / sin not checked: the kernel exports no ropecheck_rope_cos_sin");
  const std::vector<float> q = f32_values(g_.tensor("q")), kx = f32_values(g_.tensor("k"));
  for (DType d : dtypes_) {
    const std::string dt(to_string(d));
    const bool declared = caps_.supports(d);
    if (caps_.rope_apply && !declared)
      unsupported("q_rot." + dt + ", k_rot." + dt + " skipped: the kernel does not support " + dt + " output", kUndeclared);
    if (caps_.rope_apply && declared) rope_apply(d, q, kx);
    if (caps_.rope_cos_sin && !declared)
      unsupported("cos." + dt + ", sin." + dt + " skipped: the kernel does not support " + dt + " tables", kUndeclared);
    if (caps_.rope_cos_sin && declared) rope_tables(d);
  }
  return finish();
}

KernelRun Runner::sinusoidal() {
  if (!caps_.sinusoidal) {
    run_.declined = who_ + ": the golden set is sinusoidal but the kernel does not export ropecheck_sinusoidal";
    return run_;
  }
  const std::vector<Position>& positions = g_.positions();
  std::vector<std::int64_t> pos(positions.size());
  for (std::size_t t = 0; t < positions.size(); ++t) pos[t] = positions[t].t;
  for (DType d : dtypes_) {
    const std::string dt(to_string(d));
    const std::string out_name = "pe." + dt;
    if (!caps_.supports(d)) {
      unsupported(out_name + " skipped: the kernel does not support " + dt + " output", kUndeclared);
      continue;
    }
    Tensor pe = output_like(out_name, d);
    const std::string what = problem(out_name, "", d, {out_name});
    kut::SinusoidalCall call;
    call.spec = &g_.spec();
    call.positions = pos;
    call.what = what;
    call.out = storage_of(pe, d);
    const kut::CallResult c = k_.sinusoidal(call);
    if (c.status == kut::CallResult::Status::unsupported) {
      unsupported(out_name + " skipped: the kernel does not support " + dt + " output for this spec", c.message);
      continue;
    }
    failed(c, {out_name});
    validate(pe);
    run_.tensors.push_back(std::move(pe));
  }
  return finish();
}

// The run's end (a plugin's host stopped): an output changed after its call returned fails that call.
// Nothing computed: the kernel declined the set, with every reason it gave.
KernelRun Runner::finish() {
  const kut::RunEnd end = k_.finish();
  for (const std::string& n : end.notes) run_.notes.push_back(n);
  for (const kut::RunEnd::Late& l : end.failures) run_.failures.push_back({outputs_of_[l.what], l.message});
  if (run_.tensors.empty()) {
    std::string dts, why;
    for (DType d : dtypes_) dts += (dts.empty() ? "" : ", ") + std::string(to_string(d));
    for (const std::string& r : reasons_) why += (why.empty() ? "" : "; ") + r;
    run_.declined = who_ + " answered UNSUPPORTED for every output dtype of the golden set (" + dts + "): " + why;
  }
  return std::move(run_);
}

}  // namespace

KernelRun run_kernel(kut::KernelUnderTest& k, const GoldenSet& golden) {
  Runner r(k, golden);
  return golden.is_rope() ? r.rope() : r.sinusoidal();
}

}  // namespace ropecheck::checker
