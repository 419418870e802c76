// Sanitizer settings built into the instrumented kernel host (build/release/asan/ropecheck-kernel-host, the
// child the instrumented `ropecheck` runs plugins in). A report exits 86, as in the CLI
// (cli_sanitizer_defaults.cpp). Signals stay the kernel's: a plugin that crashes or aborts must kill the
// host by that signal, which the parent reports as a failed check ("killed by SIGSEGV"); ASan's own
// handlers would turn it into exit 86. The plugins themselves are not instrumented.
extern "C" const char* __asan_default_options() {
  return "detect_leaks=1:exitcode=86:handle_segv=0:handle_sigbus=0:handle_sigfpe=0:handle_abort=0";
}
extern "C" const char* __ubsan_default_options() { return "print_stacktrace=1:halt_on_error=1:exitcode=86"; }
