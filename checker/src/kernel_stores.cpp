#include "kernel_stores.hpp"

#include <algorithm>

#include "ropecheck/checker/stores.hpp"

namespace ropecheck::checker {

KernelStores run_kernel_stores(kut::KernelUnderTest& kernel, const golden::GoldenSet& golden) {
  KernelStores r;
  const std::vector<std::string> stores = store_outputs(golden);
  if (stores.empty()) return r;
  if (!kernel.info().capabilities.rope_quantize) {
    r.notes.push_back("quantized stores not checked (not tested): the kernel exports no fused RoPE + quantized store "
                      "entry point (ropecheck_rope_quantize)");
    return r;
  }
  const std::vector<Position> pos = golden.positions(0, golden.tokens());
  const std::string spec_name = golden.spec().name.empty() ? std::string("(unnamed)") : golden.spec().name;
  for (const std::string& name : stores) {
    const std::string input = name.substr(0, name.find('_'));  // "q_rot.e4m3fn" -> "q"
    const quant::StoreSpec spec = store_spec(golden, name);
    const io::Tensor& x = golden.tensor(input);
    auto tensor = [&](const std::string& n) {
      const golden::ManifestTensor& m = *golden.find(n);
      std::size_t bytes = io::dtype_size(m.dtype);
      for (std::int64_t d : m.shape) bytes *= static_cast<std::size_t>(d);
      return io::Tensor{n, m.dtype, m.shape, std::vector<std::uint8_t>(bytes)};
    };
    std::vector<io::Tensor> out = {tensor(name)};
    for (const std::string& suffix : store_companions(golden, name)) out.push_back(tensor(name + suffix));
    const std::string what = name + ": input " + input + ", " + std::to_string(golden.tokens()) + " tokens x " +
                             std::to_string(golden.heads()) + " heads, store " + spec.name() + ", spec " + spec_name;
    r.outputs_of[what] = {name};
    kut::RopeQuantizeCall c;
    c.problem = {&golden.spec(), golden.seq_len(), pos, what};
    c.input = input;
    c.heads = golden.heads();
    c.x = {DType::f32, std::as_bytes(std::span(x.data))};
    c.store = &spec;
    c.codes = std::as_writable_bytes(std::span(out[0].data));
    for (std::size_t i = 1; i < out.size(); ++i)
      (out[i].name.ends_with(".biases") ? c.biases : c.scales) = std::as_writable_bytes(std::span(out[i].data));
    const kut::CallResult res = kernel.rope_quantize(c);
    if (res.status == kut::CallResult::Status::unsupported) {
      r.notes.push_back(name + " not checked (not tested): the kernel answered UNSUPPORTED" +
                        (res.message.empty() ? "" : ": " + res.message));
      continue;
    }
    if (res.status == kut::CallResult::Status::failed) {
      r.failures.push_back({{name}, res.message});
      for (io::Tensor& t : out) std::fill(t.data.begin(), t.data.end(), std::uint8_t{0xFF});
    }
    for (io::Tensor& t : out) r.tensors.push_back(std::move(t));
  }
  return r;
}

}  // namespace ropecheck::checker
