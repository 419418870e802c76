// The `ropecheck` executable's files compiled as one translation unit: each parses CLI11, nlohmann-json,
// fmt and the golden / props / drift headers, which dominate its compile time; parsed once instead of
// twelve times. Relative includes rather than CMake's UNITY_BUILD (absolute paths in its unity files
// make ccache's direct mode miss in every clone at a new path; tests/drift/test_drift_unit.cpp).
#include "main.cpp"  // the order of cli/CMakeLists.txt
#include "spec_source.cpp"
#include "junit.cpp"
#include "cmd_presets.cpp"
#include "cmd_spec.cpp"
#include "cmd_golden.cpp"
#include "cmd_check.cpp"
#include "check_kv_cache.cpp"
#include "cmd_props.cpp"
#include "cmd_merge.cpp"
#include "props_diagnosis.cpp"
#include "cmd_drift.cpp"
#include "props_part.cpp"
#include "props_targets.cpp"
#include "props_stores.cpp"
#include "check_rediagnose.cpp"
#include "drift_scores.cpp"
#include "drift_stores.cpp"
