/*
 * An example revision-3 kernel plugin (kernel_abi.h): the fused entry points written in plain C from
 * the ABI's documentation alone. Rotation in binary64 from the inverse frequencies the caller passes,
 * rounded once to binary32 (as a kernel holds rotated q / k), then
 *   ropecheck_rope_quantize   FP8 e4m3fn / e5m2 (saturate / nonfinite, per-token / per-(token, head)
 *                             scale amax / max, at least 1 / (max * 512)) and GGML q8_0 blocks;
 *                             q4_0 and MLX affine answer UNSUPPORTED
 *   ropecheck_rope_append_kv  paged (NHD / HND) and slot-mapped caches, f64 / f32
 * and a plain ropecheck_rope_apply (f64 / f32). One build; its options (ropecheck_kernel_configure,
 * `--kernel fused_plugin.so:OPTIONS`) switch a mistake on, so the isolation tests need no other build:
 *   crash=E, hang=E, overrun=E  E = quantize or append: write through NULL / never return / write 16
 *                               bytes past the end of the codes or the k cache
 *   scale_twice                 FP8 codes of x / s / s (a store bug the stores check must fail)
 *   next_page                   every token written one page further in the pool (a cache bug)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ropecheck/kernel_abi.h"

enum { NONE, QUANTIZE, APPEND };
static int g_crash, g_hang, g_overrun, g_scale_twice, g_next_page;

static int entry_of(const char* v) { return strcmp(v, "quantize") == 0 ? QUANTIZE : strcmp(v, "append") == 0 ? APPEND : -1; }

ROPECHECK_KERNEL_EXPORT uint32_t ropecheck_kernel_abi_version(void) { return ROPECHECK_KERNEL_ABI_VERSION; }
ROPECHECK_KERNEL_EXPORT const char* ropecheck_kernel_name(void) { return "fused-example"; }
ROPECHECK_KERNEL_EXPORT uint64_t ropecheck_kernel_capabilities(void) {
  return ROPECHECK_CAP_OUT_F64 | ROPECHECK_CAP_OUT_F32;
}

ROPECHECK_KERNEL_EXPORT int ropecheck_kernel_configure(const char* options, char* message, uint32_t capacity) {
  char buf[256];
  g_crash = g_hang = g_overrun = NONE;
  g_scale_twice = g_next_page = 0;
  snprintf(buf, sizeof buf, "%s", options);
  for (char* item = strtok(buf, ":"); item; item = strtok(NULL, ":")) {
    int* target = strncmp(item, "crash=", 6) == 0 ? &g_crash : strncmp(item, "hang=", 5) == 0 ? &g_hang
                  : strncmp(item, "overrun=", 8) == 0 ? &g_overrun : NULL;
    if (target) {
      const int e = entry_of(strchr(item, '=') + 1);
      if (e < 0) break;
      *target = e;
    } else if (strcmp(item, "scale_twice") == 0) {
      g_scale_twice = 1;
    } else if (strcmp(item, "next_page") == 0) {
      g_next_page = 1;
    } else {
      snprintf(message, capacity, "unknown option '%s'", item);
      return 2;
    }
  }
  return ROPECHECK_OK;
}

/* The misbehaviour asked for entry e, if any: crash or hang now, or say to write past the end. */
static int overrun_after(int e) {
  if (g_crash == e) *(volatile int*)0 = 1;
  if (g_hang == e)
    for (;;) {}
  return g_overrun == e;
}

static void rotate_row(const ropecheck_rope_params* r, int64_t pos, const float* x, float* y) {
  for (int32_t c = 0; c < r->head_dim; ++c) y[c] = x[c];
  for (int32_t j = 0; j < r->pairs; ++j) {
    const int32_t ia = r->layout == ROPECHECK_LAYOUT_INTERLEAVED ? 2 * j : j;
    const int32_t ib = r->layout == ROPECHECK_LAYOUT_INTERLEAVED ? 2 * j + 1 : j + r->pairs;
    const double angle = (double)pos * r->inv_freq[j], cs = cos(angle), sn = sin(angle), a = x[ia], b = x[ib];
    y[ia] = (float)(r->attention_factor * (a * cs - b * sn));
    y[ib] = (float)(r->attention_factor * (b * cs + a * sn));
  }
}

static void store(void* out, size_t i, int32_t dt, double v) {
  if (dt == ROPECHECK_DTYPE_F64) ((double*)out)[i] = v;
  else ((float*)out)[i] = (float)v;
}

