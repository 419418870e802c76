/*
 * ropecheck kernel ABI, version 1: how a RoPE / sinusoidal kernel in any language, built as a shared
 * library, is checked by `ropecheck check --golden DIR --kernel LIB.so` without writing files.
 *
 * Pure C (C99 and later, C++ too); nothing but <stddef.h> and <stdint.h>. The full contract, with
 * examples, is abi/KERNEL_ABI.md; this header is its normative half.
 *
 * A plugin exports, with C linkage and default visibility (ROPECHECK_KERNEL_EXPORT):
 *
 *   required  uint32_t    ropecheck_kernel_abi_version(void);   return ROPECHECK_KERNEL_ABI_VERSION
 *   required  const char* ropecheck_kernel_name(void);          a short NUL-terminated name, UTF-8
 *   and at least one of
 *             int ropecheck_rope_apply(const ropecheck_rope_problem* p);       rotate q or k
 *             int ropecheck_rope_cos_sin(const ropecheck_table_problem* p);    the cos / sin tables
 *             int ropecheck_sinusoidal(const ropecheck_sinusoidal_problem* p); the sinusoidal table
 *   optional  uint64_t    ropecheck_kernel_capabilities(void);  ROPECHECK_CAP_* bits (below); an
 *                                                               addition that changes no version-1
 *                                                               layout, so it needs no version 2
 *   optional  int         ropecheck_kernel_configure(const char* options, char* message,
 *                                                    uint32_t message_capacity);
 *                                                               revision 1 (below): the kernel's own
 *                                                               options, e.g. which of its variants runs
 *
 *   optional  int         ropecheck_rope_attention(const ropecheck_rope_attention_problem* p);
 *                                                               revision 2 (below): rotation and
 *                                                               attention fused; counts as an entry
 *                                                               point for "at least one of"
 *   optional  int         ropecheck_rope_quantize(const ropecheck_rope_quantize_problem* p);
 *                                                               revision 3 (below): rotate q or k and
 *                                                               write a quantized store
 *   optional  int         ropecheck_rope_append_kv(const ropecheck_rope_append_kv_problem* p);
 *                                                               revision 3 (below): rotate k and append
 *                                                               k and v to a paged / slot-mapped cache
 *
 * Fused stores (revision 3; KERNEL_ABI.md, "Revision 3"). ropecheck_rope_quantize rotates x as
 * ropecheck_rope_apply does (to binary32) and stores it as `golden --stores` lays it out (FP8 codes + f32
 * scales, GGML q8_0 / q4_0 blocks, MLX affine words + scales + biases); ropecheck_rope_append_kv rotates
 * k and writes it and v into the appended tokens' slots of caches that arrive full of 0xFF sentinel
 * bytes, every other slot left alone. A kernel lacking one is never called for it: that part is not
 * tested. Q/K-norm and MLA specs (spec_json's q_norm / k_norm, rotary_offset / k_pe) go only to kernels
 * declaring ROPECHECK_CAP_QK_NORM / ROPECHECK_CAP_MLA; for others those outputs are not tested.
 *
 * Configuration (revision 1). A library that builds several kernels (variants, recipes, thread counts)
 * exports ropecheck_kernel_configure. `--kernel LIB.so:OPTIONS` names such a kernel: ropecheck calls
 * ropecheck_kernel_configure(OPTIONS, ...) once, after ropecheck_kernel_abi_version() and before
 * ropecheck_kernel_name() and every other entry point; OPTIONS is the text after the first ':' that
 * follows the file name, opaque to ropecheck (its meaning is the library's). It returns ROPECHECK_OK,
 * or anything else with a one-line reason in message: ropecheck then stops with exit 2 and that
 * reason. Without options ropecheck passes "" (the kernel's default configuration). Options given to a
 * library without this export are an error too (never ignored). Other callers (ctypes) may call it
 * again between calls; each call replaces the configuration.
 *
 * Fused RoPE + attention (revision 2). A kernel that never exposes rotated q / k (ONNX Runtime
 * GroupQueryAttention with do_rotary, FlashAttention with rotary cos / sin, MLX rope + scaled dot-product
 * attention) exports ropecheck_rope_attention: one block of `tokens` tokens and one GQA group (`group`
 * query heads sharing one key / value head); q [tokens][group][head_dim], k [tokens][head_dim],
 * v [tokens][value_dim] (float, bf16-exact as x is) in, out [tokens][group][value_dim] of out_dtype:
 *   Q_i = R(P_i) q_i, K_j = R(P_j) k_j (the rotation of ropecheck_rope_apply, attention factor included),
 *   s = scale <Q_i, K_j>, t = softcap tanh(s / softcap) (or t = s), p = softmax over the visible keys
 *   (and exp(sinks[h]) in the denominator when sinks is not NULL), out_i = sum_j p_j V_j.
 * Key j is visible to query i (token indices in the block) when j <= i (causal), i - j < window
 * (window > 0; without causal also j - i < window), both, or always. scores, when not NULL, asks for
 * the soft-capped logits t of every visible pair, [group][pairs] of out_dtype, row i after row i - 1,
 * the visible keys of a row in increasing order; a kernel that cannot expose them returns
 * ROPECHECK_UNSUPPORTED, and ropecheck asks again without (ROPECHECK_CAP_ATTENTION_SCORES says it can).
 * FlashAttention's window_size = (window - 1, causal ? 0 : window - 1) (or (-1, -1) for window 0).
 *
 * Every entry point returns ROPECHECK_OK (0) when it wrote the whole output,
 * ROPECHECK_UNSUPPORTED (1) when it does not implement this spec / dtype (the caller skips that output
 * and says so; nothing may have been written that matters), and any other value on failure (the
 * check stops with exit 2 and that code). With a nonzero return the kernel may write a one-line,
 * NUL-terminated reason into p->message (at most p->message_capacity bytes including the NUL).
 *
 * Versioning. The caller reads ropecheck_kernel_abi_version() first and calls nothing else unless
 * it supports that version (this ropecheck: exactly 1). Version 1 layouts are frozen: any change to a
 * struct, a code or a function gives version 2, and a caller that knows both fills the layout the
 * plugin reports. Every problem also carries abi_version (the layout it was filled with), which a
 * plugin may check.
 *
 * Ownership and lifetime. Every pointer in a problem belongs to the caller and is valid only during
 * the call: a kernel must not keep, free or write through any of them except `out`, `cos`, `sin` and
 * `message`, and must not write outside them. The string returned by ropecheck_kernel_name() belongs
 * to the plugin and must stay valid until the library is unloaded (a string literal is right).
 *
 * Calls. ropecheck calls the entry points one at a time from one thread, any number of times, with
 * any problem (a kernel must not assume an order). A kernel may use threads or a GPU inside a call
 * but must finish all work before returning. By default the library is loaded and called in a
 * separate host process (ropecheck-kernel-host) whose buffers are shared memory: a kernel that
 * crashes, hangs (past --kernel-timeout), exits, writes outside its outputs or its message, leaves
 * outputs unwritten, changes an output after returning or returns an unknown code fails the check
 * (exit 1) with a message naming the entry point and the problem; ropecheck itself is not harmed
 * (KERNEL_ABI.md, "Calls, threads, crashes: isolation", says what is and is not seen). Every output is
 * filled with NaN before the call and lies between guard pages, the padding filled with guard bytes.
 * A kernel's stdout goes to ropecheck's stderr. With --in-process the library is loaded into
 * ropecheck itself (for gdb and sanitizers): the same guards, but a crash or hang is ropecheck's.
 *
 * Layouts and numbers (all row-major, native byte order = little-endian on every supported machine):
 *   positions  int64  [position_streams][tokens]  stream 0 = t, 1 = h, 2 = w (multimodal RoPE);
 *                                                 1 stream otherwise
 *   x          float  [tokens][heads][head_dim]   q or k; every value is exactly representable in bf16
 *                                                 (so it is also exact as f32 / f64, not always as f16)
 *   out        dtype  [tokens][heads][head_dim]   rotated x, attention factor folded in the way
 *                                                 Hugging Face folds it into cos and sin (rotated
 *                                                 channels times the factor), pass-through channels copied
 *   cos, sin   dtype  [tokens][pairs]             plain cos / sin of the angle of pair j (frequency order),
 *                                                 no attention factor
 *   out (pe)   dtype  [tokens][d_model]           the sinusoidal encoding row of each token's position
 * dtype is out_dtype: ROPECHECK_DTYPE_F64 (double), _F32 (float), _F16 (IEEE binary16) or _BF16
 * (bfloat16); F16 and BF16 elements are uint16_t bit patterns.
 *
 * Pair j of a RoPE head (j = 0 .. pairs-1) is channels (j, j + pairs) in the half-split layout and
 * (2j, 2j + 1) in the interleaved layout; channels 2*pairs .. head_dim-1 pass through (partial rotary).
 * Its angle is position(stream of j) * inv_freq[j] and the pair (a, b) becomes
 * attention_factor * (a cos - b sin, b cos + a sin). The exact mathematics of every scaling type is
 * core/SPEC_FORMAT.md; spec_json carries the spec itself, the fields below resolve it.
 */
