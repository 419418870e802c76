// The diagnosis's files compiled as one translation unit (as checker_unit.cpp, and for the same reason).
#include "catalogue.cpp"
#include "mistaken_truth.cpp"
#include "element_sample.cpp"
#include "parametric_fit.cpp"
#include "diagnose.cpp"
#include "diagnosis_report.cpp"
#include "shape_slips.cpp"
#include "score_diagnosis.cpp"
