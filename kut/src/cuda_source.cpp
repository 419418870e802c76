// The CUDA kernels as kernels under test (cuda_source.hpp): on the device through
// kernels/cuda_kernels.hpp (inputs uploaded, outputs downloaded per call), or, with the test-only
// switch ROPECHECK_CUDA_EMULATION=1, the same kernel code on the host (kernels/cuda/emulation.hpp).
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>

#include "builtin_common.hpp"
#include "ropecheck/kut/builtin_sources.hpp"
#include "ropecheck/kut/kernel_names.hpp"
#include "ropecheck/kut/cuda_source.hpp"

#ifdef ROPECHECK_KUT_CUDA
#include "emulation.hpp"  // kernels/cuda/: the host emulation of the CUDA kernels
#include "ropecheck/kernels/cuda_fused.hpp"
#include "ropecheck/kernels/cuda_kernels.hpp"
#endif

namespace ropecheck::kut {

bool cuda_emulation_requested() {
  const char* v = std::getenv(kCudaEmulationVariable);
  return v && std::string_view(v) == "1";
}

#ifndef ROPECHECK_KUT_CUDA

bool cuda_built() { return false; }

std::unique_ptr<KernelUnderTest> make_cuda_kernel(kernels::Recipe) {
  throw std::runtime_error("this ropecheck was built without CUDA");
}

#else

bool cuda_built() { return true; }

namespace {

namespace k = ropecheck::kernels;
namespace emu = ropecheck::kernels::cuda_detail;


// What the CUDA store / append kernels (cuda_fused.hpp) do not cover: a Q/K norm stage before them, MLX
// affine stores, a given FP8 scale, a scale over every token. Empty when covered.
std::string fused_gap(const RopeProblem& p, const quant::StoreSpec* store) {
  if (has_qk_norm(p.spec->rope)) return "no CUDA store / append kernel after a Q/K norm stage";
  if (store && store->kind == quant::StoreKind::affine) return "no CUDA kernel for MLX affine stores (" + store->name() + ")";
  if (store && store->given_scale()) return "no CUDA kernel for a given FP8 scale (" + store->item() + ")";
  if (store && store->whole_tensor_scale()) return "no CUDA kernel for an FP8 scale over every token (" + store->item() + ")";
  return {};
}

// A host buffer mirrored on the device for one call.
k::CudaBuffer upload(const void* host, std::size_t bytes) {
  k::CudaBuffer b(bytes == 0 ? 1 : bytes);
  if (bytes) b.upload(host, bytes);
  return b;
}

class CudaKernel final : public KernelUnderTest {
 public:
  CudaKernel(k::Recipe recipe, bool emulate) : rows_{recipe}, emulate_(emulate) {
    const std::string where = emulate ? std::string("host emulation") : k::cuda_device_description();
    info_.name = cuda_kernel_name(recipe) + " (" + where + ")";
    info_.description = std::string(emulate ? "ropecheck's CUDA kernel run on the host (host emulation, not a GPU run)"
                                            : "ropecheck's CUDA kernel on " + where) +
                        ", recipe " + std::string(k::recipe_info(recipe).description);
    info_.capabilities = detail::all_capabilities();
    info_.capabilities.rope_quantize = info_.capabilities.rope_append_kv = true;
    // No CUDA fused RoPE + attention kernel: rope_attention keeps the interface's default (unsupported).
  }
  const Info& info() const override { return info_; }
  const RecipeRows* recipe_rows() const override { return &rows_; }

  CallResult rope_apply(const RopeApplyCall& c) override {
    if (std::string why = detail::check_rope_apply(c); !why.empty()) return detail::unsupported(why);
    return detail::run_guarded([&] {
      const auto [plan, pos] = detail::rope_setup(c.problem, rows_.recipe);
      const std::int64_t T = pos.tokens, H = c.heads, D = plan.head_dim;
      // The spec's Q/K RMSNorm stage, then the rotation (cuda_fused.hpp; host buffers in and out).
      if (const RmsNormStage* n = norm_stage(c.problem.spec->rope, c.input)) {
        const auto x = k::TensorView::contiguous(const_cast<std::byte*>(c.x.bytes.data()), c.x.dtype, T, H, D);
        const auto out = k::TensorView::contiguous(c.out.bytes.data(), c.out.dtype, T, H, D);
        if (emulate_) emu::emulate_rms_norm_rope_apply(plan, *n, pos.view(), x, out);
        else k::cuda_rms_norm_rope_apply(plan, *n, pos.view(), x, out);
        return;
      }
      if (emulate_) {
        emu::emulate_rope_apply(plan, pos.view(),
                                k::TensorView::contiguous(const_cast<std::byte*>(c.x.bytes.data()), c.x.dtype, T, H, D),
                                k::TensorView::contiguous(c.out.bytes.data(), c.out.dtype, T, H, D));
        return;
      }
      const k::CudaRopePlan dplan(plan);
      const k::CudaBuffer dpos = upload(pos.thw.data(), pos.thw.size() * sizeof(std::int64_t));
      const k::CudaBuffer dx = upload(c.x.bytes.data(), c.x.bytes.size());
      const k::CudaBuffer dout(c.out.bytes.empty() ? 1 : c.out.bytes.size());
      k::cuda_rope_apply(dplan, device_positions(pos, dpos), k::TensorView::contiguous(dx.data(), c.x.dtype, T, H, D),
                         k::TensorView::contiguous(dout.data(), c.out.dtype, T, H, D));
      if (!c.out.bytes.empty()) dout.download(c.out.bytes.data(), c.out.bytes.size());
    });
  }

