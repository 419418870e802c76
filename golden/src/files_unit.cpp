// The tensor-file, golden-set, shard, part and baseline files compiled as one translation unit: each instantiates nlohmann-json and the golden-set model; parsed and instantiated once instead of once
// per file (docs/ARCHITECTURE.md, "Build time"). Relative includes rather than CMake's UNITY_BUILD, whose
// generated file includes each source by its absolute path, which makes ccache miss it in every clone at
// a new path.
#include "tensor.cpp"
#include "safetensors.cpp"
#include "npy.cpp"
#include "golden_writer.cpp"
#include "golden_merge.cpp"
#include "golden_shared.cpp"
#include "tensor_file_writer.cpp"
#include "golden_files.cpp"
#include "golden_set_reader.cpp"
#include "sample_check.cpp"
#include "error_stats.cpp"
#include "part_file.cpp"
#include "baseline.cpp"
#include "check_part.cpp"
