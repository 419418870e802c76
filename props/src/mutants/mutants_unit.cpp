// The built-in targets (mutants.hpp), one file per group of mistakes, compiled as one translation unit
// apart from props_unit.cpp: with -ffp-contract=off (props/CMakeLists.txt), like the hf-fp32 kernel they
// mirror operation by operation, so every float operation rounds. Relative includes, as in props_unit.cpp.
#include "frequency_mistakes.cpp"
#include "position_mistakes.cpp"
#include "table_mistakes.cpp"
#include "layout_mistakes.cpp"
#include "catalogue.cpp"
#include "targets.cpp"
#include "self_test.cpp"