ROPECHECK_KERNEL_EXPORT int ropecheck_rope_apply(const ropecheck_rope_problem* p) {
  const int32_t D = p->rope.head_dim;
  if ((p->out_dtype != ROPECHECK_DTYPE_F64 && p->out_dtype != ROPECHECK_DTYPE_F32) || p->position_streams != 1) return 1;
  float* y = malloc((size_t)D * sizeof(float));
  for (int64_t t = 0; t < p->tokens; ++t)
    for (int32_t h = 0; h < p->heads; ++h) {
      const size_t row = ((size_t)t * (size_t)p->heads + (size_t)h) * (size_t)D;
      rotate_row(&p->rope, p->positions[t], p->x + row, y);
      for (int32_t c = 0; c < D; ++c) store(p->out, row + (size_t)c, p->out_dtype, y[c]);
    }
  free(y);
  return ROPECHECK_OK;
}

/* v rounded to nearest-even in a binary format of `mant` fraction bits, minimum normal exponent emin,
   largest finite `max`, exponent field `ebits` wide: its bit pattern (sign, exponent, fraction).
   Overflow: saturate to max, or the pattern `overflow`. */
static uint32_t encode(double v, int mant, int emin, double max, int ebits, int saturate, uint32_t overflow) {
  const uint32_t sign = signbit(v) ? 1u << (ebits + mant) : 0;
  double a = fabs(v);
  int e2;
  frexp(a, &e2);
  const int e = a == 0 ? emin : (e2 - 1 < emin ? emin : e2 - 1);
  a = nearbyint(ldexp(a, mant - e)) * ldexp(1.0, e - mant);  /* exact scalings; nearbyint: ties to even */
  if (a > max) {
    if (!saturate) return sign | overflow;
    a = max;
  }
  if (a == 0) return sign;
  frexp(a, &e2);
  if (e2 - 1 < emin) return sign | (uint32_t)ldexp(a, mant - emin);
  return sign | ((uint32_t)(e2 - 1 - emin + 1) << mant) | ((uint32_t)ldexp(a, mant - (e2 - 1)) - (1u << mant));
}

static uint16_t f16_bits(float v) { return (uint16_t)encode(v, 10, -14, 65504.0, 5, 0, 0x7C00); }

static void quantize_fp8(const ropecheck_rope_quantize_problem* p, const float* y, int64_t t, int32_t h, int32_t n) {
  const int e4 = p->store.fp8_format == ROPECHECK_FP8_E4M3FN;
  const double max = e4 ? 448.0 : 57344.0;
  float amax = 0;
  for (int32_t i = 0; i < n; ++i) amax = fabsf(y[i]) > amax ? fabsf(y[i]) : amax;
  float s = (float)((double)amax / max);
  if (s < (float)(1.0 / (max * 512.0))) s = (float)(1.0 / (max * 512.0));
  const size_t first = ((size_t)t * (size_t)p->heads + (size_t)h) * (size_t)p->rope.head_dim;
  const size_t si = p->store.scale_granularity == ROPECHECK_SCALE_PER_TOKEN ? (size_t)t : (size_t)t * (size_t)p->heads + (size_t)h;
  ((float*)p->scales)[si] = s;
  for (int32_t i = 0; i < n; ++i) {
    double q = (double)y[i] / s;
    if (g_scale_twice) q /= s;
    const uint32_t nan = e4 ? 0x7F : 0x7C;  /* e5m2's nonfinite overflow is Inf */
    ((uint8_t*)p->codes)[first + (size_t)i] = (uint8_t)(isnan(q) ? (e4 ? 0x7F : 0x7E)
        : e4 ? encode(q, 3, -6, 448.0, 4, p->store.fp8_overflow == ROPECHECK_FP8_SATURATE, nan)
             : encode(q, 2, -14, 57344.0, 5, p->store.fp8_overflow == ROPECHECK_FP8_SATURATE, nan));
  }
}

/* GGML block_q8_0: d = amax / 127 in binary32, stored as f16; codes round(x * (1 / d)). */
static void quantize_q8_0(const float* x, uint8_t* block) {
  float amax = 0;
  for (int i = 0; i < 32; ++i) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
  const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
  const uint16_t dh = f16_bits(d);
  memcpy(block, &dh, 2);
  for (int i = 0; i < 32; ++i) block[2 + i] = (uint8_t)(int8_t)roundf(x[i] * id);
}

