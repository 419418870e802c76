#include "ropecheck/golden/plugin_target.hpp"

#include <dlfcn.h>

#include <cstring>
#include <string>
#include <vector>

#include "ropecheck/golden/plugin.hpp"
#include "ropecheck/golden/tensor.hpp"
#include "ropecheck/kernel_abi.h"
#include "ropecheck/reference/rope_reference.hpp"
#include "ropecheck/reference/rounding.hpp"
#include "ropecheck/reference/sinusoidal_reference.hpp"
#include "ropecheck/reference/spec_json.hpp"

namespace ropecheck::golden {
namespace {




class PluginTarget final : public props::Target {
 public:
  PluginTarget(KernelPlugin plugin, void* handle, props::AccuracyClass accuracy, DType dtype)
      : plugin_(std::move(plugin)), handle_(handle) {
    info_.name = "plugin:" + plugin_.name();
    info_.description = "kernel plugin " + plugin_.path().string();
    info_.accuracy = accuracy;
    info_.dtype = dtype;
    info_.negative_positions = false;
    rope_ = reinterpret_cast<ropecheck_rope_apply_fn>(::dlsym(handle_, "ropecheck_rope_apply"));
    sin_ = reinterpret_cast<ropecheck_sinusoidal_fn>(::dlsym(handle_, "ropecheck_sinusoidal"));
  }
  ~PluginTarget() override {
    if (handle_) ::dlclose(handle_);
  }
  PluginTarget(const PluginTarget&) = delete;
  PluginTarget& operator=(const PluginTarget&) = delete;

  const props::TargetInfo& info() const override { return info_; }

  bool rope_apply(const EncodingSpec& spec, std::span<const Position> positions, int heads, std::span<const double> x,
                  std::span<double> out) override {
    return rope_apply_input("q", spec, positions, heads, x, out);
  }

  // Every ABI output dtype: the kernel answers UNSUPPORTED for those it does not implement.
  std::unique_ptr<props::Target> with_output(DType dtype) override {
    return make_plugin_target(plugin_.path(), info_.accuracy, dtype);
  }

  bool rope_apply_input(std::string_view input, const EncodingSpec& spec, std::span<const Position> positions,
                        int heads, std::span<const double> x, std::span<double> out) override {
    if (!rope_ || spec.family != Family::rope) return false;
    const RopeSpec& r = spec.rope;
    const RopeScaling& s = r.scaling;
    std::vector<double> inv;
    std::vector<double> ext;
    double att = 1;
    {
      ScopedPrecision prec(kMinWorkingBits);
      const RopeFrequencies<Real> f = rope_frequencies<Real>(r);
      for (const Real& w : f.inv_freq) inv.push_back(to_f64(w));
      att = to_f64(f.attention_factor);
      if (s.type == ScalingType::longrope) ext = f.long_factors ? s.long_factor : s.short_factor;
    }
    // seq_len 0: the suite resolves frequencies without a run-time length (dynamic at
    // max_position_embeddings, longrope short factors), and tells the kernel the same.
    ropecheck_rope_params p = abi_rope_params(r, 0);
    p.longrope_ext = ext.empty() ? nullptr : ext.data();
    p.inv_freq = inv.data();
    p.attention_factor = att;

    const std::string json = spec_to_json(spec).dump();
    const auto T = static_cast<std::int64_t>(positions.size());
    const std::int32_t streams = r.mrope == MropeMode::none ? 1 : 3;
    std::vector<std::int64_t> pos(static_cast<std::size_t>(streams * T));
    for (std::int64_t t = 0; t < T; ++t) {
      const Position& q = positions[static_cast<std::size_t>(t)];
      pos[static_cast<std::size_t>(t)] = q.t;
      if (streams == 3) pos[static_cast<std::size_t>(T + t)] = q.h, pos[static_cast<std::size_t>(2 * T + t)] = q.w;
    }
    std::vector<float> xf(x.begin(), x.end());
    const std::size_t esize = static_cast<std::size_t>(format_info(info_.dtype).storage_bits / 8);
    std::vector<unsigned char> buf(xf.size() * esize);
    char message[512] = {0};
    ropecheck_rope_problem prob{};
    prob.abi_version = ROPECHECK_KERNEL_ABI_VERSION;
    prob.out_dtype = abi_dtype(info_.dtype);
    prob.spec_json = json.c_str();
    prob.rope = p;
    const std::string input_name(input);  // "q" or "k": the kernel may have separate paths
    prob.input_name = input_name.c_str();
    prob.tokens = T;
    prob.heads = heads;
    prob.position_streams = streams;
    prob.positions = pos.data();
    prob.x = xf.data();
    prob.out = buf.data();
    prob.message = message;
    prob.message_capacity = sizeof message;
    const int rc = rope_(&prob);
    if (rc == ROPECHECK_UNSUPPORTED) return false;
    if (rc != ROPECHECK_OK)
      throw TensorError("kernel '" + plugin_.name() + "': ropecheck_rope_apply failed with code " + std::to_string(rc) +
                        (message[0] ? std::string(" (") + message + ")" : std::string()));
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = load_element(buf.data() + i * esize, info_.dtype);
    return true;
  }

