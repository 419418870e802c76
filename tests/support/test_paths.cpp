#include "test_paths.hpp"

namespace ropecheck::test {

const char* data_dir() { return ROPECHECK_TEST_DATA_DIR; }
const char* specs_dir() { return ROPECHECK_TEST_SPECS_DIR; }
const char* hf_plugin() { return ROPECHECK_HF_PLUGIN; }
const char* test_plugin_dir() { return ROPECHECK_TEST_PLUGIN_DIR; }
const char* teeth_plugin_dir() { return ROPECHECK_TEETH_PLUGIN_DIR; }
const char* bad_plugin_dir() { return ROPECHECK_BAD_PLUGIN_DIR; }
const char* kernel_abi_header() { return ROPECHECK_KERNEL_ABI_HEADER; }
const char* builtin_kernels() { return ROPECHECK_BUILTIN_KERNELS; }

}  // namespace ropecheck::test
