// The checker's files compiled as one translation unit: they share their heavy headers (nlohmann-json,
// the golden set, the report model); parsed and instantiated once instead of once per file
// (docs/development/building.md). Relative includes rather than CMake's UNITY_BUILD, whose generated
// file includes each source by its absolute path, which makes ccache miss it in every clone at a new path.
#include "error_stats.cpp"
#include "baseline.cpp"
#include "check_part_json.cpp"
#include "check_part.cpp"
#include "check_accumulate.cpp"
#include "check_rows.cpp"
#include "check_match.cpp"
#include "check_report_json.cpp"
#include "check_report_text.cpp"
#include "kernel_run.cpp"
#include "kernel_blocks.cpp"
#include "candidate_sources.cpp"
#include "check_stream.cpp"
#include "run_check.cpp"
#include "output_geometry.cpp"
#include "score_problem.cpp"
#include "check_scores.cpp"
#include "check_scores_report.cpp"
#include "check_stores.cpp"
#include "check_stores_report.cpp"
