// RAII over the raw MPFR C API: an mpfr_t with an explicit precision, cleared on scope exit, where code
// sets the precision of each value itself (thread-safe, unlike Boost's process-wide default precision);
// and the per-thread caches of a worker thread, freed at its end.
#pragma once

#include <mpfr.h>

#include <array>

namespace ropecheck {

class MpfrValue {
 public:
  explicit MpfrValue(mpfr_prec_t prec) { mpfr_init2(v_, prec); }
  ~MpfrValue() { mpfr_clear(v_); }
  MpfrValue(const MpfrValue&) = delete;
  MpfrValue& operator=(const MpfrValue&) = delete;
  mpfr_ptr get() { return v_; }
  mpfr_srcptr get() const { return v_; }

 private:
  mpfr_t v_;
};

// Frees the calling thread's MPFR caches when it goes out of scope: the cached constants (pi, log 2)
// and the pool of mpz_t behind the trigonometric functions. MPFR keeps them per thread and frees them
// only when told, so a worker thread that did MPFR work and ends without this loses them (LeakSanitizer
// reports them). One at the top of the body of every thread that may call MPFR.
class MpfrThreadCaches {
 public:
  MpfrThreadCaches() = default;
  ~MpfrThreadCaches() { mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE); }
  MpfrThreadCaches(const MpfrThreadCaches&) = delete;
  MpfrThreadCaches& operator=(const MpfrThreadCaches&) = delete;
};

// `v` as three doubles whose sum is v to within about 2^-159 relative (each part the double nearest to
// what the parts before it leave, the subtractions exact in `bits` >= v's precision + 64): the
// triple-double form in which the fast paths (fast_rounding.hpp, attention's engine) keep exact values.
inline std::array<double, 3> triple_double_of(mpfr_srcptr v, mpfr_prec_t bits) {
  MpfrValue tmp(bits);
  std::array<double, 3> out{};
  mpfr_set(tmp.get(), v, MPFR_RNDN);
  for (double& part : out) {
    part = mpfr_get_d(tmp.get(), MPFR_RNDN);
    mpfr_sub_d(tmp.get(), tmp.get(), part, MPFR_RNDN);  // exact
  }
  return out;
}

}  // namespace ropecheck
