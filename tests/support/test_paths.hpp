// Where the tests find their data files and the plugins the build made. The absolute paths are
// compiled into one tiny unit (test_paths.cpp) instead of every test file: a path in a test's
// preprocessed text makes ccache miss that heavy file in every fresh clone at a new path.
#pragma once

namespace ropecheck::test {

const char* data_dir();          // tests/data
const char* specs_dir();         // tests/python/specs
const char* hf_plugin();         // examples/plugin_hf_fp32's library
const char* test_plugin_dir();   // tests/plugins/test_plugin.cpp's builds (test_plugin_<mode>.so)
const char* teeth_plugin_dir();  // tests/plugins/teeth_plugin.cpp's builds (teeth_plugin_<mode>.so)
const char* bad_plugin_dir();    // tests/plugins/bad_plugin.c's builds (bad_plugin_<mode>.so)
const char* kernel_abi_header(); // abi/include/ropecheck/kernel_abi.h
const char* builtin_kernels();   // libropecheck_builtin_kernels.so (kut/src/builtin_plugin.cpp)

}  // namespace ropecheck::test
