/*
 * A kernel plugin that misbehaves in one way per build (-DMODE_<name>), for the plugin client's
 * isolation (plugin/include/ropecheck/plugin/client.hpp; tests/cli/test_isolation.sh).
 * Without a misbehaviour (MODE_good) it is a correct binary64 RoPE kernel (rope_apply and
 * rope_cos_sin, f64 / f32 output, any scaling: it takes the inverse frequencies and attention
 * factor the caller passes; one position stream) that passes check, props and drift. It also
 * exports the fused ropecheck_rope_attention (kernel_abi.h revision 2: binary64 rotation and
 * attention, no scores), where each mode misbehaves the same way.
 *
 *   good            correct
 *   stdout          correct, and prints "all properties hold" / "PASS" on stdout in every call
 *   exit0           exit(0) inside ropecheck_rope_apply
 *   ctor_exit0      exit(0) in a load-time constructor
 *   underscore_exit _exit(0) inside ropecheck_rope_apply
 *   segv            writes through NULL
 *   abort           abort()
 *   loop            never returns
 *   overrun16       writes 16 bytes past the end of out
 *   overrun1m       writes 1 MiB past the end of out
 *   late_overrun1m  correct for its first 3 calls, then writes 1 MiB past the end of out (the guard
 *                   pages the kernel host keeps protected between calls still stop it)
 *   underrun        writes 16 bytes before out
 *   msg_overflow    writes 32 bytes past message_capacity and returns 7
 *   unwritten       returns OK having written only the first half of out
 *   nan             returns OK with every output NaN
 *   code42          returns 42 with a message
 *   underrun1k      writes 8 bytes 1 KiB before out (past the 64 guard bytes)
 *   overrun128      writes 8 bytes 128 bytes past the end of out (past the 64 guard bytes)
 *   kill_group      kill(0, SIGTERM): "stops its workers" by process group
 *   truncate_arena  ftruncate()s the shared memory (fd 4) to 0, then is correct
 *   fork_segv       forks a child that sleeps 60 s (holding the socket and stderr), then crashes
 *   fork_child      correct, leaving a forked child that sleeps 60 s (holding the socket and stderr)
 *   close_socket_hang  closes the host's socket (fd 3) and never returns
 *   dtor_hang       correct, but its library destructor never returns (the host cannot exit)
 *   late_write      correct, but a thread it started overwrites the last output with zeros when the
 *                   library is unloaded (after the call returned)
 *   configure_hang  exports ropecheck_kernel_configure, which never returns
 *   env             correct; at each call, $BAD_PLUGIN_MARK is created, then the call waits until
 *                   $BAD_PLUGIN_WAIT exists (when set), and crashes when $BAD_PLUGIN_CRASH is set: a
 *                   test can act while a call is in progress, or make one run of a kernel fail
 */
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ropecheck/kernel_abi.h"

#if defined(MODE_ctor_exit0)
__attribute__((constructor)) static void die_at_load(void) { exit(0); }
#endif

#if defined(MODE_dtor_hang)
__attribute__((destructor)) static void hang_at_unload(void) {
  for (;;) sleep(1);
}
#endif

#if defined(MODE_configure_hang)
ROPECHECK_KERNEL_EXPORT int ropecheck_kernel_configure(const char* options, char* message, uint32_t capacity) {
  (void)options, (void)message, (void)capacity;
  for (;;) sleep(1);
}
#endif

#if defined(MODE_late_write)
/* One thread, started at the first call, waits until the library is unloaded and then zeroes the
 * output of the last call: a write long after that call returned. */
