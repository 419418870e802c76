// The fast CPU kernels as kernels under test (builtin_sources.hpp).
#include <string>

#include "builtin_common.hpp"
#include "ropecheck/kernels/kv_append.hpp"
#include "ropecheck/kernels/rope_attention.hpp"
#include "ropecheck/kernels/rope_quantize.hpp"
#include "ropecheck/kut/builtin_sources.hpp"
#include "ropecheck/kut/kernel_names.hpp"

namespace ropecheck::kut {
namespace {

namespace k = ropecheck::kernels;

class CpuKernel final : public KernelUnderTest {
 public:
  CpuKernel(k::Recipe recipe, const k::KernelOptions& options) : rows_{recipe}, options_(options) {
    info_.name = cpu_kernel_name(recipe, options);
    info_.description = "ropecheck's fast CPU kernel, recipe " + std::string(k::recipe_info(recipe).description);
    info_.capabilities = detail::all_capabilities();
    info_.capabilities.rope_attention = info_.capabilities.attention_scores = true;
    info_.capabilities.rope_quantize = info_.capabilities.rope_append_kv = true;
  }
  const Info& info() const override { return info_; }
  const RecipeRows* recipe_rows() const override { return &rows_; }

  CallResult rope_apply(const RopeApplyCall& c) override {
    if (std::string why = detail::check_rope_apply(c); !why.empty()) return detail::unsupported(why);
    return detail::run_guarded([&] {
      const auto [plan, pos] = detail::rope_setup(c.problem, rows_.recipe);
      const std::int64_t T = pos.tokens, H = c.heads, D = plan.head_dim;
      const std::byte* x = c.x.bytes.data();
      DType x_dtype = c.x.dtype;
      std::vector<float> normed;  // the spec's Q/K RMSNorm stage, binary32, before the rotation
      if (const RmsNormStage* n = norm_stage(c.problem.spec->rope, c.input)) {
        normed = detail::rms_normed_f32(*n, c.x, static_cast<int>(H), static_cast<int>(D));
        x = reinterpret_cast<const std::byte*>(normed.data());
        x_dtype = DType::f32;
      }
      k::rope_apply(plan, pos.view(), k::TensorView::contiguous(const_cast<std::byte*>(x), x_dtype, T, H, D),
                    k::TensorView::contiguous(c.out.bytes.data(), c.out.dtype, T, H, D), {}, {}, options_);
    });
  }

  CallResult rope_cos_sin(const RopeTableCall& c) override {
    if (std::string why = detail::check_rope_table(c); !why.empty()) return detail::unsupported(why);
    return detail::run_guarded([&] {
      const auto [plan, pos] = detail::rope_setup(c.problem, rows_.recipe);
      k::rope_cos_sin_table(plan, pos.view(), c.cos.bytes.data(), c.sin.bytes.data(), c.cos.dtype, options_);
    });
  }

  // The recipe's fused RoPE + attention (kernels/rope_attention.hpp): q and k rotated and held in the
  // output dtype, then the attention arithmetic of the recipe's class.
  CallResult rope_attention(const RopeAttentionCall& c) override {
    if (std::string why = detail::check_rope_attention(c); !why.empty()) return detail::unsupported(why);
    return detail::run_guarded([&] {
      const auto [plan, pos] = detail::rope_setup(c.problem, rows_.recipe);
      const std::int64_t T = pos.tokens, G = c.attention->group, D = plan.head_dim;
      const std::int64_t Dv = attention_value_dim(*c.attention, plan.head_dim);
      auto view = [&](const ConstStorage& s, std::int64_t heads, std::int64_t dim) {
        return k::TensorView::contiguous(const_cast<std::byte*>(s.bytes.data()), s.dtype, T, heads, dim);
      };
      k::rope_attention(plan, pos.view(), pos.view(), *c.attention, view(c.q, G, D), view(c.k, 1, D), view(c.v, 1, Dv),
                        k::TensorView::contiguous(c.out.bytes.data(), c.out.dtype, T, G, Dv),
                        c.scores.bytes.empty() ? nullptr : c.scores.bytes.data(), options_);
    });
  }

  // The recipe's rotation to binary32 (after the spec's Q/K norm), then the owner's quantizer
  // (kernels/rope_quantize.hpp): what golden --stores computes exactly, in a kernel's arithmetic.
  CallResult rope_quantize(const RopeQuantizeCall& c) override {
    if (std::string why = detail::check_rope_quantize(c); !why.empty()) return detail::unsupported(why);
    return detail::run_guarded([&] {
      const auto [plan, pos] = detail::rope_setup(c.problem, rows_.recipe);
      const std::int64_t T = pos.tokens, H = c.heads, D = plan.head_dim;
      const std::vector<float> x = detail::input_f32(c.problem.spec->rope, c.input, c.x, c.heads);
      const k::StoredTensor st =
          k::rope_quantize(plan, pos.view(), k::TensorView::contiguous(const_cast<float*>(x.data()), DType::f32, T, H, D), *c.store);
      detail::copy_store(st, c);
    });
  }

  // The recipe's rotation of k (after the spec's k_norm) and the append through core's slot mapping
  // (kernels/kv_append.hpp).
  CallResult rope_append_kv(const KvAppendCall& c) override {
    if (std::string why = detail::check_append_kv(c); !why.empty()) return detail::unsupported(why);
    return detail::run_guarded([&] {
      const auto [plan, pos] = detail::rope_setup(c.problem, rows_.recipe);
      const std::vector<float> k = detail::input_f32(c.problem.spec->rope, "k", c.k, c.heads);
      const auto v = std::span(reinterpret_cast<const float*>(c.v.bytes.data()), c.v.count());
      auto bytes = [](const Storage& s) { return std::span(reinterpret_cast<std::uint8_t*>(s.bytes.data()), s.bytes.size()); };
      k::rope_append_kv(plan, *c.cache, c.heads, k, v, c.k_cache.dtype, bytes(c.k_cache), bytes(c.v_cache));
    });
  }

  CallResult sinusoidal(const SinusoidalCall& c) override {
    if (std::string why = detail::check_sinusoidal(c); !why.empty()) return detail::unsupported(why);
    return detail::run_guarded(
        [&] { k::sinusoidal_table(c.spec->sinusoidal, rows_.recipe, c.positions, c.out.bytes.data(), c.out.dtype, options_); });
  }

 private:
  RecipeRows rows_;
  k::KernelOptions options_;
  Info info_;
};

}  // namespace

std::string cpu_kernel_name(k::Recipe recipe, const k::KernelOptions& options) {
  return builtin_kernel_name(recipe) + " (" +
         std::string(options.portable ? std::string_view("portable") : k::cpu_path()) + ")";
}

std::unique_ptr<KernelUnderTest> make_cpu_kernel(k::Recipe recipe, const k::KernelOptions& options) {
  return std::make_unique<CpuKernel>(recipe, options);
}

}  // namespace ropecheck::kut
