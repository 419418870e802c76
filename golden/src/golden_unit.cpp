// The golden-set files compiled as one translation unit: each instantiates nlohmann-json and the
// golden-set model; parsed and instantiated once instead of once per file (docs/development/building.md).
// Relative includes rather than CMake's UNITY_BUILD, whose generated file includes each source by its
// absolute path, which makes ccache miss it in every clone at a new path.
#include "golden_writer.cpp"
#include "golden_values.cpp"
#include "golden_merge.cpp"
#include "golden_shared.cpp"
#include "golden_files.cpp"
#include "golden_set_reader.cpp"
#include "golden_set_rows.cpp"
#include "sample_check.cpp"
#include "fingerprint.cpp"