static void* volatile g_last_out;
static size_t g_last_bytes;
static pthread_t g_writer;
static int g_started, g_go;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static void* late_writer(void* arg) {
  (void)arg;
  pthread_mutex_lock(&g_mu);
  while (!g_go) pthread_cond_wait(&g_cv, &g_mu);
  pthread_mutex_unlock(&g_mu);
  memset(g_last_out, 0, g_last_bytes);
  return NULL;
}
__attribute__((destructor)) static void release_writer(void) {
  if (!g_started) return;
  pthread_mutex_lock(&g_mu);
  g_go = 1;
  pthread_cond_signal(&g_cv);
  pthread_mutex_unlock(&g_mu);
  pthread_join(g_writer, NULL);
}
#endif

#if defined(MODE_env)
static void env_hooks(void) {
  const char* mark = getenv("BAD_PLUGIN_MARK");
  const char* wait = getenv("BAD_PLUGIN_WAIT");
  if (mark && *mark) close(open(mark, O_WRONLY | O_CREAT, 0644));
  for (int i = 0; wait && *wait && access(wait, F_OK) != 0; ++i) {
    if (i > 6000) abort(); /* 60 s: the test is gone */
    usleep(10000);
  }
  const char* crash = getenv("BAD_PLUGIN_CRASH");
  if (crash && *crash) *(volatile int*)0 = 1;
}
#endif

ROPECHECK_KERNEL_EXPORT uint32_t ropecheck_kernel_abi_version(void) { return ROPECHECK_KERNEL_ABI_VERSION; }
ROPECHECK_KERNEL_EXPORT const char* ropecheck_kernel_name(void) { return "bad-plugin"; }
/* Negative positions are fine (binary64 cos / sin); f16 / bf16 output is not implemented. */
ROPECHECK_KERNEL_EXPORT uint64_t ropecheck_kernel_capabilities(void) {
  return ROPECHECK_CAP_NEGATIVE_POSITIONS | ROPECHECK_CAP_OUT_F64 | ROPECHECK_CAP_OUT_F32;
}

static size_t esize(int32_t dt) { return dt == ROPECHECK_DTYPE_F64 ? 8 : 4; }

static void store(void* out, size_t i, int32_t dt, double v) {
  if (dt == ROPECHECK_DTYPE_F64) ((double*)out)[i] = v;
  else ((float*)out)[i] = (float)v;
}

/* Everything a mode does before computing; returns a return code to give, or -1 to go on. */
static int misbehave(void* out, size_t bytes, char* message, uint32_t capacity) {
  (void)out, (void)bytes, (void)message, (void)capacity;
#if defined(MODE_stdout)
  printf("PASS\nall properties hold\n");
  fflush(stdout);
#elif defined(MODE_exit0)
  exit(0);
#elif defined(MODE_underscore_exit)
  _exit(0);
#elif defined(MODE_segv)
  *(volatile int*)0 = 1;
#elif defined(MODE_abort)
  abort();
#elif defined(MODE_loop)
  for (volatile int i = 0;; i = i + 1) {
  }
#elif defined(MODE_overrun16)
  memset((char*)out + bytes, 0, 16);
#elif defined(MODE_overrun1m)
  memset((char*)out + bytes, 0, 1u << 20);
#elif defined(MODE_late_overrun1m)
  static int calls = 0;
  if (++calls > 3) memset((char*)out + bytes, 0, 1u << 20);
#elif defined(MODE_underrun)
  memset((char*)out - 16, 0, 16);
#elif defined(MODE_msg_overflow)
  memset(message, 'x', capacity + 32);
  return 7;
#elif defined(MODE_code42)
  snprintf(message, capacity, "something went wrong");
  return 42;
#elif defined(MODE_underrun1k)
  memset((char*)out - 1024, 0, 8);
#elif defined(MODE_overrun128)
  memset((char*)out + bytes + 128, 0, 8);
#elif defined(MODE_kill_group)
  kill(0, SIGTERM);
#elif defined(MODE_truncate_arena)
  (void)ftruncate(4, 0);
#elif defined(MODE_fork_segv) || defined(MODE_fork_child)
  if (fork() == 0) {
    sleep(60);
    _exit(0);
  }
#if defined(MODE_fork_segv)
  *(volatile int*)0 = 1;
#endif
#elif defined(MODE_close_socket_hang)
  close(3);
  for (;;) sleep(1);
#elif defined(MODE_late_write)
  g_last_out = out;
  g_last_bytes = bytes;
  if (!g_started) g_started = pthread_create(&g_writer, NULL, late_writer, NULL) == 0;
#elif defined(MODE_env)
  env_hooks();
#endif
  return -1;
}

