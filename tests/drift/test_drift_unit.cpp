// test_drift's four files compiled as one translation unit: they share their heavy headers (GoogleTest,
// the MPFR reference, drift, golden), parsed once instead of four times. Written by hand rather than
// CMake's UNITY_BUILD: CMake's unity file includes each source by its absolute path, so GoogleTest's
// __FILE__ would carry the checkout's path and ccache would miss in every clone at a new path; these
// relative includes keep it path-free.
#include "test_drift_sampling.cpp"
#include "test_drift_exact.cpp"
#include "test_drift_output.cpp"
#include "test_drift_figures.cpp"
#include "test_drift_scores.cpp"
