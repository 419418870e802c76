// The property suite's library files compiled as one translation unit: they share RapidCheck, reference and nlohmann-json templates; parsed and instantiated once instead of once
// per file (docs/measurements.md, "Build time"). Relative includes rather than CMake's UNITY_BUILD, whose
// generated file includes each source by its absolute path, which makes ccache miss it in every clone at
// a new path.
#include "generators.cpp"
#include "properties_unit.cpp"
#include "suite.cpp"
#include "suite_baseline.cpp"
#include "target.cpp"
#include "kut_target.cpp"
