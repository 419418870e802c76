// Sanitizer settings built into the sanitized unit tests (test_asan_all, cmake/ropecheckSanitized.cmake),
// so that the tests run the same from ctest and by hand. No leak is suppressed: MPFR's per-thread caches
// are freed by the worker threads that fill them (MpfrThreadCaches, reference/mpfr_value.hpp), so every
// leak, and every ASan / UBSan report, fails the test. fast_unwind_on_malloc=0 gives a leak report the
// full allocation stack through GMP / MPFR (built without frame pointers).
extern "C" const char* __asan_default_options() { return "detect_leaks=1:fast_unwind_on_malloc=0"; }
extern "C" const char* __ubsan_default_options() { return "print_stacktrace=1:halt_on_error=1"; }

// The sanitized tests run at the small test scale (test_scale.hpp) unless ROPECHECK_TEST_SCALE says
// otherwise (=full runs the release sizes, instrumented: many minutes).
extern "C" const char* ropecheck_test_default_scale() { return "small"; }
