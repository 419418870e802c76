// Sanitizer settings built into the instrumented `ropecheck` (build/release/asan/ropecheck, tests/CMakeLists.txt
// cli_asan_*), so that it runs the same from ctest and by hand. A sanitizer report exits 86, an exit code
// ropecheck never uses (0 to 3 are its verdicts), so a test that expects 0, 1, 2 or 3 fails on any report;
// a leak fails the same way.
extern "C" const char* __asan_default_options() { return "detect_leaks=1:exitcode=86"; }
extern "C" const char* __ubsan_default_options() { return "print_stacktrace=1:halt_on_error=1:exitcode=86"; }