  // Rotate then store (kernels/cuda/fused.cu): FP8 with a derived scale, q8_0, q4_0. MLX affine stores, a
  // given FP8 scale and a Q/K-norm spec have no CUDA store kernel yet: unsupported (not tested), by name.
  CallResult rope_quantize(const RopeQuantizeCall& c) override {
    if (std::string why = detail::check_rope_quantize(c); !why.empty()) return detail::unsupported(why);
    if (std::string why = fused_gap(c.problem, c.store); !why.empty()) return detail::unsupported(why);
    return detail::run_guarded([&] {
      const auto [plan, pos] = detail::rope_setup(c.problem, rows_.recipe);
      const auto x = k::TensorView::contiguous(const_cast<std::byte*>(c.x.bytes.data()), c.x.dtype, pos.tokens, c.heads,
                                               plan.head_dim);
      detail::copy_store(emulate_ ? emu::emulate_rope_quantize(plan, pos.view(), x, *c.store)
                                  : k::cuda_rope_quantize(plan, pos.view(), x, *c.store),
                         c);
    });
  }

  // Rotate k and append it and v to the paged / slot-mapped cache (kernels/cuda/fused.cu).
  CallResult rope_append_kv(const KvAppendCall& c) override {
    if (std::string why = detail::check_append_kv(c); !why.empty()) return detail::unsupported(why);
    if (std::string why = fused_gap(c.problem, nullptr); !why.empty()) return detail::unsupported(why);
    return detail::run_guarded([&] {
      const auto [plan, pos] = detail::rope_setup(c.problem, rows_.recipe);
      const auto f32 = [](const ConstStorage& s) { return std::span(reinterpret_cast<const float*>(s.bytes.data()), s.count()); };
      auto bytes = [](const Storage& s) { return std::span(reinterpret_cast<std::uint8_t*>(s.bytes.data()), s.bytes.size()); };
      if (emulate_)
        emu::emulate_rope_append_kv(plan, *c.cache, c.heads, f32(c.k), f32(c.v), c.k_cache.dtype, bytes(c.k_cache), bytes(c.v_cache));
      else
        k::cuda_rope_append_kv(plan, *c.cache, c.heads, f32(c.k), f32(c.v), c.k_cache.dtype, bytes(c.k_cache), bytes(c.v_cache));
    });
  }

  CallResult rope_cos_sin(const RopeTableCall& c) override {
    if (std::string why = detail::check_rope_table(c); !why.empty()) return detail::unsupported(why);
    return detail::run_guarded([&] {
      const auto [plan, pos] = detail::rope_setup(c.problem, rows_.recipe);
      if (emulate_) {
        emu::emulate_rope_cos_sin_table(plan, pos.view(), c.cos.bytes.data(), c.sin.bytes.data(), c.cos.dtype);
        return;
      }
      const k::CudaRopePlan dplan(plan);
      const k::CudaBuffer dpos = upload(pos.thw.data(), pos.thw.size() * sizeof(std::int64_t));
      const std::size_t bytes = c.cos.bytes.size();
      const k::CudaBuffer dcos(bytes ? bytes : 1), dsin(bytes ? bytes : 1);
      k::cuda_rope_cos_sin_table(dplan, device_positions(pos, dpos), dcos.data(), dsin.data(), c.cos.dtype);
      if (bytes) dcos.download(c.cos.bytes.data(), bytes), dsin.download(c.sin.bytes.data(), bytes);
    });
  }

  CallResult sinusoidal(const SinusoidalCall& c) override {
    if (std::string why = detail::check_sinusoidal(c); !why.empty()) return detail::unsupported(why);
    return detail::run_guarded([&] {
      if (emulate_) {
        emu::emulate_sinusoidal_table(c.spec->sinusoidal, rows_.recipe, k::PositionsView::of(c.positions),
                                      c.out.bytes.data(), c.out.dtype);
        return;
      }
      const k::CudaBuffer dpos = upload(c.positions.data(), c.positions.size() * sizeof(std::int64_t));
      const k::CudaBuffer dout(c.out.bytes.empty() ? 1 : c.out.bytes.size());
      k::PositionsView pv = k::PositionsView::of(c.positions);
      pv.data = dpos.data();
      k::cuda_sinusoidal_table(c.spec->sinusoidal, rows_.recipe, pv, dout.data(), c.out.dtype);
      if (!c.out.bytes.empty()) dout.download(c.out.bytes.data(), c.out.bytes.size());
    });
  }

 private:
  // The host view's layout over the device copy of its data.
  static k::PositionsView device_positions(const detail::ThreeStreams& pos, const k::CudaBuffer& d) {
    k::PositionsView v = pos.view();
    v.data = d.data();
    return v;
  }

  RecipeRows rows_;
  bool emulate_;
  Info info_;
};

}  // namespace

std::unique_ptr<KernelUnderTest> make_cuda_kernel(k::Recipe recipe) {
  if (cuda_emulation_requested()) return std::make_unique<CudaKernel>(recipe, true);
  std::string reason;
  if (!k::cuda_device_available(&reason)) throw std::runtime_error("no CUDA device (" + reason + ")");
  return std::make_unique<CudaKernel>(recipe, false);
}

#endif

}  // namespace ropecheck::kut
