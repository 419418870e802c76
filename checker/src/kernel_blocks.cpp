// A kernel under test run one block of tokens at a time (kernel_blocks.hpp). The calls and their order
// are run_kernel()'s (kernel_run.cpp): per output dtype, rope_apply on q then on k, then rope_cos_sin;
// or sinusoidal; after the fused attention call of a set with an attention block.
#include "ropecheck/checker/kernel_blocks.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>

#include "attention_block.hpp"
#include "check_internal.hpp"
#include "kernel_stores.hpp"

namespace ropecheck::checker {

namespace kernel_blocks_detail {

// One kernel call per block: which entry point, for which dtype, and the outputs (indices into the
// produced tensors) it fills.
struct Call {
  enum class Entry { apply, table, pe } entry = Entry::apply;
  DType dtype = DType::f32;
  std::string input;              // apply: "q", "k" or (MLA) "k_pe"
  std::vector<std::size_t> outputs;
  bool failed = false;            // once failed, its outputs read as NaN and it is not called again
};

void fill_nan(std::vector<std::uint8_t>& b, DType d) {
  switch (d) {
    case DType::f64: {
      const double v = std::numeric_limits<double>::quiet_NaN();
      for (std::size_t i = 0; i + 8 <= b.size(); i += 8) std::memcpy(b.data() + i, &v, 8);
      return;
    }
    case DType::f32: {
      const float v = std::numeric_limits<float>::quiet_NaN();
      for (std::size_t i = 0; i + 4 <= b.size(); i += 4) std::memcpy(b.data() + i, &v, 4);
      return;
    }
    case DType::f16:
    case DType::bf16: {
      const std::uint16_t v = d == DType::f16 ? 0x7E00 : 0x7FC0;
      for (std::size_t i = 0; i + 2 <= b.size(); i += 2) std::memcpy(b.data() + i, &v, 2);
      return;
    }
  }
}

}  // namespace kernel_blocks_detail

using kernel_blocks_detail::Call;
using kernel_blocks_detail::fill_nan;

struct KernelBlocks::State {
  std::shared_ptr<kut::KernelUnderTest> kernel;
  const golden::GoldenSet* golden = nullptr;
  std::vector<CandidateTensor> tensors;
  std::vector<DType> dtypes;                   // per tensor
  std::vector<bool> whole_block;               // per tensor: an attention output or a store, computed once by probe()
  std::vector<std::vector<std::uint8_t>> out;  // per tensor: the current block's values
  std::vector<Call> calls;
  std::vector<std::string> notes;
  std::vector<KernelFailure> failures;
  std::string declined;  // the kernel declined the set: no tensors
  std::map<std::string, std::vector<std::string>> outputs_of;  // a call's problem -> its outputs, for finish()
  std::int64_t t0 = 0, t1 = 0;  // the current block
  std::int64_t t1_last = 0;     // the end of the tokens checked
  bool probe_pending = false;   // the first block was computed by prepare() and not read yet
  EncodingSpec key_spec;        // MLA: k_pe's problem, the rotary block alone (key_rope); else the set's spec

  // The key input: "k", or "k_pe" (no head axis) for an MLA set.
  std::string key() const {
    return golden->is_rope() && golden->spec().rope.key_layout == KeyLayout::k_pe ? "k_pe" : "k";
  }