static int unsupported(int32_t dt, int32_t streams, char* message, uint32_t capacity) {
  if (dt != ROPECHECK_DTYPE_F64 && dt != ROPECHECK_DTYPE_F32) {
    snprintf(message, capacity, "f64 and f32 output only");
    return 1;
  }
  if (streams != 1) {
    snprintf(message, capacity, "one position stream only");
    return 1;
  }
  return 0;
}

static void finish(void* out, size_t n, int32_t dt) {
#if defined(MODE_nan)
  for (size_t i = 0; i < n; ++i) store(out, i, dt, NAN);
#elif defined(MODE_unwritten)
  memset((char*)out + (n / 2) * esize(dt), 0xFF, (n - n / 2) * esize(dt));
#else
  (void)out, (void)n, (void)dt;
#endif
}

ROPECHECK_KERNEL_EXPORT int ropecheck_rope_apply(const ropecheck_rope_problem* p) {
  const ropecheck_rope_params* r = &p->rope;
  const size_t n = (size_t)p->tokens * (size_t)p->heads * (size_t)r->head_dim;
  if (unsupported(p->out_dtype, p->position_streams, p->message, p->message_capacity)) return ROPECHECK_UNSUPPORTED;
  const int rc = misbehave(p->out, n * esize(p->out_dtype), p->message, p->message_capacity);
  if (rc >= 0) return rc;
  for (int64_t t = 0; t < p->tokens; ++t)
    for (int32_t h = 0; h < p->heads; ++h) {
      const size_t row = ((size_t)t * (size_t)p->heads + (size_t)h) * (size_t)r->head_dim;
      for (int32_t c = 2 * r->pairs; c < r->head_dim; ++c) store(p->out, row + (size_t)c, p->out_dtype, p->x[row + (size_t)c]);
      for (int32_t j = 0; j < r->pairs; ++j) {
        const int32_t ia = r->layout == ROPECHECK_LAYOUT_INTERLEAVED ? 2 * j : j;
        const int32_t ib = r->layout == ROPECHECK_LAYOUT_INTERLEAVED ? 2 * j + 1 : j + r->pairs;
        const double angle = (double)p->positions[t] * r->inv_freq[j];
        const double cs = cos(angle), sn = sin(angle), a = p->x[row + (size_t)ia], b = p->x[row + (size_t)ib];
        store(p->out, row + (size_t)ia, p->out_dtype, r->attention_factor * (a * cs - b * sn));
        store(p->out, row + (size_t)ib, p->out_dtype, r->attention_factor * (b * cs + a * sn));
      }
    }
  finish(p->out, n, p->out_dtype);
  return ROPECHECK_OK;
}

ROPECHECK_KERNEL_EXPORT int ropecheck_rope_cos_sin(const ropecheck_table_problem* p) {
  const ropecheck_rope_params* r = &p->rope;
  const size_t n = (size_t)p->tokens * (size_t)r->pairs;
  if (unsupported(p->out_dtype, p->position_streams, p->message, p->message_capacity)) return ROPECHECK_UNSUPPORTED;
  const int rc = misbehave(p->sin, n * esize(p->out_dtype), p->message, p->message_capacity);
  if (rc >= 0) return rc;
  for (int64_t t = 0; t < p->tokens; ++t)
    for (int32_t j = 0; j < r->pairs; ++j) {
      const double angle = (double)p->positions[t] * r->inv_freq[j];
      store(p->cos, (size_t)t * (size_t)r->pairs + (size_t)j, p->out_dtype, cos(angle));
      store(p->sin, (size_t)t * (size_t)r->pairs + (size_t)j, p->out_dtype, sin(angle));
    }
  finish(p->cos, n, p->out_dtype);
  finish(p->sin, n, p->out_dtype);
  return ROPECHECK_OK;
}

