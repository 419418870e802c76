// The host side of cuda_fused.hpp: the CPU recipes' argument checks, host data gathered and uploaded,
// the stages launched in order on the device (rotation: cuda_rope_apply; the rest: fused.cu) through
// device scratch, the results downloaded. The emulation twins (emulation.hpp) run the same stages on
// host memory with the kernels' code.
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "emulation.hpp"
#include "launch.hpp"
#include "ropecheck/kernels/cuda_fused.hpp"
#include "ropecheck/kernels/cuda_kernels.hpp"

namespace ropecheck::kernels {

namespace cd = cuda_detail;

namespace {

std::size_t dsize(DType t) { return static_cast<std::size_t>(format_info(t).storage_bits / 8); }

// Bytes on the device, or on the host (8-byte aligned, as device memory) for the emulation.
class Mem {
 public:
  Mem(std::size_t bytes, bool emulate) : emulate_(emulate) {
    if (emulate)
      host_.resize(bytes / 8 + 1);
    else
      dev_ = CudaBuffer(bytes == 0 ? 1 : bytes);
  }
  void* data() { return emulate_ ? static_cast<void*>(host_.data()) : dev_.data(); }
  void put(const void* src, std::size_t n) {
    if (n == 0) return;
    if (emulate_) std::memcpy(host_.data(), src, n);
    else dev_.upload(src, n);
  }
  void get(void* dst, std::size_t n) const {
    if (n == 0) return;
    if (emulate_) std::memcpy(dst, host_.data(), n);
    else dev_.download(dst, n);
  }

