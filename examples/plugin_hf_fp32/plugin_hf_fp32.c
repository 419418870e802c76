/*
 * A ropecheck kernel plugin (abi/KERNEL_ABI.md): RoPE computed the way Hugging Face Llama computes
 * it in float32 (transformers' _compute_default_rope_parameters / _compute_linear_scaling_rope_parameters
 * / _compute_llama3_parameters, LlamaRotaryEmbedding.forward, apply_rotary_pos_emb):
 *
 *   inv[j]  = 1 / powf(base, (float)(2j) / R)                 every step in float32
 *   linear:   inv[j] = inv[j] / factor
 *   llama3:   wavelen = 2 pi / inv[j]; divided by factor where wavelen > L_orig / low_freq_factor,
 *             smoothed ((1 - s) inv / factor + s inv, s = (L_orig / wavelen - low) / (high - low))
 *             where neither wavelen < L_orig / high_freq_factor nor wavelen > L_orig / low_freq_factor
 *   angle   = (float)position * inv[j]                         one float32 product
 *   cos/sin = cosf(angle) * attention_factor, sinf(angle) * attention_factor   (factor 1 here)
 *   rotated = x * cos + rotate_half(x) * sin                   float32 products and sum
 *   stored    rounded once, round-to-nearest-even, to the output dtype (f32 / f16 / bf16)
 *
 * for the half-split and interleaved layouts and partial rotary (channels past 2 * pairs copied).
 * Everything else answers ROPECHECK_UNSUPPORTED with a reason: other scalings (dynamic, yarn,
 * longrope, proportional), multimodal RoPE, and f64 output (a float32 kernel has no f64 result of
 * its own; widening its f32 values would claim an f64 kernel that does not exist).
 *
 * It needs nothing but ropecheck/kernel_abi.h and libm, reads nothing from spec_json, and ignores
 * the reference's inv_freq: the frequencies are derived here, so the check covers them too.
 * Expected verdict: class fp32-angle (ropecheck check --golden DIR --kernel plugin_hf_fp32.so).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ropecheck/kernel_abi.h"

#ifndef EXAMPLE_KERNEL_NAME
#define EXAMPLE_KERNEL_NAME "hf-llama-fp32"
#endif
/* Applied to every final inverse frequency (plugin_broken_bf16_invfreq plugs a bug in here). */
#ifndef EXAMPLE_INV_FREQ_HOOK
#define EXAMPLE_INV_FREQ_HOOK(w) (w)
#endif

#define EXAMPLE_PI 3.14159265358979323846 /* Python's math.pi */
#define EXAMPLE_FAILURE 2                 /* any code but 0 and 1 means failure */

ROPECHECK_KERNEL_EXPORT uint32_t ropecheck_kernel_abi_version(void) { return ROPECHECK_KERNEL_ABI_VERSION; }

ROPECHECK_KERNEL_EXPORT const char* ropecheck_kernel_name(void) { return EXAMPLE_KERNEL_NAME; }

static void say(char* message, uint32_t capacity, const char* text) {
  if (message && capacity > 0) snprintf(message, capacity, "%s", text);
}

static uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/* float32 -> bfloat16 bits, round-to-nearest-even; NaN stays a (quiet) NaN. */
static uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x0040u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

/* float32 -> IEEE binary16 bits, round-to-nearest-even, with subnormals and overflow to infinity. */
static uint16_t f32_to_f16(float f) {
  const uint32_t u = f32_bits(f);
  const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a >= 0x7F800000u) return (uint16_t)(sign | (a > 0x7F800000u ? 0x7E00u : 0x7C00u)); /* NaN, Inf */
  if (a >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u); /* >= 65520: rounds to infinity */
  if (a >= 0x38800000u) {                                  /* normal binary16 (>= 2^-14) */
    const uint32_t r = a + 0x0FFFu + ((a >> 13) & 1u);     /* round at bit 13 (ties to even) */
    return (uint16_t)(sign | ((r - 0x38000000u) >> 13));    /* rebias 127 -> 15 */
  }
  /* Below 2^-14: a multiple of 2^-24. |f| * 2^24 is exact in float32; rintf rounds to nearest even. */
  const float units = rintf(fabsf(f) * 16777216.0f); /* 0 .. 1024 (1024 = 2^-14, the smallest normal) */
  return (uint16_t)(sign | (uint16_t)units);
}

/* One float32 result stored in the output dtype (f32, f16 or bf16). */
static void store(void* out, int32_t dtype, size_t i, float v) {
  if (dtype == ROPECHECK_DTYPE_F32)
    ((float*)out)[i] = v;
  else if (dtype == ROPECHECK_DTYPE_F16)
    ((uint16_t*)out)[i] = f32_to_f16(v);
  else
    ((uint16_t*)out)[i] = f32_to_bf16(v);
}

/* ROPECHECK_OK if this kernel implements the spec and dtype, else ROPECHECK_UNSUPPORTED with a reason. */
static int supported(const ropecheck_rope_params* r, int32_t streams, int32_t dtype, char* message, uint32_t capacity) {
  if (dtype != ROPECHECK_DTYPE_F32 && dtype != ROPECHECK_DTYPE_F16 && dtype != ROPECHECK_DTYPE_BF16) {
    say(message, capacity, "float32 kernel: outputs f32, f16 and bf16 only");
    return ROPECHECK_UNSUPPORTED;
  }
  if (r->scaling_type != ROPECHECK_SCALING_NONE && r->scaling_type != ROPECHECK_SCALING_LINEAR &&
      r->scaling_type != ROPECHECK_SCALING_LLAMA3) {
    say(message, capacity, "scaling not implemented (none, linear and llama3 only)");
    return ROPECHECK_UNSUPPORTED;
  }
  if (r->mrope_mode != ROPECHECK_MROPE_NONE || streams != 1) {
    say(message, capacity, "multimodal RoPE not implemented");
    return ROPECHECK_UNSUPPORTED;
  }
  if (r->layout != ROPECHECK_LAYOUT_HALF_SPLIT && r->layout != ROPECHECK_LAYOUT_INTERLEAVED) {
    say(message, capacity, "unknown layout");
    return ROPECHECK_UNSUPPORTED;
  }
  return ROPECHECK_OK;
}

