// The extension module's files compiled as one translation unit: each parses nanobind and the
// libraries' headers; parsed once instead of once per topic. Relative includes, as in the libraries'
// units (golden/src/golden_unit.cpp).
#include "bind_spec.cpp"
#include "bind_golden.cpp"
#include "bind_props.cpp"
#include "bind_drift.cpp"
#include "bind_check.cpp"
#include "module.cpp"