 private:
  bool emulate_;
  std::vector<double> host_;
  CudaBuffer dev_;
};

// A view's elements, row-major [tokens, heads, head_dim], in its dtype.
std::vector<std::uint8_t> gather(const TensorView& v) {
  const std::size_t es = dsize(v.dtype);
  std::vector<std::uint8_t> out(static_cast<std::size_t>(v.tokens * v.heads * v.head_dim) * es);
  std::size_t i = 0;
  for (std::int64_t t = 0; t < v.tokens; ++t)
    for (std::int64_t h = 0; h < v.heads; ++h)
      for (std::int64_t d = 0; d < v.head_dim; ++d, i += es)
        std::memcpy(out.data() + i,
                    static_cast<const std::uint8_t*>(v.data) + (t * v.stride_token + h * v.stride_head + d * v.stride_dim) * std::int64_t(es),
                    es);
  return out;
}

void scatter(const std::vector<std::uint8_t>& bytes, const TensorView& v) {
  const std::size_t es = dsize(v.dtype);
  std::size_t i = 0;
  for (std::int64_t t = 0; t < v.tokens; ++t)
    for (std::int64_t h = 0; h < v.heads; ++h)
      for (std::int64_t d = 0; d < v.head_dim; ++d, i += es)
        std::memcpy(static_cast<std::uint8_t*>(v.data) + (t * v.stride_token + h * v.stride_head + d * v.stride_dim) * std::int64_t(es),
                    bytes.data() + i, es);
}

// The rotation of contiguous [T, H, head_dim] `in` into `out` (both where the stages run): cuda_rope_apply
// on the device, its emulation on the host; the positions (host memory) uploaded first.
void rotate(const RopePlan& plan, const PositionsView& pos, void* in, DType in_dt, void* out, DType out_dt,
            std::int64_t T, std::int64_t H, bool emulate) {
  const TensorView vi = TensorView::contiguous(in, in_dt, T, H, plan.head_dim);
  const TensorView vo = TensorView::contiguous(out, out_dt, T, H, plan.head_dim);
  if (emulate) return cd::emulate_rope_apply(plan, pos, vi, vo);
  if (pos.tokens != T) throw std::invalid_argument("ropecheck::kernels (CUDA): positions.tokens != tensor tokens");
  const std::int64_t last = T == 0 ? -1 : (T - 1) * pos.token_stride + (pos.streams == 3 ? 2 * pos.stream_stride : 0);
  const auto bytes = static_cast<std::size_t>(last + 1) * (pos.is_int64 ? 8 : 4);
  Mem dpos(bytes, false);
  dpos.put(pos.data, bytes);
  PositionsView p = pos;
  p.data = dpos.data();
  cuda_rope_apply(CudaRopePlan(plan), p, vi, vo);
}

cd::DT dt(DType t) { return static_cast<cd::DT>(static_cast<int>(t)); }

StoredTensor rope_quantize_on(const RopePlan& plan, const PositionsView& positions, const TensorView& in,
                              const quant::StoreSpec& spec, bool emulate) {
  const std::int64_t T = in.tokens, H = in.heads, D = in.head_dim, n = T * H * D;
  if (spec.kind == quant::StoreKind::affine)
    throw std::invalid_argument("ropecheck::kernels (CUDA): no CUDA kernel for MLX affine stores (" + spec.name() + ")");
  if (spec.given_scale())  // the device kernel derives its scale from the data; a given one is not wired yet
    throw std::invalid_argument("ropecheck::kernels (CUDA): no CUDA kernel for a given FP8 scale (" + spec.item() + ")");
  if (spec.whole_tensor_scale())  // the device kernel's groups are within one token
    throw std::invalid_argument("ropecheck::kernels (CUDA): no CUDA kernel for an FP8 scale over every token (" + spec.item() + ")");
  if (const std::string p = quant::store_head_dim_problem(spec, D); !p.empty()) throw std::invalid_argument(p);
  const std::vector<std::uint8_t> x = gather(in);
  Mem din(x.size(), emulate), y(static_cast<std::size_t>(n) * 4, emulate);
  din.put(x.data(), x.size());
  rotate(plan, positions, din.data(), in.dtype, y.data(), DType::f32, T, H, emulate);
  StoredTensor out;
  if (spec.kind == quant::StoreKind::fp8) {
    const std::int64_t group = spec.scale == quant::ScaleGranularity::per_token ? H * D : D;
    cd::Fp8StoreArgs a;
    a.x = static_cast<const float*>(y.data());
    a.groups = group == 0 ? 0 : n / group;
    a.group = static_cast<int>(group);
    a.e5m2 = spec.fp8 == quant::Fp8::e5m2;
    a.saturate = spec.overflow == quant::Fp8Overflow::saturate;
    a.emulate = emulate;
    Mem codes(static_cast<std::size_t>(n), emulate), scales(static_cast<std::size_t>(a.groups) * 4, emulate);
    a.codes = static_cast<std::uint8_t*>(codes.data());
    a.scales = static_cast<float*>(scales.data());
    cd::launch_fp8_store(a);
    out.codes.resize(static_cast<std::size_t>(n));
    out.scales.resize(static_cast<std::size_t>(a.groups) * 4);
    codes.get(out.codes.data(), out.codes.size());
    scales.get(out.scales.data(), out.scales.size());
    return out;
  }
  cd::GgmlStoreArgs a;
  a.x = static_cast<const float*>(y.data());
  a.blocks = n / 32;
  a.q4_0 = spec.kind == quant::StoreKind::q4_0;
  a.emulate = emulate;
  Mem blocks(static_cast<std::size_t>(a.blocks) * (a.q4_0 ? 18 : 34), emulate);
  a.out = static_cast<std::uint8_t*>(blocks.data());
  cd::launch_ggml_store(a);
  out.codes.resize(static_cast<std::size_t>(a.blocks) * (a.q4_0 ? 18 : 34));
  blocks.get(out.codes.data(), out.codes.size());
  return out;
}

void rope_append_kv_on(const RopePlan& plan, const kv::CacheSpec& cache, std::int64_t heads, std::span<const float> k_in,
                       std::span<const float> v_in, DType dtype, std::span<std::uint8_t> k_cache,
                       std::span<std::uint8_t> v_cache, bool emulate) {
  const std::int64_t T = cache.tokens(), D = plan.head_dim, row = heads * D;
  const std::size_t es = dsize(dtype), cache_bytes = static_cast<std::size_t>(cache.slots() * row) * es;
  if (static_cast<std::int64_t>(k_in.size()) != T * row || k_cache.size() != cache_bytes ||
      (!v_in.empty() && (v_in.size() != k_in.size() || v_cache.size() != cache_bytes)))
    throw std::invalid_argument("cuda_rope_append_kv: k, v or the cache do not match the batch's " + std::to_string(T) +
                                " tokens x " + std::to_string(row) + " values");
  const std::vector<std::int64_t> pos = kv::positions(cache), slots = kv::token_slots(cache);
  Mem k(k_in.size() * 4, emulate), v(v_in.size() * 4, emulate), rot(k_in.size() * es, emulate);
  Mem kc(cache_bytes, emulate), vc(v_in.empty() ? 0 : cache_bytes, emulate), ds(slots.size() * 8, emulate);
  k.put(k_in.data(), k_in.size() * 4);
  v.put(v_in.data(), v_in.size() * 4);
  kc.put(k_cache.data(), cache_bytes);
  if (!v_in.empty()) vc.put(v_cache.data(), cache_bytes);
  ds.put(slots.data(), slots.size() * 8);
  rotate(plan, PositionsView::of(pos), k.data(), DType::f32, rot.data(), dtype, T, heads, emulate);
  cd::CacheAppendArgs a;
  a.k_rot = rot.data();
  a.v = v_in.empty() ? nullptr : static_cast<const float*>(v.data());
  a.k_cache = kc.data();
  a.v_cache = v_in.empty() ? nullptr : vc.data();
  a.dt = dt(dtype);
  a.slots = static_cast<const std::int64_t*>(ds.data());
  a.tokens = T;
  a.heads = heads;
  a.page_size = cache.page_size;
  a.head_dim = static_cast<int>(D);
  a.hnd = cache.layout == kv::CacheLayout::hnd;
  a.emulate = emulate;
  cd::launch_cache_append(a);
  kc.get(k_cache.data(), cache_bytes);
  if (!v_in.empty()) vc.get(v_cache.data(), cache_bytes);
}

void rms_norm_rope_apply_on(const RopePlan& plan, const RmsNormStage& norm, const PositionsView& positions,
                            const TensorView& in, const TensorView& out, bool emulate) {
  const std::int64_t T = in.tokens, H = in.heads, D = in.head_dim;
  if (norm.weight.size() != static_cast<std::size_t>(D))
    throw std::invalid_argument("cuda_rms_norm_rope_apply: the norm's weights are not filled in (or not head_dim of them)");
  if (out.tokens != T || out.heads != H || out.head_dim != D)
    throw std::invalid_argument("cuda_rms_norm_rope_apply: out's shape differs from in's");
  const std::vector<std::uint8_t> x = gather(in);
  const std::vector<float> w(norm.weight.begin(), norm.weight.end());
  Mem din(x.size(), emulate), dw(w.size() * 4, emulate), normed(static_cast<std::size_t>(T * H * D) * 4, emulate);
  Mem dout(static_cast<std::size_t>(T * H * D) * dsize(out.dtype), emulate);
  din.put(x.data(), x.size());
  dw.put(w.data(), w.size() * 4);
  cd::NormArgs a;
  a.in = din.data();
  a.in_dt = dt(in.dtype);
  a.out = static_cast<float*>(normed.data());
  a.weight = static_cast<const float*>(dw.data());
  a.one_plus = norm.weight_form == NormWeightForm::one_plus_w;
  a.eps = static_cast<float>(norm.eps);
  a.rows = T * H;
  a.head_dim = static_cast<int>(D);
  a.emulate = emulate;
  cd::launch_rms_norm(a);
  rotate(plan, positions, normed.data(), DType::f32, dout.data(), out.dtype, T, H, emulate);
  std::vector<std::uint8_t> y(static_cast<std::size_t>(T * H * D) * dsize(out.dtype));
  dout.get(y.data(), y.size());
  scatter(y, out);
}

}  // namespace

StoredTensor cuda_rope_quantize(const RopePlan& plan, const PositionsView& positions, const TensorView& in,
                                const quant::StoreSpec& spec) {
  return rope_quantize_on(plan, positions, in, spec, false);
}

void cuda_rope_append_kv(const RopePlan& plan, const kv::CacheSpec& cache, std::int64_t heads, std::span<const float> k_in,
                         std::span<const float> v_in, DType dtype, std::span<std::uint8_t> k_cache,
                         std::span<std::uint8_t> v_cache) {
  rope_append_kv_on(plan, cache, heads, k_in, v_in, dtype, k_cache, v_cache, false);
}

void cuda_rms_norm_rope_apply(const RopePlan& plan, const RmsNormStage& norm, const PositionsView& positions,
                              const TensorView& in, const TensorView& out) {
  rms_norm_rope_apply_on(plan, norm, positions, in, out, false);
}

namespace cuda_detail {

StoredTensor emulate_rope_quantize(const RopePlan& plan, const PositionsView& positions, const TensorView& in,
                                   const quant::StoreSpec& spec) {
  return rope_quantize_on(plan, positions, in, spec, true);
}

void emulate_rope_append_kv(const RopePlan& plan, const kv::CacheSpec& cache, std::int64_t heads,
                            std::span<const float> k_in, std::span<const float> v_in, DType dtype,
                            std::span<std::uint8_t> k_cache, std::span<std::uint8_t> v_cache) {
  rope_append_kv_on(plan, cache, heads, k_in, v_in, dtype, k_cache, v_cache, true);
}

void emulate_rms_norm_rope_apply(const RopePlan& plan, const RmsNormStage& norm, const PositionsView& positions,
                                 const TensorView& in, const TensorView& out) {
  rms_norm_rope_apply_on(plan, norm, positions, in, out, true);
}

}  // namespace cuda_detail

}  // namespace ropecheck::kernels
