/*
 * A deliberately broken kernel plugin: plugin_hf_fp32 with one bug, the inverse frequencies stored
 * in bfloat16 (a buffer registered in the activation dtype, a common mistake when a model is cast
 * to bf16 wholesale). Each frequency is then off by up to 2^-9 relative, so the angle error grows
 * like position x frequency x 2^-9: harmless at position 0, whole radians at 100k.
 *
 * The tests check that `ropecheck check --kernel` fails it (exit 1) and that the report names the
 * positions where it goes wrong.
 */
static float example_round_to_bf16(float w);

#define EXAMPLE_KERNEL_NAME "broken-bf16-invfreq"
#define EXAMPLE_INV_FREQ_HOOK(w) example_round_to_bf16(w)
#include "../plugin_hf_fp32/plugin_hf_fp32.c"

/* The bug: round to bf16 (nearest even) and back. */
static float example_round_to_bf16(float w) {
  const uint32_t u = (uint32_t)f32_to_bf16(w) << 16;
  float r;
  memcpy(&r, &u, sizeof r);
  return r;
}
