// drift's files compiled as one translation unit: each instantiates the same nlohmann-json, fmt and reference templates; parsed and instantiated once instead of once
// per file (docs/measurements.md, "Build time"). Relative includes rather than CMake's UNITY_BUILD, whose
// generated file includes each source by its absolute path, which makes ccache miss it in every clone at
// a new path.
#include "sampling.cpp"
#include "exact.cpp"
#include "swept_kernel.cpp"
#include "uniqueness.cpp"
#include "sweep_setup.cpp"
#include "sweep.cpp"
#include "compare.cpp"
#include "report_json.cpp"
#include "report_tables.cpp"
#include "plots.cpp"
#include "output.cpp"
#include "part.cpp"
#include "scores_metrics.cpp"
#include "scores.cpp"
#include "scores_output.cpp"
#include "stores.cpp"
#include "stores_output.cpp"
