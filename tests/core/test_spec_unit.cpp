// test_spec's four files compiled as one translation unit: they share their heavy headers (GoogleTest,
// nlohmann-json, the spec model and the reference), parsed once instead of three times. Relative includes
// rather than CMake's UNITY_BUILD, whose absolute paths would reach GoogleTest's __FILE__ and make ccache
// miss in every clone at a new path (test_drift_unit.cpp says the same).
#include "test_spec.cpp"
#include "test_spec_mla.cpp"
#include "test_hf_config.cpp"
#include "test_json_limits.cpp"
