// Sanitizer settings built into test_asan_unit (cmake/ropecheckSanitized.cmake), so that the tests run
// the same from ctest and by hand.
//
// Suppressed: MPFR's per-thread caches, which it frees only in mpfr_free_cache(): the pool of mpz_t
// behind mpfr_cos / mpfr_sin_cos and the cached constants (mpfr_cache, e.g. pi), both filled by the fast
// rounding engine's tables (reference/src/fast_rounding.cpp) in the golden writer's worker threads,
// which end without calling it: the same 224 bytes per run. Matching them needs the full allocation
// stack (GMP has no frame pointers), hence fast_unwind_on_malloc=0. Every other leak, and every
// ASan / UBSan report, fails the test.
extern "C" const char* __asan_default_options() { return "detect_leaks=1:fast_unwind_on_malloc=0"; }
extern "C" const char* __ubsan_default_options() { return "print_stacktrace=1:halt_on_error=1"; }
extern "C" const char* __lsan_default_suppressions() { return "leak:mpfr_cos\nleak:mpfr_sin_cos\nleak:mpfr_cache\n"; }
