// An mpfr_t with an explicit precision, cleared on scope exit: the raw MPFR C API where code sets the
// precision of each value itself (thread-safe, unlike Boost's process-wide default precision).
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

}  // namespace ropecheck
