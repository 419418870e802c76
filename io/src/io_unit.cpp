// The tensor-file readers and writers and the part files compiled as one translation unit: each
// instantiates nlohmann-json and the tensor model; parsed and instantiated once instead of once per file
// (docs/development/building.md). Relative includes rather than CMake's UNITY_BUILD, whose generated file
// includes each source by its absolute path, which makes ccache miss it in every clone at a new path.
#include "tensor.cpp"
#include "safetensors.cpp"
#include "npy.cpp"
#include "npz.cpp"
#include "zip_stored.cpp"
#include "tensor_file_writer.cpp"
#include "part_file.cpp"