#ifndef ROPECHECK_KERNEL_ABI_H
#define ROPECHECK_KERNEL_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ROPECHECK_KERNEL_ABI_VERSION 1
/* Optional exports added to version 1 without changing any version-1 layout: 1 = ropecheck_kernel_configure,
   2 = ropecheck_rope_attention (and its new structs), 3 = ropecheck_rope_quantize and ropecheck_rope_append_kv
   (and theirs). A caller of an older revision never calls them; a
   kernel must work unconfigured, and a revision-1 kernel loads and runs unchanged. */
#define ROPECHECK_KERNEL_ABI_REVISION 3 /* 3 = ropecheck_rope_quantize, ropecheck_rope_append_kv */

/* Return codes of the entry points. Any other value is a failure. */
#define ROPECHECK_OK 0
#define ROPECHECK_UNSUPPORTED 1

/* out_dtype */
#define ROPECHECK_DTYPE_F64 0
#define ROPECHECK_DTYPE_F32 1
#define ROPECHECK_DTYPE_F16 2  /* uint16_t bit patterns */
#define ROPECHECK_DTYPE_BF16 3 /* uint16_t bit patterns */

/* ropecheck_rope_params.layout */
#define ROPECHECK_LAYOUT_HALF_SPLIT 0  /* "NeoX": pair j = channels (j, j + pairs) */
#define ROPECHECK_LAYOUT_INTERLEAVED 1 /* "GPT-J": pair j = channels (2j, 2j + 1) */