/* The inverse frequencies, float32 throughout, as transformers computes them. */
static void hf_inv_freq(const ropecheck_rope_params* r, float* inv) {
  const int32_t R = r->rotary_dim, P = r->pairs;
  const float base = (float)r->base;
  for (int32_t j = 0; j < P; ++j) inv[j] = 1.0f / powf(base, (float)(2 * j) / (float)R);

  if (r->scaling_type == ROPECHECK_SCALING_LINEAR) {
    const float factor = (float)r->factor;
    for (int32_t j = 0; j < P; ++j) inv[j] = inv[j] / factor;
  } else if (r->scaling_type == ROPECHECK_SCALING_LLAMA3) {
    /* Python scalars meet float32 tensors: each is converted to float32 where it is used. */
    const double old_context = (double)r->original_max_position_embeddings;
    const float factor = (float)r->factor;
    const float low = (float)r->low_freq_factor;
    const float low_wavelen = (float)(old_context / r->low_freq_factor);
    const float high_wavelen = (float)(old_context / r->high_freq_factor);
    const float band = (float)(r->high_freq_factor - r->low_freq_factor);
    const float two_pi = (float)(2 * EXAMPLE_PI);
    for (int32_t j = 0; j < P; ++j) {
      const float wavelen = two_pi / inv[j];
      const float llama = wavelen > low_wavelen ? inv[j] / factor : inv[j];
      const float smooth = ((float)old_context / wavelen - low) / band;
      const float smoothed = (1.0f - smooth) * llama / factor + smooth * llama;
      const int medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
      inv[j] = medium ? smoothed : llama;
    }
  }
  for (int32_t j = 0; j < P; ++j) inv[j] = EXAMPLE_INV_FREQ_HOOK(inv[j]);
}

ROPECHECK_KERNEL_EXPORT int ropecheck_rope_apply(const ropecheck_rope_problem* p) {
  if (!p || p->abi_version != ROPECHECK_KERNEL_ABI_VERSION) return EXAMPLE_FAILURE;
  const int rc = supported(&p->rope, p->position_streams, p->out_dtype, p->message, p->message_capacity);
  if (rc != ROPECHECK_OK) return rc;

  const size_t P = (size_t)p->rope.pairs, D = (size_t)p->rope.head_dim, H = (size_t)p->heads;
  const size_t T = (size_t)p->tokens;
  const int interleaved = p->rope.layout == ROPECHECK_LAYOUT_INTERLEAVED;
  float* inv = malloc((3 * P + 1) * sizeof(float));
  if (!inv) {
    say(p->message, p->message_capacity, "out of memory");
    return EXAMPLE_FAILURE;
  }
  float* c = inv + P;
  float* s = c + P;
  hf_inv_freq(&p->rope, inv);
  const float att = (float)p->rope.attention_factor;

  for (size_t t = 0; t < T; ++t) {
    const float pos = (float)p->positions[t];
    for (size_t j = 0; j < P; ++j) {
      const float theta = pos * inv[j];
      c[j] = cosf(theta) * att;
      s[j] = sinf(theta) * att;
    }
    for (size_t h = 0; h < H; ++h) {
      const size_t row = (t * H + h) * D;
      const float* x = p->x + row;
      for (size_t j = 0; j < P; ++j) {
        const size_t ia = interleaved ? 2 * j : j, ib = interleaved ? 2 * j + 1 : j + P;
        const float a = x[ia], b = x[ib];
        store(p->out, p->out_dtype, row + ia, a * c[j] + (-b) * s[j]); /* x * cos + rotate_half(x) * sin */
        store(p->out, p->out_dtype, row + ib, b * c[j] + a * s[j]);
      }
      for (size_t ch = 2 * P; ch < D; ++ch) store(p->out, p->out_dtype, row + ch, x[ch]); /* pass-through */
    }
  }
  free(inv);
  return ROPECHECK_OK;
}

ROPECHECK_KERNEL_EXPORT int ropecheck_rope_cos_sin(const ropecheck_table_problem* p) {
  if (!p || p->abi_version != ROPECHECK_KERNEL_ABI_VERSION) return EXAMPLE_FAILURE;
  const int rc = supported(&p->rope, p->position_streams, p->out_dtype, p->message, p->message_capacity);
  if (rc != ROPECHECK_OK) return rc;

  const size_t P = (size_t)p->rope.pairs, T = (size_t)p->tokens;
  float* inv = malloc((P + 1) * sizeof(float));
  if (!inv) {
    say(p->message, p->message_capacity, "out of memory");
    return EXAMPLE_FAILURE;
  }
  hf_inv_freq(&p->rope, inv);
  for (size_t t = 0; t < T; ++t) {
    const float pos = (float)p->positions[t];
    for (size_t j = 0; j < P; ++j) {
      const float theta = pos * inv[j];
      store(p->cos, p->out_dtype, t * P + j, cosf(theta)); /* plain tables: no attention factor */
      store(p->sin, p->out_dtype, t * P + j, sinf(theta));
    }
  }
  free(inv);
  return ROPECHECK_OK;
}
