// The storage properties (store_properties.hpp) as one translation unit, as props_unit.cpp does for the
// suite (RapidCheck and MPFR templates instantiated once). Their own unit because they call the fused
// recipes of kernels/ (rope_quantize.hpp, qk_norm.hpp).
#include "runner.cpp"
#include "store_shift.cpp"
#include "norm_invariance.cpp"