  bool sinusoidal(const EncodingSpec& spec, std::span<const std::int64_t> positions, std::span<double> out) override {
    if (!sin_ || spec.family != Family::sinusoidal) return false;
    const SinusoidalSpec& s = spec.sinusoidal;
    ropecheck_sinusoidal_params p{};
    p.d_model = s.d_model;
    p.layout = s.layout == SinusoidalLayout::concatenated ? ROPECHECK_SINUSOIDAL_CONCATENATED : ROPECHECK_SINUSOIDAL_INTERLEAVED;
    p.frequencies = s.frequencies == SinusoidalFrequencies::half_dim_minus_one ? ROPECHECK_SINUSOIDAL_HALF_DIM_MINUS_ONE
                                                                               : ROPECHECK_SINUSOIDAL_VASWANI;
    p.frequency_count = sinusoidal_frequency_count(s);
    p.base = s.base;
    p.position_offset = s.position_offset;
    const std::string json = spec_to_json(spec).dump();
    std::vector<std::int64_t> pos(positions.begin(), positions.end());
    const std::size_t esize = static_cast<std::size_t>(format_info(info_.dtype).storage_bits / 8);
    std::vector<unsigned char> buf(out.size() * esize);
    char message[512] = {0};
    ropecheck_sinusoidal_problem prob{};
    prob.abi_version = ROPECHECK_KERNEL_ABI_VERSION;
    prob.out_dtype = abi_dtype(info_.dtype);
    prob.spec_json = json.c_str();
    prob.sinusoidal = p;
    prob.tokens = static_cast<std::int64_t>(pos.size());
    prob.positions = pos.data();
    prob.out = buf.data();
    prob.message = message;
    prob.message_capacity = sizeof message;
    const int rc = sin_(&prob);
    if (rc == ROPECHECK_UNSUPPORTED) return false;
    if (rc != ROPECHECK_OK)
      throw TensorError("kernel '" + plugin_.name() + "': ropecheck_sinusoidal failed with code " + std::to_string(rc) +
                        (message[0] ? std::string(" (") + message + ")" : std::string()));
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = load_element(buf.data() + i * esize, info_.dtype);
    return true;
  }

 private:
  KernelPlugin plugin_;
  void* handle_;
  props::TargetInfo info_;
  ropecheck_rope_apply_fn rope_ = nullptr;
  ropecheck_sinusoidal_fn sin_ = nullptr;
};

}  // namespace

std::unique_ptr<props::Target> make_plugin_target(const std::filesystem::path& library, props::AccuracyClass accuracy,
                                                  DType dtype) {
  KernelPlugin plugin = load_kernel_plugin(library);  // every check and its one-line error
  // The same library again (reference-counted by the loader) for the entry points' addresses.
  const std::filesystem::path abs = std::filesystem::absolute(library);
  void* handle = ::dlopen(abs.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) throw TensorError("kernel library " + library.string() + ": cannot load it as a shared library");
  return std::make_unique<PluginTarget>(std::move(plugin), handle, accuracy, dtype);
}

}  // namespace ropecheck::golden
