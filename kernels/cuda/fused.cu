// The fused recipes' stages on the device (launch.hpp): the Q/K RMSNorm before a rotation, the FP8 and
// GGML stores after one, the KV-cache append. The rotation itself is cuda_rope_apply's kernel
// (rope_apply.cu); fused_api.cpp chains the stages through device scratch memory.
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>

#include "exec.cuh"
#include "fp.cuh"
#include "fused.cuh"
#include "launch.hpp"
#include "rotate.cuh"

namespace ropecheck::kernels::cuda_detail {
namespace {

unsigned blocks_for(std::int64_t items) {
  const std::int64_t b = (items + kThreads - 1) / kThreads;
  if (b > 0x7FFFFFFF) throw std::invalid_argument("ropecheck::kernels (CUDA): too many elements for one launch");
  return static_cast<unsigned>(b);
}

// One thread per head row: the sum of squares in channel order (rms_norm_row).
struct NormKernel {
  using Args = NormArgs;
  RC_HD static void phase0(const Args& a, unsigned b, int tid, int, unsigned char*) {
    const std::int64_t row = static_cast<std::int64_t>(b) * kThreads + tid;
    if (row < a.rows) rms_norm_row(a, row);
  }
  RC_HD static void phase1(const Args&, unsigned, int, int, unsigned char*) {}
  RC_HD static void phase2(const Args&, unsigned, int, int, unsigned char*) {}
};

// One block per scale group, as a GPU reduces: (0) each thread the max |x| of its strided elements,
// (1) thread 0 the block's max of those and the scale, (2) every thread the codes of its elements.
struct Fp8Kernel {
  using Args = Fp8StoreArgs;
  RC_HD static void phase0(const Args& a, unsigned b, int tid, int n, unsigned char* smem) {
    const float* x = a.x + static_cast<std::int64_t>(b) * a.group;
    float m = 0.0f;
    for (int i = tid; i < a.group; i += n) m = max_abs(m, x[i]);
    reinterpret_cast<float*>(smem)[tid] = m;
  }
  RC_HD static void phase1(const Args& a, unsigned b, int tid, int n, unsigned char* smem) {
    if (tid != 0) return;
    float* part = reinterpret_cast<float*>(smem);
    float m = 0.0f;
    for (int i = 0; i < n; ++i) m = max_abs(m, part[i]);
    part[n] = fp8_scale_of(m, a.e5m2);
    a.scales[b] = part[n];
  }
  RC_HD static void phase2(const Args& a, unsigned b, int tid, int n, unsigned char* smem) {
    const float s = reinterpret_cast<const float*>(smem)[n];
    const std::int64_t base = static_cast<std::int64_t>(b) * a.group;
    for (int i = tid; i < a.group; i += n) a.codes[base + i] = fp8_code(a.x[base + i], s, a.e5m2, a.saturate);
  }
};

// One thread per GGML block of 32 values.
struct GgmlKernel {
  using Args = GgmlStoreArgs;
  RC_HD static void phase0(const Args& a, unsigned b, int tid, int, unsigned char*) {
    const std::int64_t k = static_cast<std::int64_t>(b) * kThreads + tid;
    if (k >= a.blocks) return;
    if (a.q4_0)
      ggml_q4_0_block(a.x + 32 * k, a.out + 18 * k);
    else
      ggml_q8_0_block(a.x + 32 * k, a.out + 34 * k);
  }
  RC_HD static void phase1(const Args&, unsigned, int, int, unsigned char*) {}
  RC_HD static void phase2(const Args&, unsigned, int, int, unsigned char*) {}
};

// One thread per (token, head, channel): k's rotated element copied, v's rounded to the cache dtype.
struct AppendKernel {
  using Args = CacheAppendArgs;
  RC_HD static void phase0(const Args& a, unsigned b, int tid, int, unsigned char*) {
    const std::int64_t i = static_cast<std::int64_t>(b) * kThreads + tid;
    if (i >= a.tokens * a.heads * a.head_dim) return;
    const std::int64_t d = i % a.head_dim, h = (i / a.head_dim) % a.heads, t = i / (a.head_dim * a.heads);
    const std::int64_t slot = a.slots[t];
    if (slot < 0) return;
    const std::int64_t at = cache_element(a, slot, h, d);
    switch (a.dt) {
      case DT::f64: static_cast<double*>(a.k_cache)[at] = static_cast<const double*>(a.k_rot)[i]; break;
      case DT::f32: static_cast<float*>(a.k_cache)[at] = static_cast<const float*>(a.k_rot)[i]; break;
      default: static_cast<std::uint16_t*>(a.k_cache)[at] = static_cast<const std::uint16_t*>(a.k_rot)[i]; break;
    }
    if (a.v != nullptr) store_float(a.v_cache, at, a.dt, a.v[i]);
  }
  RC_HD static void phase1(const Args&, unsigned, int, int, unsigned char*) {}
  RC_HD static void phase2(const Args&, unsigned, int, int, unsigned char*) {}
};

}  // namespace

void launch_rms_norm(const NormArgs& a) {
  run<NormKernel>(a, blocks_for(a.rows), 0, a.stream, a.emulate, "launching the Q/K RMSNorm kernel");
}

void launch_fp8_store(const Fp8StoreArgs& a) {
  if (a.groups > 0x7FFFFFFF) throw std::invalid_argument("ropecheck::kernels (CUDA): too many scale groups for one launch");
  run<Fp8Kernel>(a, static_cast<unsigned>(a.groups), (kThreads + 1) * sizeof(float), a.stream, a.emulate,
                 "launching the FP8 store kernel");
}

void launch_ggml_store(const GgmlStoreArgs& a) {
  run<GgmlKernel>(a, blocks_for(a.blocks), 0, a.stream, a.emulate, "launching the GGML store kernel");
}

void launch_cache_append(const CacheAppendArgs& a) {
  run<AppendKernel>(a, blocks_for(a.tokens * a.heads * a.head_dim), 0, a.stream, a.emulate,
                    "launching the KV-cache append kernel");
}

}  // namespace ropecheck::kernels::cuda_detail
