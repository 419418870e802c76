// RAII over the raw MPFR C API: an mpfr_t with an explicit precision, cleared on scope exit, where code
// sets the precision of each value itself (thread-safe, unlike Boost's process-wide default precision);
// and the per-thread caches of a worker thread, freed at its end.
#pragma once

#include <mpfr.h>

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

}  // namespace ropecheck