  std::string problem(const std::string& outputs, const std::string& input, DType d) const {
    // "q_rot.f32: input q, 2048 tokens x 8 heads, f32 output, spec llama-3.1-8b": the whole set's problem,
    // whatever block is running (the messages of a failed call are one run's).
    const std::string spec_name = golden->spec().name.empty() ? std::string("(unnamed)") : golden->spec().name;
    return outputs + ": " + (input.empty() ? "" : "input " + input + ", ") + std::to_string(golden->tokens()) + " tokens" +
           (input.empty() ? "" : " x " + std::to_string(golden->heads()) + " heads") + ", " + std::string(to_string(d)) +
           " output, spec " + spec_name;
  }
  std::int64_t per_token(std::size_t i) const { return tensors[i].numel() / std::max<std::int64_t>(1, tensors[i].shape[0]); }
  void size_outputs(const std::vector<std::size_t>& which) {
    for (std::size_t i : which)
      out[i].assign(static_cast<std::size_t>((t1 - t0) * per_token(i)) * dtype_size(io::tensor_dtype(dtypes[i])), 0);
  }
  kut::Storage storage(std::size_t i) { return {dtypes[i], std::as_writable_bytes(std::span(out[i]))}; }
  kut::CallResult call(Call& c, const std::vector<Position>& pos);
  void probe(const kut::Capabilities& caps);
  void probe_attention(const kut::Capabilities& caps);
  void probe_stores();
  void add_output(const std::string& name, DType d);
};

void KernelBlocks::State::add_output(const std::string& name, DType d) {
  const golden::ManifestTensor* m = golden->find(name);
  if (!m) throw InputError("golden set " + sanitize(golden->dir().string()) + ": no tensor " + quote_name(name));
  tensors.push_back({name, io::tensor_dtype(d), m->shape});
  dtypes.push_back(d);
  out.emplace_back();
  whole_block.push_back(name.rfind("attention_out.", 0) == 0);
}

// The set's attention block (attention_outputs.hpp) through the fused entry point, once per dtype of the
// set the kernel declares: its inputs (the block's positions, q, k, v as f32, the manifest's parameters)
// as kut::RopeAttentionCall takes them, without scores. A kernel without the entry point leaves the
// outputs to the check's not tested, with a note saying why; unsupported is a note; failed a failure
// (its outputs NaN, so they fail too).
void KernelBlocks::State::probe_attention(const kut::Capabilities& caps) {
  if (attention_output_names(*golden).empty()) return;
  if (!caps.rope_attention) {
    notes.push_back("attention_out not checked (not tested): the kernel exports no fused RoPE + attention entry point "
                    "(ropecheck_rope_attention)");
    return;
  }
  const AttentionParams a = check_detail::block_params(*golden);
  const io::Tensor& tp = golden->tensor("attention_positions");
  std::vector<Position> pos(static_cast<std::size_t>(tp.numel()));
  for (std::size_t i = 0; i < pos.size(); ++i) {
    std::int64_t p;
    std::memcpy(&p, tp.data.data() + 8 * i, 8);
    pos[i] = Position::uniform(p);  // text tokens, as golden --attention writes them
  }
  const io::Tensor &q = golden->tensor("attention_q"), &k = golden->tensor("attention_k"), &v = golden->tensor("attention_v");
  for (const std::string& d : golden->dtypes()) {
    const std::optional<DType> dt = parse_dtype(d);
    const std::string name = "attention_out." + d;
    if (!dt || !golden->find(name)) continue;
    if (!caps.supports(*dt)) {
      notes.push_back(name + " skipped: the kernel does not support " + d + " output (UNSUPPORTED)");
      continue;
    }
    add_output(name, *dt);
    const std::size_t i = tensors.size() - 1;
    out[i].assign(static_cast<std::size_t>(tensors[i].numel()) * dtype_size(io::tensor_dtype(*dt)), 0);
    const std::string what = name + ": a block of " + std::to_string(pos.size()) + " tokens x " + std::to_string(a.group) +
                             " query heads, " + d + " output, spec " + golden->spec().name;
    outputs_of[what] = {name};
    kut::RopeAttentionCall c;
    c.problem = {&golden->spec(), golden->seq_len(), pos, what};
    c.attention = &a;
    c.q = {DType::f32, std::as_bytes(std::span(q.data))};
    c.k = {DType::f32, std::as_bytes(std::span(k.data))};
    c.v = {DType::f32, std::as_bytes(std::span(v.data))};
    c.out = storage(i);
    const kut::CallResult r = kernel->rope_attention(c);
    if (r.status == kut::CallResult::Status::unsupported) {
      notes.push_back(name + " skipped (UNSUPPORTED" + (r.message.empty() ? "" : ": " + r.message) + ")");
      tensors.pop_back(), dtypes.pop_back(), out.pop_back(), whole_block.pop_back();
    } else if (r.status == kut::CallResult::Status::failed) {
      failures.push_back({{name}, r.message});
      fill_nan(out[i], *dt);
    }
  }
}

// The set's quantized stores through the fused rope_quantize call (kernel_stores.hpp), once, on the whole
// golden inputs: a check of the whole set only (stores are not split by token; a shard leaves them not
// tested, as a file's stores under --shard are refused).
void KernelBlocks::State::probe_stores() {
  if (t0 != 0 || t1_last != golden->tokens()) {
    if (!store_outputs(*golden).empty())
      notes.push_back("quantized stores not checked (not tested): a shard of the set (they are checked whole)");
    return;
  }
  KernelStores s = run_kernel_stores(*kernel, *golden);
  for (std::string& n : s.notes) notes.push_back(std::move(n));
  for (KernelFailure& f : s.failures) failures.push_back(std::move(f));
  outputs_of.merge(s.outputs_of);
  for (io::Tensor& t : s.tensors) {
    tensors.push_back({t.name, t.dtype, t.shape});
    dtypes.push_back(DType::f32);  // unused: a whole-block tensor is never recomputed
    out.push_back(std::move(t.data));
    whole_block.push_back(true);
  }
}

// One call on the current block, its outputs zeroed first (run_kernel's NaN-free zeroed outputs).
kut::CallResult KernelBlocks::State::call(Call& c, const std::vector<Position>& pos) {
  size_outputs(c.outputs);
  std::vector<std::string> names;
  for (std::size_t i : c.outputs) names.push_back(tensors[i].name);
  const EncodingSpec& spec = golden->spec();
  const std::string dt(to_string(c.dtype));
  if (c.entry == Call::Entry::apply) {
    const std::string out_name = c.input + "_rot." + dt;
    const std::string what = problem(out_name, c.input, c.dtype);
    outputs_of[what] = names;
    const golden::GoldenSet::TensorRef x = golden->locate(c.input);
    // k_pe: one head of the key's width, rotated as the slice alone.
    const bool k_pe = c.input == "k_pe";
    const EncodingSpec& problem_spec = k_pe ? key_spec : spec;
    const int heads = k_pe ? 1 : golden->heads();
    const std::int64_t row = static_cast<std::int64_t>(heads) * problem_spec.rope.head_dim;
    std::vector<std::uint8_t> buffer;
    const std::span<const std::uint8_t> xb = x.reader->elements(x.index, t0 * row, t1 * row, buffer);
    kut::RopeApplyCall a;
    a.problem = {&problem_spec, golden->seq_len(), pos, what};
    a.input = c.input;
    a.heads = heads;
    a.x = {DType::f32, std::as_bytes(xb)};
    a.out = storage(c.outputs.at(0));
    const kut::CallResult r = kernel->rope_apply(a);
    x.reader->release(x.index, t0 * row, t1 * row);
    return r;
  }
  if (c.entry == Call::Entry::table) {
    const std::string what = problem("cos." + dt + " / sin." + dt, "", c.dtype);
    outputs_of[what] = names;
    kut::RopeTableCall a;
    a.problem = {&spec, golden->seq_len(), pos, what};
    a.cos = storage(c.outputs.at(0));
    a.sin = storage(c.outputs.at(1));
    return kernel->rope_cos_sin(a);
  }
  std::vector<std::int64_t> p(pos.size());
  for (std::size_t t = 0; t < pos.size(); ++t) p[t] = pos[t].t;
  const std::string what = problem("pe." + dt, "", c.dtype);
  outputs_of[what] = names;
  kut::SinusoidalCall a;
  a.spec = &spec;
  a.positions = p;
  a.what = what;
  a.out = storage(c.outputs.at(0));
  return kernel->sinusoidal(a);
}

// The first block: the fused attention call (a set with an attention block), then every call run_kernel
// makes, deciding what the kernel produces.
void KernelBlocks::State::probe(const kut::Capabilities& caps) {
  const std::string& who = kernel->info().name;
  std::vector<std::string> reasons;  // distinct unsupported reasons, for "declined"
  auto unsupported = [&](const std::string& note, const std::string& reason) {
    notes.push_back(note + " (UNSUPPORTED" + (reason.empty() ? "" : ": " + reason) + ")");
    const std::string r = reason.empty() ? "UNSUPPORTED without a reason" : reason;
    if (std::find(reasons.begin(), reasons.end(), r) == reasons.end()) reasons.push_back(r);
  };
  const std::string undeclared = "the kernel declares it does not support it (ropecheck_kernel_capabilities)";
  const std::vector<Position> pos = golden->positions(t0, t1);
  // Calls `c` on the first block; true when the kernel computed it (a failed call is listed and kept).
  auto run = [&](Call& c, kut::CallResult& r) {
    r = call(c, pos);
    if (r.status == kut::CallResult::Status::unsupported) return false;
    if (r.status == kut::CallResult::Status::failed) {
      std::vector<std::string> names;
      for (std::size_t i : c.outputs) names.push_back(tensors[i].name);
      failures.push_back({names, r.message});
      c.failed = true;
      for (std::size_t i : c.outputs) fill_nan(out[i], dtypes[i]);  // as on every later block
    }
    return true;
  };
  auto drop = [&](std::size_t n) {
    for (std::size_t k = 0; k < n; ++k) {
      tensors.pop_back();
      dtypes.pop_back();
      out.pop_back();
      whole_block.pop_back();
    }
  };
  if (golden->is_rope()) {
    if (!caps.rope_apply && !caps.rope_cos_sin) {
      declined = who + ": the golden set is RoPE but the kernel exports neither ropecheck_rope_apply nor "
                       "ropecheck_rope_cos_sin";
      return;
    }
    if (!caps.rope_apply) notes.push_back("q_rot / k_rot not checked: the kernel exports no ropecheck_rope_apply");
    if (!caps.rope_cos_sin) notes.push_back("cos / sin not checked: the kernel exports no ropecheck_rope_cos_sin");
  } else if (!caps.sinusoidal) {
    declined = who + ": the golden set is sinusoidal but the kernel does not export ropecheck_sinusoidal";
    return;
  }
  // The attention block first: its one call per dtype is then made whatever the rotation calls did (a
  // plugin that keeps failing is given up on).
  if (golden->is_rope()) probe_attention(caps);
  if (golden->is_rope()) probe_stores();
  std::vector<DType> set_dtypes;
  for (const std::string& d : golden->dtypes())
    if (const std::optional<DType> t = parse_dtype(d)) set_dtypes.push_back(*t);
  for (DType d : set_dtypes) {
    const std::string dt(to_string(d));
    const bool declared = caps.supports(d);
    kut::CallResult r;
    if (!golden->is_rope()) {
      const std::string out_name = "pe." + dt;
      if (!declared) {
        unsupported(out_name + " skipped: the kernel does not support " + dt + " output", undeclared);
        continue;
      }
      add_output(out_name, d);
      Call c{Call::Entry::pe, d, "", {tensors.size() - 1}};
      if (run(c, r)) {
        calls.push_back(std::move(c));
      } else {
        unsupported(out_name + " skipped: the kernel does not support " + dt + " output for this spec", r.message);
        drop(1);
      }
      continue;
    }
    const std::string k_rot = key() + "_rot." + dt;
    if (caps.rope_apply && !declared)
      unsupported("q_rot." + dt + ", " + k_rot + " skipped: the kernel does not support " + dt + " output", undeclared);
    if (caps.rope_apply && declared) {
      add_output("q_rot." + dt, d);
      add_output(k_rot, d);
      Call cq{Call::Entry::apply, d, "q", {tensors.size() - 2}}, ck{Call::Entry::apply, d, key(), {tensors.size() - 1}};
      if (!run(cq, r)) {
        unsupported("q_rot." + dt + ", " + k_rot + " skipped: the kernel does not support " + dt + " output for this spec",
                    r.message);
        drop(2);
      } else {
        if (!run(ck, r)) throw InputError(who + " answered UNSUPPORTED for " + k_rot + " after computing q_rot." + dt);
        calls.push_back(std::move(cq));
        calls.push_back(std::move(ck));
      }
    }
    if (caps.rope_cos_sin && !declared)
      unsupported("cos." + dt + ", sin." + dt + " skipped: the kernel does not support " + dt + " tables", undeclared);
    if (caps.rope_cos_sin && declared) {
      add_output("cos." + dt, d);
      add_output("sin." + dt, d);
      Call c{Call::Entry::table, d, "", {tensors.size() - 2, tensors.size() - 1}};
      if (run(c, r)) {
        calls.push_back(std::move(c));
      } else {
        unsupported("cos." + dt + ", sin." + dt + " skipped: the kernel does not support " + dt + " tables for this spec",
                    r.message);
        drop(2);
      }
    }
  }
  if (tensors.empty()) {
    std::string dts, why;
    for (DType d : set_dtypes) dts += (dts.empty() ? "" : ", ") + std::string(to_string(d));
    for (const std::string& x : reasons) why += (why.empty() ? "" : "; ") + x;
    declined = who + " answered UNSUPPORTED for every output dtype of the golden set (" + dts + "): " + why;
  }
}

KernelBlocks::KernelBlocks(std::shared_ptr<kut::KernelUnderTest> kernel) : s_(std::make_unique<State>()) {
  s_->kernel = std::move(kernel);
}
KernelBlocks::~KernelBlocks() = default;

void KernelBlocks::prepare(const golden::GoldenSet& golden, std::int64_t first, std::int64_t last, std::int64_t block_tokens) {
  s_->golden = &golden;
  s_->key_spec = golden.spec();
  if (golden.is_rope()) s_->key_spec.rope = key_rope(golden.spec().rope);
  s_->t0 = first;
  s_->t1_last = last;
  s_->t1 = std::min(last, first + std::max<std::int64_t>(1, block_tokens));
  s_->probe(s_->kernel->info().capabilities);
  s_->probe_pending = true;
}

const std::vector<CandidateTensor>& KernelBlocks::tensors() const { return s_->tensors; }
const std::vector<std::string>& KernelBlocks::notes() const { return s_->notes; }
std::string KernelBlocks::declined() const { return s_->declined; }

void KernelBlocks::finish() {
  const kut::RunEnd end = s_->kernel->finish();
  for (const std::string& n : end.notes) s_->notes.push_back(n);
  for (const kut::RunEnd::Late& l : end.failures) s_->failures.push_back({s_->outputs_of[l.what], l.message});
}
const std::vector<KernelFailure>& KernelBlocks::failures() const { return s_->failures; }

std::vector<std::string> KernelBlocks::golden_inputs() const {
  if (s_->golden != nullptr && !s_->golden->is_rope()) return {"positions"};
  std::vector<std::string> in = {"positions", "q", s_->golden != nullptr ? s_->key() : "k"};
  if (std::find(s_->whole_block.begin(), s_->whole_block.end(), true) != s_->whole_block.end())
    for (const char* n : {"attention_positions", "attention_q", "attention_k", "attention_v", "attention_sinks"})
      if (s_->golden->find(n)) in.emplace_back(n);
  return in;
}

void KernelBlocks::begin_block(std::int64_t t0, std::int64_t t1, const std::vector<std::size_t>& needed) {
  State& s = *s_;
  if (s.probe_pending && t0 == s.t0 && t1 == s.t1) {  // prepare() computed it
    s.probe_pending = false;
    return;
  }
  s.probe_pending = false;
  s.t0 = t0;
  s.t1 = t1;
  const std::vector<Position> pos = s.golden->positions(t0, t1);
  for (Call& c : s.calls) {
    if (std::none_of(c.outputs.begin(), c.outputs.end(),
                     [&](std::size_t i) { return std::find(needed.begin(), needed.end(), i) != needed.end(); }))
      continue;
    if (!c.failed) {
      const kut::CallResult r = s.call(c, pos);
      if (r.status == kut::CallResult::Status::unsupported)
        throw InputError(s.kernel->info().name + " answered UNSUPPORTED for " + s.tensors[c.outputs.front()].name +
                         " on tokens [" + std::to_string(t0) + ", " + std::to_string(t1) + ") after computing earlier tokens");
      if (r.status == kut::CallResult::Status::failed) {
        std::vector<std::string> names;
        for (std::size_t i : c.outputs) names.push_back(s.tensors[i].name);
        s.failures.push_back({names, r.message});
        c.failed = true;
      }
      if (!c.failed) continue;
    }
    s.size_outputs(c.outputs);
    for (std::size_t i : c.outputs) fill_nan(s.out[i], s.dtypes[i]);
  }
}

std::span<const std::uint8_t> KernelBlocks::elements(std::size_t i, std::int64_t e0, std::int64_t e1, std::vector<std::uint8_t>&) {
  const std::int64_t first = s_->whole_block[i] ? 0 : s_->t0 * s_->per_token(i);  // an attention output, a store: whole
  const std::size_t es = io::dtype_size(s_->tensors[i].dtype);
  if (e0 < first || (e1 - first) * static_cast<std::int64_t>(es) > static_cast<std::int64_t>(s_->out[i].size()))
    throw std::logic_error("KernelBlocks::elements: a range outside the current block of " + s_->tensors[i].name);
  return std::span<const std::uint8_t>(s_->out[i]).subspan(static_cast<std::size_t>(e0 - first) * es,
                                                           static_cast<std::size_t>(e1 - e0) * es);
}

std::vector<io::Tensor> KernelBlocks::whole(const golden::GoldenSet& golden) { return run_kernel(*s_->kernel, golden).tensors; }

}  // namespace ropecheck::checker
