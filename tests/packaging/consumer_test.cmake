# The CMake package as another project meets it (like fmt's find-package test): installs this build
# into a scratch prefix, then builds examples/consumer against that prefix with
# find_package(ropecheck CONFIG) and runs its tests (the whole property suite against the
# consumer's own kernel), checks that no test scaffolding is installed and that the build-tree package
# configures as well.
# Run by ctest as the test packaging_consumer (tests/CMakeLists.txt):
#   cmake -DBUILD_DIR=... -DCONSUMER_DIR=... -DWORK_DIR=... -DGENERATOR=... -DMAKE_PROGRAM=...
#         -DCXX_COMPILER=... -DCTEST=... -P consumer_test.cmake
foreach(var BUILD_DIR CONSUMER_DIR WORK_DIR GENERATOR CXX_COMPILER CTEST)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "consumer_test.cmake: -D${var}=... is required")
  endif()
endforeach()

set(prefix "${WORK_DIR}/prefix")
set(consumer_build "${WORK_DIR}/consumer-build")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

# 1. Install (the libraries, headers, the ropecheck tool and the package files).
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}"
                RESULT_VARIABLE rv OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rv EQUAL 0)
  message(FATAL_ERROR "cmake --install ${BUILD_DIR} --prefix ${prefix} failed (${rv}):\n${out}")
endif()
foreach(f lib/cmake/ropecheck/ropecheckConfig.cmake lib/cmake/ropecheck/ropecheckConfigVersion.cmake
          lib/cmake/ropecheck/ropecheckTargets.cmake lib/cmake/ropecheck/ropecheckGTestTargets.cmake
          include/ropecheck/props/gtest.hpp include/ropecheck/props/suite.hpp include/ropecheck/core/spec.hpp
          bin/ropecheck)
  if(NOT EXISTS "${prefix}/${f}")
    message(FATAL_ERROR "not installed: ${prefix}/${f}")
  endif()
endforeach()
# Test scaffolding stays in the build tree (include_private/): no mutant or test-target header installed.
file(GLOB_RECURSE scaffolding RELATIVE "${prefix}" "${prefix}/*")
list(FILTER scaffolding INCLUDE REGEX "(^|/)(mutants|scalar_recipes|kernel_targets)\\.hpp$")
if(scaffolding)
  message(FATAL_ERROR "test scaffolding installed (it belongs in include_private/, never installed): ${scaffolding}")
endif()
message(STATUS "installed into ${prefix}")

# 1b. Relocatable: the installed package must not name absolute paths of this machine's build
# (e.g. a libgomp path); move the prefix and build the consumer against the moved copy only.
file(GLOB_RECURSE package_files "${prefix}/lib/cmake/ropecheck/*.cmake")
foreach(f IN LISTS package_files)
  file(READ "${f}" text)
  foreach(bad "${BUILD_DIR}" "/usr/lib/gcc/")
    string(FIND "${text}" "${bad}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "${f} names the absolute path ${bad}: the package is not relocatable")
    endif()
  endforeach()
endforeach()
set(moved "${WORK_DIR}/moved-prefix")
file(RENAME "${prefix}" "${moved}")
set(prefix "${moved}")
message(STATUS "moved the install to ${prefix}")

# 2. Build the consumer against the prefix and run its tests.
set(build_options -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
if(MAKE_PROGRAM)
  list(APPEND build_options -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM})
endif()
execute_process(COMMAND "${CTEST}" --build-and-test "${CONSUMER_DIR}" "${consumer_build}"
                        --build-generator "${GENERATOR}"
                        --build-options ${build_options}
                        --test-command "${CTEST}" --output-on-failure --no-tests=error -j 4
                RESULT_VARIABLE rv)
if(NOT rv EQUAL 0)
  message(FATAL_ERROR "the consumer project failed to build or its tests failed (${rv})")
endif()

# 3. It must have used the installed package, not this build tree.
file(STRINGS "${consumer_build}/CMakeCache.txt" dir_line REGEX "^ropecheck_DIR:")
string(REGEX REPLACE "^ropecheck_DIR:[A-Z]+=" "" dir "${dir_line}")
file(REAL_PATH "${dir}" dir)
file(REAL_PATH "${prefix}" real_prefix)
string(FIND "${dir}" "${real_prefix}/" at)
if(NOT at EQUAL 0)
  message(FATAL_ERROR "the consumer found ropecheck in ${dir}, not in the installed prefix ${real_prefix}")
endif()
message(STATUS "consumer built against ${dir} and passed")

# 4. The build-tree export (export(EXPORT) + the config file in the build directory) configures too.
execute_process(COMMAND "${CMAKE_COMMAND}" -S "${CONSUMER_DIR}" -B "${WORK_DIR}/consumer-build-tree"
                        -G "${GENERATOR}" -Dropecheck_DIR=${BUILD_DIR} -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
                RESULT_VARIABLE rv OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rv EQUAL 0)
  message(FATAL_ERROR "the consumer does not configure against the build tree (ropecheck_DIR=${BUILD_DIR}):\n${out}")
endif()
message(STATUS "consumer configures against the build-tree package too")
