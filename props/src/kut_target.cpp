#include "ropecheck/props/kut_target.hpp"

#include <string>
#include <vector>

namespace ropecheck::props {
namespace {

std::size_t element_size(DType t) { return static_cast<std::size_t>(format_info(t).storage_bits / 8); }

class KutTarget final : public Target {
 public:
  KutTarget(std::shared_ptr<kut::KernelUnderTest> kernel, TargetInfo info, bool every_dtype, ClassClaim claim)
      : kernel_(std::move(kernel)), info_(std::move(info)), every_dtype_(every_dtype), claim_(std::move(claim)) {
    info_.negative_positions = kernel_->info().capabilities.negative_positions;
    if (claim_) info_.accuracy = claim_(info_.dtype);
  }
  const TargetInfo& info() const override { return info_; }

  bool rope_apply(const EncodingSpec& spec, std::span<const Position> positions, int heads, std::span<const double> x,
                  std::span<double> out) override {
    return rope_apply_input("q", spec, positions, heads, x, out);
  }

  bool rope_apply_input(std::string_view input, const EncodingSpec& spec, std::span<const Position> positions, int heads,
                        std::span<const double> x, std::span<double> out) override {
    const kut::Capabilities& caps = kernel_->info().capabilities;
    if (!caps.rope_apply || spec.family != Family::rope || !caps.supports(info_.dtype)) return false;
    const std::vector<float> xf(x.begin(), x.end());  // bf16-exact (target.hpp): exact in f32
    buf_.assign(out.size() * element_size(info_.dtype), std::byte{0});
    const std::string what = "spec " + (spec.name.empty() ? std::string("(generated)") : spec.name) + ", " +
                             std::to_string(positions.size()) + " tokens x " + std::to_string(heads) + " heads, " +
                             std::string(to_string(info_.dtype)) + " output, first position " +
                             (positions.empty() ? std::string("-") : std::to_string(positions[0].t));
    kut::RopeApplyCall call;
    call.problem = {&spec, std::nullopt, positions, what};
    call.input = input;
    call.heads = heads;
    call.x = {DType::f32, std::as_bytes(std::span(xf))};
    call.out = {info_.dtype, buf_};
    return finish(kernel_->rope_apply(call), out);
  }

  std::unique_ptr<Target> with_output(DType dtype) override {
    if (!every_dtype_) return nullptr;
    TargetInfo info = info_;
    info.dtype = dtype;
    return std::make_unique<KutTarget>(kernel_, std::move(info), true, claim_);
  }

  bool sinusoidal(const EncodingSpec& spec, std::span<const std::int64_t> positions, std::span<double> out) override {
    const kut::Capabilities& caps = kernel_->info().capabilities;
    if (!caps.sinusoidal || spec.family != Family::sinusoidal || !caps.supports(info_.dtype)) return false;
    buf_.assign(out.size() * element_size(info_.dtype), std::byte{0});
    const std::string what = "spec " + (spec.name.empty() ? std::string("(generated)") : spec.name) + ", " +
                             std::to_string(positions.size()) + " tokens, " + std::string(to_string(info_.dtype)) + " output";
    kut::SinusoidalCall call;
    call.spec = &spec;
    call.positions = positions;
    call.what = what;
    call.out = {info_.dtype, buf_};
    return finish(kernel_->sinusoidal(call), out);
  }

  Failures take_failures() override {
    Failures f{failed_, calls_, first_, declined_};
    failed_ = calls_ = 0;
    first_.clear();
    declined_.clear();
    kernel_->forgive();  // the next property gets calls again after a crash streak
    return f;
  }

 private:
  bool finish(const kut::CallResult& c, std::span<double> out) {
    ++calls_;
    if (c.status == kut::CallResult::Status::unsupported) {
      if (declined_.empty()) declined_ = c.message.empty() ? "UNSUPPORTED without a reason" : c.message;
      return false;
    }
    if (c.status == kut::CallResult::Status::failed) {
      ++failed_;
      if (first_.empty()) first_ = c.message;
    }
    const std::size_t es = element_size(info_.dtype);
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = load_element(buf_.data() + i * es, info_.dtype);
    return true;
  }

  std::shared_ptr<kut::KernelUnderTest> kernel_;
  TargetInfo info_;
  bool every_dtype_;
  ClassClaim claim_;
  std::vector<std::byte> buf_;
  std::int64_t failed_ = 0, calls_ = 0;
  std::string first_, declined_;
};

}  // namespace

accuracy::AccuracyClass kernel_claimed_class(kernels::Recipe recipe, DType storage) {
  switch (recipe) {
    case kernels::Recipe::accurate: return storage == DType::f32 ? accuracy::AccuracyClass::f32_reduced : accuracy::AccuracyClass::fp64_angle;
    case kernels::Recipe::meta:
    case kernels::Recipe::ggml: return accuracy::AccuracyClass::fp32_angle;
    case kernels::Recipe::bf16_table: return accuracy::AccuracyClass::bf16_table;
    case kernels::Recipe::f16_table: return accuracy::AccuracyClass::f16_table;
    default:  // hf and the known-bad recipes built on it: hf rounds its tables and rotation to the storage dtype
      return storage == DType::bf16 ? accuracy::AccuracyClass::bf16_table
                                    : (storage == DType::f16 ? accuracy::AccuracyClass::f16_table : accuracy::AccuracyClass::fp32_angle);
  }
}

std::unique_ptr<Target> make_kut_target(std::shared_ptr<kut::KernelUnderTest> kernel, TargetInfo info, bool every_dtype,
                                        ClassClaim claim) {
  return std::make_unique<KutTarget>(std::move(kernel), std::move(info), every_dtype, std::move(claim));
}

}  // namespace ropecheck::props
