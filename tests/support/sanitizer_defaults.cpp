// Sanitizer settings built into the sanitized unit tests (test_asan_<module>, cmake/ropecheckSanitized.cmake),
// so that the tests run the same from ctest and by hand. No leak is suppressed: MPFR's per-thread caches
// are freed by the worker threads that fill them (MpfrThreadCaches, reference/mpfr_value.hpp), so every
// leak, and every ASan / UBSan report, fails the test. Allocation stacks are taken with the fast
// (frame-pointer) unwinder, ASan's default: the slow one (fast_unwind_on_malloc=0) follows a leak's
// stack through GMP / MPFR (built without frame pointers) but unwinds with DWARF tables on every
// allocation, and the MPFR tests allocate millions of times (it made the calibration take minutes). A leak
// is detected either way; ASAN_OPTIONS=fast_unwind_on_malloc=0 reruns a failing test for its full stack.
extern "C" const char* __asan_default_options() { return "detect_leaks=1"; }
extern "C" const char* __ubsan_default_options() { return "print_stacktrace=1:halt_on_error=1"; }

// The sanitized tests run at the tiny test scale (test_scale.hpp) unless ROPECHECK_TEST_SCALE says
// otherwise (=small runs larger sweeps; =full the release sizes, instrumented: many minutes).
extern "C" const char* ropecheck_test_default_scale() { return "tiny"; }