/* Fused rotation and attention in binary64 (revision 2); asked for scores, it says it has none. */
static void rotate_row(const ropecheck_rope_params* r, int64_t pos, const float* x, double* y) {
  for (int32_t c = 0; c < r->head_dim; ++c) y[c] = x[c];
  for (int32_t j = 0; j < r->pairs; ++j) {
    const int32_t ia = r->layout == ROPECHECK_LAYOUT_INTERLEAVED ? 2 * j : j;
    const int32_t ib = r->layout == ROPECHECK_LAYOUT_INTERLEAVED ? 2 * j + 1 : j + r->pairs;
    const double angle = (double)pos * r->inv_freq[j], cs = cos(angle), sn = sin(angle), a = x[ia], b = x[ib];
    y[ia] = r->attention_factor * (a * cs - b * sn);
    y[ib] = r->attention_factor * (b * cs + a * sn);
  }
}

ROPECHECK_KERNEL_EXPORT int ropecheck_rope_attention(const ropecheck_rope_attention_problem* p) {
  const ropecheck_rope_params* r = &p->rope;
  const ropecheck_attention_params* a = &p->attention;
  const int64_t T = p->tokens, G = a->group, D = r->head_dim, Dv = a->value_dim;
  const size_t n = (size_t)(T * G * Dv);
  if (unsupported(p->out_dtype, p->position_streams, p->message, p->message_capacity)) return ROPECHECK_UNSUPPORTED;
  if (p->scores) {
    snprintf(p->message, p->message_capacity, "no scores");
    return ROPECHECK_UNSUPPORTED;
  }
  const int rc = misbehave(p->out, n * esize(p->out_dtype), p->message, p->message_capacity);
  if (rc >= 0) return rc;
  double* Q = malloc(sizeof(double) * (size_t)(T * G * D));
  double* K = malloc(sizeof(double) * (size_t)(T * D));
  double* e = malloc(sizeof(double) * (size_t)T);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < G; ++h) rotate_row(r, p->positions[t], p->q + (t * G + h) * D, Q + (t * G + h) * D);
    rotate_row(r, p->positions[t], p->k + t * D, K + t * D);
  }
  for (int64_t i = 0; i < T; ++i)
    for (int64_t h = 0; h < G; ++h) {
      int64_t first = 0, last = a->causal ? i : T - 1;
      if (a->window > 0) {
        first = i - a->window + 1 > 0 ? i - a->window + 1 : 0;
        if (!a->causal) last = i + a->window - 1 < T - 1 ? i + a->window - 1 : T - 1;
      }
      double mx = a->sinks ? a->sinks[h] : -INFINITY, z = 0;
      for (int64_t j = first; j <= last; ++j) {
        double s = 0;
        for (int64_t c = 0; c < D; ++c) s += Q[(i * G + h) * D + c] * K[j * D + c];
        s *= a->scale;
        if (a->softcap > 0) s = a->softcap * tanh(s / a->softcap);
        e[j] = s;
        if (s > mx) mx = s;
      }
      if (a->sinks) z = exp(a->sinks[h] - mx);
      for (int64_t j = first; j <= last; ++j) z += (e[j] = exp(e[j] - mx));
      for (int64_t c = 0; c < Dv; ++c) {
        double o = 0;
        for (int64_t j = first; j <= last; ++j) o += e[j] / z * p->v[j * Dv + c];
        store(p->out, (size_t)((i * G + h) * Dv + c), p->out_dtype, o);
      }
    }
  free(Q), free(K), free(e);
  finish(p->out, n, p->out_dtype);
  return ROPECHECK_OK;
}
