// The property files (properties.cpp, the table, and one file per group of properties) compiled as one
// translation unit: they share their heavy headers (RapidCheck, Boost.Multiprecision with MPFR, Eigen),
// so one unit costs about what a single file does instead of two and a half times that. Written here
// with relative includes rather than by CMake's UNITY_BUILD, whose generated file includes each source
// by its absolute path: RapidCheck's RC_FAIL records __FILE__, which then differs per checkout and makes
// ccache miss this unit in every fresh clone.
#include "properties.cpp"
#include "properties/common.cpp"
#include "properties/rotation.cpp"
#include "properties/sinusoidal.cpp"
#include "properties/spectrum.cpp"
#include "properties/variants.cpp"
#include "properties/heads_and_storage.cpp"
#include "properties/scores.cpp"