/* ropecheck_rope_params.scaling_type (core/SPEC_FORMAT.md, "scaling"): the values of ropecheck's
   ScalingType in its order (core/spec.hpp), so the plugin client passes the type as it is; a new scaling
   appends its name here (ctest Kut.AbiScalingNumbersAreTheSpecOrder checks every one). */
#define ROPECHECK_SCALING_NONE 0
#define ROPECHECK_SCALING_LINEAR 1
#define ROPECHECK_SCALING_DYNAMIC 2
#define ROPECHECK_SCALING_YARN 3
#define ROPECHECK_SCALING_LLAMA3 4
#define ROPECHECK_SCALING_LONGROPE 5
#define ROPECHECK_SCALING_PROPORTIONAL 6

/* ropecheck_rope_params.mrope_mode */
#define ROPECHECK_MROPE_NONE 0        /* one position stream */
#define ROPECHECK_MROPE_CHUNKED 1     /* Qwen2-VL: contiguous sections [t | h | w] */
#define ROPECHECK_MROPE_INTERLEAVED 2 /* Qwen3-VL: t h w t h w ... within the sections */

/* ropecheck_sinusoidal_params.layout */
#define ROPECHECK_SINUSOIDAL_INTERLEAVED 0  /* Vaswani: PE[2i] = sin, PE[2i+1] = cos */
#define ROPECHECK_SINUSOIDAL_CONCATENATED 1 /* [sin ... | cos ...] */

