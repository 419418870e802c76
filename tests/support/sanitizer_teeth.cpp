// The sanitized unit tests' own teeth (linked into test_asan_<module> only, tests/CMakeLists.txt): each
// test commits one kind of error the sanitizer build exists to find, in a death-test child, and
// expects that child to die with the sanitizer's report. If a change of the sanitized build's flags
// (cmake/ropecheckSanitized.cmake: optimisation level, sanitizer list, recovery) stopped a kind of
// report, every other test of test_asan_<module> would still pass; this one fails.
//
// The values come through volatile variables so that the compiler cannot see the error and fold it
// away, at any optimisation level.
#include <gtest/gtest.h>

#include <climits>
#include <cstdlib>

namespace {

volatile int g_index = 4;         // one past the end of a 4-element array
volatile int g_int_max = INT_MAX;
volatile int g_shift = 40;        // wider than int
int* volatile g_leaked = nullptr;

// Through a volatile pointer the compiler cannot know the object's size, so only AddressSanitizer's
// shadow memory can see the overflow (a direct access is caught earlier by UBSan's object-size check,
// tested below).
int read_past_the_end() {
  int* volatile a = new int[4]();
  const int v = a[g_index];
  delete[] a;
  return v;
}

int read_after_free() {
  int* volatile a = new int[4]();
  delete[] a;
  return a[g_index - 4];
}

int read_past_a_stack_array() {
  int a[4] = {1, 2, 3, 4};
  int* volatile p = a;
  return p[g_index];
}

int read_past_the_end_directly() {
  int* a = new int[4]();
  const int v = a[g_index];
  delete[] a;
  return v;
}

int overflow_int() { return g_int_max + g_index; }

int shift_too_far() { return 1 << g_shift; }

void leak_and_exit() {
  g_leaked = new int[64]();
  g_leaked = nullptr;  // the only pointer to it is gone
  std::exit(0);        // LeakSanitizer checks at exit; under ASan a leak makes the exit status ASan's, 1
}

}  // namespace

TEST(SanitizerTeeth, AddressSanitizerReportsAHeapOverflow) {
  EXPECT_DEATH(read_past_the_end(), "heap-buffer-overflow");
}

TEST(SanitizerTeeth, AddressSanitizerReportsAUseAfterFree) {
  EXPECT_DEATH(read_after_free(), "heap-use-after-free");
}

TEST(SanitizerTeeth, AddressSanitizerReportsAStackOverflowOfAnArray) {
  EXPECT_DEATH(read_past_a_stack_array(), "stack-buffer-overflow");
}

TEST(SanitizerTeeth, UndefinedBehaviorSanitizerChecksObjectSizes) {
  EXPECT_DEATH(read_past_the_end_directly(), "runtime error: load of address .* with insufficient space for an object");
}

TEST(SanitizerTeeth, UndefinedBehaviorSanitizerStopsAtSignedOverflow) {
  EXPECT_DEATH(overflow_int(), "runtime error: signed integer overflow");
}

TEST(SanitizerTeeth, UndefinedBehaviorSanitizerStopsAtAShiftTooFar) {
  EXPECT_DEATH(shift_too_far(), "runtime error: shift exponent 40");
}

TEST(SanitizerTeeth, LeakSanitizerFailsAnExitThatLeaks) {
  EXPECT_EXIT(leak_and_exit(), ::testing::ExitedWithCode(1), "detected memory leaks");
}