ROPECHECK_KERNEL_EXPORT int ropecheck_rope_quantize(const ropecheck_rope_quantize_problem* p) {
  const int32_t D = p->rope.head_dim;
  const int fp8 = p->store.kind == ROPECHECK_STORE_FP8, q8 = p->store.kind == ROPECHECK_STORE_Q8_0;
  if ((!fp8 && !q8) || p->position_streams != 1 || (fp8 && p->store.scale_granularity != ROPECHECK_SCALE_PER_TOKEN &&
                                                   p->store.scale_granularity != ROPECHECK_SCALE_PER_TOKEN_HEAD)) {
    snprintf(p->message, p->message_capacity, "FP8 and q8_0 stores only, one position stream");
    return ROPECHECK_UNSUPPORTED;
  }
  const int overrun = overrun_after(QUANTIZE);
  const size_t row = (size_t)p->heads * (size_t)D;
  float* y = malloc(row * sizeof(float));
  for (int64_t t = 0; t < p->tokens; ++t) {
    for (int32_t h = 0; h < p->heads; ++h)
      rotate_row(&p->rope, p->positions[t], p->x + (size_t)t * row + (size_t)h * (size_t)D, y + (size_t)h * (size_t)D);
    if (fp8 && p->store.scale_granularity == ROPECHECK_SCALE_PER_TOKEN) quantize_fp8(p, y, t, 0, (int32_t)row);
    else if (fp8)
      for (int32_t h = 0; h < p->heads; ++h) quantize_fp8(p, y + (size_t)h * (size_t)D, t, h, D);
    else
      for (size_t b = 0; b < row / 32; ++b) quantize_q8_0(y + 32 * b, (uint8_t*)p->codes + ((size_t)t * (row / 32) + b) * 34);
  }
  free(y);
  if (overrun) memset((uint8_t*)p->codes + p->codes_bytes, 0, 16);
  return ROPECHECK_OK;
}

/* The slot of token i of sequence s (its cache index idx), through the page table or the slot mapping. */
static int64_t slot_of(const ropecheck_kv_cache_params* c, int32_t s, int64_t token, int64_t idx) {
  if (c->kind == ROPECHECK_CACHE_SLOTS) return c->slot_mapping[token];
  int64_t page = c->kv_indices[c->kv_indptr[s] + idx / c->page_size];
  if (g_next_page) page = (page + 1) % c->pages;
  return page * c->page_size + idx % c->page_size;
}

ROPECHECK_KERNEL_EXPORT int ropecheck_rope_append_kv(const ropecheck_rope_append_kv_problem* p) {
  const ropecheck_kv_cache_params* c = &p->cache;
  const int32_t D = p->rope.head_dim, H = p->heads;
  if (p->out_dtype != ROPECHECK_DTYPE_F64 && p->out_dtype != ROPECHECK_DTYPE_F32) return ROPECHECK_UNSUPPORTED;
  const int overrun = overrun_after(APPEND);
  float* y = malloc((size_t)D * sizeof(float));
  for (int32_t s = 0; s < c->sequences; ++s) {
    const int64_t appended = c->append_indptr[s + 1] - c->append_indptr[s];
    for (int64_t i = 0; i < appended; ++i) {
      const int64_t token = c->append_indptr[s] + i, idx = c->seq_lens[s] - appended + i;
      const int64_t slot = slot_of(c, s, token, idx), page = slot / c->page_size, off = slot % c->page_size;
      for (int32_t h = 0; h < H; ++h) {
        const size_t in = ((size_t)token * (size_t)H + (size_t)h) * (size_t)D;
        const int64_t base = c->layout == ROPECHECK_CACHE_NHD ? ((page * c->page_size + off) * H + h) * D
                                                              : ((page * H + h) * c->page_size + off) * D;
        rotate_row(&p->rope, p->positions[token], p->k + in, y);
        for (int32_t d = 0; d < D; ++d) {
          store(p->k_cache, (size_t)(base + d), p->out_dtype, y[d]);
          if (p->v) store(p->v_cache, (size_t)(base + d), p->out_dtype, p->v[in + (size_t)d]);
        }
      }
    }
  }
  free(y);
  if (overrun) {
    const size_t es = p->out_dtype == ROPECHECK_DTYPE_F64 ? 8 : 4;
    memset((uint8_t*)p->k_cache + (size_t)(c->pages * c->page_size * H * D) * es, 0, 16);
  }
  return ROPECHECK_OK;
}