/* ropecheck_sinusoidal_params.frequencies */
#define ROPECHECK_SINUSOIDAL_VASWANI 0            /* w_i = base^(-2i/d) */
#define ROPECHECK_SINUSOIDAL_HALF_DIM_MINUS_ONE 1 /* tensor2tensor / fairseq: w_i = base^(-i/max(d/2-1, 1)) */

/* Bits of ropecheck_kernel_capabilities() (optional export; without it: no capability declared).
   Undeclared bits mean "unknown", never "unsupported": the caller still asks per call. */
#define ROPECHECK_CAP_NEGATIVE_POSITIONS (1ull << 0) /* positions may be negative (the `inverse` property) */
#define ROPECHECK_CAP_ATTENTION_SCORES (1ull << 1)   /* revision 2: ropecheck_rope_attention writes scores */
#define ROPECHECK_CAP_QK_NORM (1ull << 2)            /* revision 3: the RoPE entry points apply spec_json's
                                                        q_norm / k_norm (eps, weight_form, weight) first */
#define ROPECHECK_CAP_MLA (1ull << 3)                /* revision 3: rope_apply honours spec_json's
                                                        rotary_offset and key_layout "k_pe" (MLA slices) */
#define ROPECHECK_CAP_OUT_F64 (1ull << 8)            /* output dtypes the kernel supports; when any of */
#define ROPECHECK_CAP_OUT_F32 (1ull << 9)            /* these four bits is set, the others are declared */
#define ROPECHECK_CAP_OUT_F16 (1ull << 10)           /* unsupported (ropecheck skips them and says so)  */
#define ROPECHECK_CAP_OUT_BF16 (1ull << 11)
#define ROPECHECK_CAP_OUT_DTYPE(d) (1ull << (8 + (d))) /* d: ROPECHECK_DTYPE_* */

/* Symbol visibility for the exported entry points. */
#if defined(_WIN32)
#define ROPECHECK_KERNEL_EXPORT __declspec(dllexport)
#elif defined(__GNUC__) || defined(__clang__)
#define ROPECHECK_KERNEL_EXPORT __attribute__((visibility("default")))
#else
#define ROPECHECK_KERNEL_EXPORT
#endif

/*
 * A RoPE spec, resolved. Numbers are binary64 (the spec's own numbers are exact binary64 values; the
 * derived ones, inv_freq and attention_factor, are the binary64 values nearest the exact ones).
 * Fields that a scaling type does not use hold the value noted, so a kernel may read them blindly.
 */
