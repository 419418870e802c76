// core's files compiled as one translation unit: spec_json.cpp and hf_config.cpp instantiate the same nlohmann-json templates; parsed and instantiated once instead of once
// per file (docs/measurements.md, "Build time"). Relative includes rather than CMake's UNITY_BUILD, whose
// generated file includes each source by its absolute path, which makes ccache miss it in every clone at
// a new path.
#include "dtype.cpp"
#include "spec.cpp"
#include "spec_json.cpp"
#include "hf_config.cpp"
#include "shard.cpp"
#include "positions.cpp"
#include "one_line.cpp"
#include "quantized.cpp"
#include "quantized_blocks.cpp"
#include "kv_cache.cpp"
#include "quantized_store_spec.cpp"