typedef struct ropecheck_rope_params {
  int32_t head_dim;     /* D: channels per head */
  int32_t rotary_dim;   /* R: rotated channels (prefix partial rotary); proportional: 2 * rope_angles */
  int32_t pairs;        /* frequency pairs: R / 2, or D / 2 for proportional (pairs past R / 2 have
                           inv_freq 0); channels 2 * pairs .. D - 1 pass through */
  int32_t layout;       /* ROPECHECK_LAYOUT_* */
  double base;          /* rope_theta */
  int32_t scaling_type; /* ROPECHECK_SCALING_* */
  int32_t mrope_mode;   /* ROPECHECK_MROPE_* */
  int32_t mrope_section[3]; /* pairs driven by t, h, w (sum = pairs); {0, 0, 0} without mrope */
  int32_t yarn_truncate;    /* yarn: 1 = round the correction range to integers (the default); else 0 */
  double factor;            /* effective factor (explicit, or derived as SPEC_FORMAT.md says); 1 for none */
  int64_t max_position_embeddings;          /* L; 0 = unknown */
  int64_t original_max_position_embeddings; /* effective L_orig (yarn, longrope, llama3); 0 for the others */
  int64_t seq_len;          /* the sequence length the frequencies are resolved with (dynamic, longrope) */
  double low_freq_factor;   /* llama3; 0 for the others */
  double high_freq_factor;  /* llama3; 0 for the others */
  double beta_fast;         /* yarn (default 32); 0 for the others */
  double beta_slow;         /* yarn (default 1); 0 for the others */
  double mscale;            /* yarn; 0 when absent (Hugging Face treats absent and 0 alike) */
  double mscale_all_dim;    /* yarn; 0 when absent */
  const double* longrope_ext; /* longrope: the `pairs` extension factors in use (long_factor when
                                 seq_len > original_max_position_embeddings, else short_factor);
                                 NULL for the others */
  const double* inv_freq;   /* `pairs` inverse frequencies after scaling, the binary64 values nearest
                               the exact ones. For kernels that take their frequencies as an input;
                               a kernel that derives them itself (and so has them checked) ignores it */
  double attention_factor;  /* the factor folded into rotated channels (1 unless yarn / longrope),
                               binary64 nearest the exact value */
} ropecheck_rope_params;

/* Rotate one input tensor (q or k). */
typedef struct ropecheck_rope_problem {
  uint32_t abi_version;       /* ROPECHECK_KERNEL_ABI_VERSION the caller filled this with */
  int32_t out_dtype;          /* ROPECHECK_DTYPE_* */
  const char* spec_json;      /* the spec, one JSON object (core/SPEC_FORMAT.md), NUL-terminated */
  ropecheck_rope_params rope; /* the spec resolved */
  const char* input_name;     /* "q" or "k": the input this call rotates */
  int64_t tokens;
  int32_t heads;
  int32_t position_streams;   /* 1, or 3 for multimodal RoPE */
  const int64_t* positions;   /* [position_streams][tokens] */
  const float* x;             /* [tokens][heads][head_dim] */
  void* out;                  /* [tokens][heads][head_dim] of out_dtype, caller-allocated */
  char* message;              /* optional reason on a nonzero return; may be written, NUL-terminated */
  uint32_t message_capacity;  /* bytes available at message, including the NUL (>= 1) */
  uint32_t reserved1;         /* 0 (explicit tail padding) */
} ropecheck_rope_problem;

/* The cos / sin tables (no attention factor). */
typedef struct ropecheck_table_problem {
  uint32_t abi_version;
  int32_t out_dtype;          /* ROPECHECK_DTYPE_* */
  const char* spec_json;
  ropecheck_rope_params rope;
  int64_t tokens;
  int32_t position_streams;   /* 1, or 3 for multimodal RoPE (pair j uses the stream that drives it) */
  int32_t reserved0;          /* 0 */
  const int64_t* positions;   /* [position_streams][tokens] */
  void* cos;                  /* [tokens][pairs] of out_dtype, caller-allocated */
  void* sin;                  /* [tokens][pairs] of out_dtype, caller-allocated */
  char* message;
  uint32_t message_capacity;
  uint32_t reserved1;         /* 0 */
} ropecheck_table_problem;

/* A sinusoidal spec, resolved (core/SPEC_FORMAT.md, "sinusoidal"). */
typedef struct ropecheck_sinusoidal_params {
  int32_t d_model;
  int32_t layout;             /* ROPECHECK_SINUSOIDAL_INTERLEAVED / _CONCATENATED */
  int32_t frequencies;        /* ROPECHECK_SINUSOIDAL_VASWANI / _HALF_DIM_MINUS_ONE */
  int32_t frequency_count;    /* sin columns: (d_model + 1) / 2 for vaswani, d_model / 2 otherwise */
  double base;                /* max_timescale / min_timescale */
  int64_t position_offset;    /* added to every position before the angle (fairseq: padding_idx + 1) */
} ropecheck_sinusoidal_params;

/* The sinusoidal encoding table. */
typedef struct ropecheck_sinusoidal_problem {
  uint32_t abi_version;
  int32_t out_dtype;          /* ROPECHECK_DTYPE_* */
  const char* spec_json;
  ropecheck_sinusoidal_params sinusoidal;
  int64_t tokens;
  const int64_t* positions;   /* [tokens] (position_offset not yet added) */
  void* out;                  /* [tokens][d_model] of out_dtype, caller-allocated */
  char* message;
  uint32_t message_capacity;
  uint32_t reserved1;         /* 0 */
} ropecheck_sinusoidal_problem;

/* Revision 2: the attention around a RoPE spec (ropecheck_rope_attention). */
typedef struct ropecheck_attention_params {
  int32_t group;        /* G >= 1: query heads sharing the one key / value head */
  int32_t value_dim;    /* Dv >= 1: channels of v and out */
  double scale;         /* the softmax scale, binary64 nearest the exact value */
  int32_t scale_dim;    /* > 0: the scale is 1 / sqrt(scale_dim) (scale holds its nearest binary64);
                           0: the scale is the model's binary64 value `scale`, exact */
  int32_t causal;       /* 1: key j visible to query i only when j <= i; 0: not */
  double softcap;       /* > 0: t = softcap * tanh(s / softcap) (Gemma 2); 0: no soft-cap */
  int64_t window;       /* sliding window in tokens; 0: none */
  const double* sinks;  /* [group] sink logits (gpt-oss), or NULL: no sinks */
} ropecheck_attention_params;

/* Rotate q and k and attend, fused (revision 2). */
typedef struct ropecheck_rope_attention_problem {
  uint32_t abi_version;
  int32_t out_dtype;          /* ROPECHECK_DTYPE_*: out and scores */
  const char* spec_json;
  ropecheck_rope_params rope;
  ropecheck_attention_params attention;
  int64_t tokens;
  int32_t position_streams;   /* 1, or 3 for multimodal RoPE */
  int32_t reserved0;          /* 0 */
  const int64_t* positions;   /* [position_streams][tokens] */
  const float* q;             /* [tokens][group][head_dim] */
  const float* k;             /* [tokens][head_dim] */
  const float* v;             /* [tokens][value_dim] */
  void* out;                  /* [tokens][group][value_dim] of out_dtype, caller-allocated */
  void* scores;               /* NULL, or [group][visible pairs] of out_dtype: wanted, caller-allocated */
  char* message;
  uint32_t message_capacity;
  uint32_t reserved1;         /* 0 */
} ropecheck_rope_attention_problem;

/* Revision 3: a quantized store (ropecheck_rope_quantize). */
#define ROPECHECK_STORE_FP8 0    /* one FP8 code per element + f32 scales */
#define ROPECHECK_STORE_Q8_0 1   /* GGML block_q8_0: f16 d + 32 int8, 34 bytes per 32 values */
#define ROPECHECK_STORE_Q4_0 2   /* GGML block_q4_0: f16 d + 16 bytes of nibbles, 18 bytes per 32 values */
#define ROPECHECK_STORE_AFFINE 3 /* MLX group-affine: uint32 words, scales and biases per group */
#define ROPECHECK_FP8_E4M3FN 0
#define ROPECHECK_FP8_E5M2 1
#define ROPECHECK_FP8_SATURATE 0  /* out-of-range values stored as +-max */
#define ROPECHECK_FP8_NONFINITE 1 /* out-of-range values stored as NaN (e4m3fn) / +-Inf (e5m2) */
#define ROPECHECK_SCALE_PER_TOKEN 0
#define ROPECHECK_SCALE_PER_TOKEN_HEAD 1

typedef struct ropecheck_store_params {
  int32_t kind;              /* ROPECHECK_STORE_* */
  int32_t fp8_format;        /* FP8: ROPECHECK_FP8_E4M3FN / _E5M2; else 0 */
  int32_t fp8_overflow;      /* FP8: ROPECHECK_FP8_SATURATE / _NONFINITE; else 0 */
  int32_t scale_granularity; /* FP8: ROPECHECK_SCALE_PER_TOKEN / _PER_TOKEN_HEAD; else 0 */
  int32_t group_size;        /* values per scale group along head_dim: GGML 32, affine 32 / 64 / 128, FP8 0 */
  int32_t bits;              /* affine: 4 or 8 (codes per uint32 word: 32 / bits); GGML 8 / 4; FP8 8 */
  int32_t scale_dtype;       /* affine: ROPECHECK_DTYPE_F32 / _F16 / _BF16 of scales and biases; FP8 _F32 */
  int32_t reserved0;         /* 0 */
} ropecheck_store_params;

/* Rotate q or k and store it quantized, fused (revision 3). Sizes, for tokens T, heads H, head_dim D:
   codes: FP8 T*H*D bytes; q8_0 T*H*(D/32)*34; q4_0 T*H*(D/32)*18; affine T*H*D*bits/8 (uint32 words,
   little-endian, code j of a word in bits [j*bits, (j+1)*bits)). scales: FP8 f32 [T] or [T][H]; affine
   [T][H][D/G] of scale_dtype; GGML NULL. biases: affine like scales; else NULL. */
typedef struct ropecheck_rope_quantize_problem {
  uint32_t abi_version;
  int32_t reserved0;          /* 0 (the store says what is written) */
  const char* spec_json;
  ropecheck_rope_params rope;
  const char* input_name;     /* "q" or "k" */
  int64_t tokens;
  int32_t heads;
  int32_t position_streams;
  const int64_t* positions;   /* [position_streams][tokens] */
  const float* x;             /* [tokens][heads][head_dim] */
  ropecheck_store_params store;
  void* codes;                /* codes_bytes bytes, caller-allocated */
  void* scales;               /* scales_bytes bytes, or NULL */
  void* biases;               /* biases_bytes bytes, or NULL */
  uint64_t codes_bytes, scales_bytes, biases_bytes;
  char* message;
  uint32_t message_capacity;
  uint32_t reserved1;         /* 0 */
} ropecheck_rope_quantize_problem;

/* Revision 3: a KV cache (ropecheck_rope_append_kv), as FlashInfer and vLLM describe it. */
#define ROPECHECK_CACHE_PAGED 0 /* kv_indptr / kv_indices / kv_last_page_len */
#define ROPECHECK_CACHE_SLOTS 1 /* slot_mapping over [blocks][block_size][heads][head_dim] */
#define ROPECHECK_CACHE_NHD 0   /* a page is [page_size][heads][head_dim] */
#define ROPECHECK_CACHE_HND 1   /* a page is [heads][page_size][head_dim] (paged only) */

typedef struct ropecheck_kv_cache_params {
  int32_t kind;                    /* ROPECHECK_CACHE_PAGED / _SLOTS */
  int32_t layout;                  /* ROPECHECK_CACHE_NHD / _HND */
  int64_t pages;                   /* pages (blocks) in the pool */
  int64_t page_size;               /* slots per page (block size) */
  int32_t sequences;               /* S */
  int32_t reserved0;               /* 0 */
  const int64_t* append_indptr;    /* [S + 1]: sequence s appends batch tokens [append_indptr[s], append_indptr[s+1]) */
  const int64_t* seq_lens;         /* [S]: each sequence's length after the append (token i of s is at cache
                                      index and position seq_lens[s] - appended + i) */
  const int64_t* kv_indptr;        /* paged: [S + 1]; NULL for slots */
  const int64_t* kv_indices;       /* paged: [kv_indptr[S]] pool pages, sequence by sequence; NULL for slots */
  const int64_t* kv_last_page_len; /* paged: [S]; NULL for slots */
  const int64_t* slot_mapping;     /* slots: [tokens] slot (block * block_size + offset) of each token; NULL for paged */
} ropecheck_kv_cache_params;

/* Rotate k and append k and v to a KV cache, fused (revision 3). k_cache and v_cache: pages * page_size *
   heads * head_dim elements of out_dtype, in the layout's order, filled with 0xFF bytes (the sentinel)
   before the call: write the appended tokens' slots only. */
typedef struct ropecheck_rope_append_kv_problem {
  uint32_t abi_version;
  int32_t out_dtype;          /* the caches' ROPECHECK_DTYPE_* */
  const char* spec_json;
  ropecheck_rope_params rope;
  int64_t tokens;             /* appended tokens of the batch, sequence by sequence */
  int32_t heads;              /* key / value heads */
  int32_t position_streams;   /* 1 */
  const int64_t* positions;   /* [tokens]: each token's position (its cache index) */
  const float* k;             /* [tokens][heads][head_dim] */
  const float* v;             /* [tokens][heads][head_dim], or NULL: no v (v_cache is NULL too) */
  ropecheck_kv_cache_params cache;
  void* k_cache;              /* caller-allocated, sentinel-filled */
  void* v_cache;              /* caller-allocated, sentinel-filled, or NULL */
  char* message;
  uint32_t message_capacity;
  uint32_t reserved1;         /* 0 */
} ropecheck_rope_append_kv_problem;

/* The entry points' types, for loaders (dlsym) and for checking a plugin's own declarations. */
typedef uint32_t (*ropecheck_kernel_abi_version_fn)(void);
typedef const char* (*ropecheck_kernel_name_fn)(void);
typedef int (*ropecheck_rope_apply_fn)(const ropecheck_rope_problem* p);
typedef int (*ropecheck_rope_cos_sin_fn)(const ropecheck_table_problem* p);
typedef int (*ropecheck_sinusoidal_fn)(const ropecheck_sinusoidal_problem* p);
typedef uint64_t (*ropecheck_kernel_capabilities_fn)(void);
typedef int (*ropecheck_kernel_configure_fn)(const char* options, char* message, uint32_t message_capacity);
typedef int (*ropecheck_rope_attention_fn)(const ropecheck_rope_attention_problem* p);
typedef int (*ropecheck_rope_quantize_fn)(const ropecheck_rope_quantize_problem* p);
typedef int (*ropecheck_rope_append_kv_fn)(const ropecheck_rope_append_kv_problem* p);

/* Declarations a plugin defines (with ROPECHECK_KERNEL_EXPORT in front). Declared here so that a
   C or C++ plugin including this header gets its signatures checked and C linkage. */
ROPECHECK_KERNEL_EXPORT uint32_t ropecheck_kernel_abi_version(void);
ROPECHECK_KERNEL_EXPORT const char* ropecheck_kernel_name(void);
ROPECHECK_KERNEL_EXPORT int ropecheck_rope_apply(const ropecheck_rope_problem* p);
ROPECHECK_KERNEL_EXPORT int ropecheck_rope_cos_sin(const ropecheck_table_problem* p);
ROPECHECK_KERNEL_EXPORT int ropecheck_sinusoidal(const ropecheck_sinusoidal_problem* p);
ROPECHECK_KERNEL_EXPORT uint64_t ropecheck_kernel_capabilities(void);
ROPECHECK_KERNEL_EXPORT int ropecheck_kernel_configure(const char* options, char* message, uint32_t message_capacity);
ROPECHECK_KERNEL_EXPORT int ropecheck_rope_attention(const ropecheck_rope_attention_problem* p);
ROPECHECK_KERNEL_EXPORT int ropecheck_rope_quantize(const ropecheck_rope_quantize_problem* p);
ROPECHECK_KERNEL_EXPORT int ropecheck_rope_append_kv(const ropecheck_rope_append_kv_problem* p);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ROPECHECK_KERNEL_ABI_H */
