# Install rules and the CMake package (find_package(ropecheck CONFIG)), included from the top-level
# CMakeLists.txt after every target is defined. Pattern from fmt and Highway: an export set with
# namespaced targets, a relocatable config file that finds every PUBLIC dependency again, a version
# file, and a build-tree export. tests/packaging/consumer_test.cmake installs into a scratch
# prefix and builds examples/consumer against it (ctest -R packaging_consumer).
#
#   ropecheck::core         dtypes, spec model, spec JSON                  (nlohmann_json)
#   ropecheck::accuracy     the error model: accuracy classes, bounds      (ropecheck::core)
#   ropecheck::formulas     the scalar-templated exact formulas, headers   (ropecheck::core)
#   ropecheck::reference    presets, the exact MPFR reference              (formulas, Boost, MPFR, Eigen3)
#   ropecheck::props        the property suite                             (accuracy, reference, rapidcheck)
#   ropecheck::props_gtest  register_property_tests for GoogleTest         (ropecheck::props, GTest::gtest)
#   ropecheck::kernels      our float kernels and recipes                  (ropecheck::core, OpenMP)
#   ropecheck::kut          the kernel-under-test interface, the CPU source (ropecheck::core, kernels)
#   ropecheck::ropecheck    the command-line tool (imported executable)
#
# golden/ (checker, tensor I/O) is not part of the package: no exported header needs it, and it
# would add libzip, zlib and OpenSSL to every consumer. Its C plugin header kernel_abi.h is
# installed on its own (it needs nothing).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(ROPECHECK_CMAKE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/ropecheck" CACHE STRING
    "Where the ropecheck CMake package files are installed, relative to the prefix")

# The exported libraries: <target> -> ropecheck::<export name>. kernels/ is exported when it is
# built (its hf-fp32 recipes are handy beside the suite; it needs reference/ only).
set(ropecheck_export_libraries ropecheck_core ropecheck_accuracy ropecheck_formulas ropecheck_reference ropecheck_attention
    ropecheck_props)
if(TARGET ropecheck_kernels)
  list(APPEND ropecheck_export_libraries ropecheck_kernels ropecheck_kut)  # props links kut
endif()
set(ropecheck_header_dirs "")
foreach(lib IN LISTS ropecheck_export_libraries ITEMS ropecheck_props_gtest)
  if(NOT TARGET ${lib})
    continue()
  endif()
  string(REGEX REPLACE "^ropecheck_" "" export_name "${lib}")
  set_target_properties(${lib} PROPERTIES EXPORT_NAME ${export_name})
  get_target_property(src_dir ${lib} SOURCE_DIR)
  if(IS_DIRECTORY "${src_dir}/include")
    list(APPEND ropecheck_header_dirs "${src_dir}/include/")
  endif()
endforeach()
set_target_properties(ropecheck PROPERTIES EXPORT_NAME ropecheck)
set(ROPECHECK_BOOST_MIN 1.74)  # the versions cmake/ropecheckDependencies.cmake asks for
if(OpenMP_CXX_FOUND)
  set(ROPECHECK_PACKAGE_HAS_OPENMP ON)
else()
  set(ROPECHECK_PACKAGE_HAS_OPENMP OFF)
endif()

install(TARGETS ${ropecheck_export_libraries} ropecheck
        EXPORT ropecheckTargets
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# The process kernel plugins run in (plugin/include/ropecheck/plugin/client.hpp finds it there).
install(TARGETS ropecheck_kernel_host RUNTIME DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/ropecheck)
# ropecheck's CPU kernels as a kernel_abi.h plugin (kut/src/builtin_plugin.cpp), for `--kernel
# <prefix>/lib/ropecheck/libropecheck_builtin_kernels.so:RECIPE` and ctypes clients; loaded, never linked.
if(TARGET ropecheck_builtin_kernels)
  install(TARGETS ropecheck_builtin_kernels LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/ropecheck)
endif()
# props_gtest in an export set of its own: the config file loads it only when GoogleTest is found,
# so a consumer without GoogleTest still gets reference and props.
if(TARGET ropecheck_props_gtest)
  install(TARGETS ropecheck_props_gtest
          EXPORT ropecheckGTestTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  set(ROPECHECK_PACKAGE_HAS_GTEST ON)
else()
  set(ROPECHECK_PACKAGE_HAS_GTEST OFF)
endif()
# Headers. The targets' INSTALL_INTERFACE include directory is "include"; test scaffolding (the
# self-test's mutants, the scalar recipes) lies in include_private/, a build-tree include directory
# that is never installed (tests/packaging/consumer_test.cmake checks).
list(REMOVE_DUPLICATES ropecheck_header_dirs)
install(DIRECTORY ${ropecheck_header_dirs}
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.hpp" PATTERN "*.h"
        # the CUDA source: its library, like every CUDA target, is not exported
        PATTERN "cuda_source.hpp" EXCLUDE)
install(FILES "${PROJECT_SOURCE_DIR}/abi/include/ropecheck/kernel_abi.h"
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ropecheck)

install(EXPORT ropecheckTargets
        NAMESPACE ropecheck::
        FILE ropecheckTargets.cmake
        DESTINATION ${ROPECHECK_CMAKE_DIR})
if(ROPECHECK_PACKAGE_HAS_GTEST)
  install(EXPORT ropecheckGTestTargets
          NAMESPACE ropecheck::
          FILE ropecheckGTestTargets.cmake
          DESTINATION ${ROPECHECK_CMAKE_DIR})
endif()

# The config file goes to the build tree (beside the build-tree export, so the build tree is a
# usable package too: -Dropecheck_DIR=<build dir>) and is installed from there.
configure_package_config_file(
  "${PROJECT_SOURCE_DIR}/cmake/ropecheckConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/ropecheckConfig.cmake"
  INSTALL_DESTINATION ${ROPECHECK_CMAKE_DIR})
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/ropecheckConfigVersion.cmake"
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMajorVersion)
install(FILES "${PROJECT_BINARY_DIR}/ropecheckConfig.cmake" "${PROJECT_BINARY_DIR}/ropecheckConfigVersion.cmake"
        DESTINATION ${ROPECHECK_CMAKE_DIR})

export(EXPORT ropecheckTargets
       NAMESPACE ropecheck::
       FILE "${PROJECT_BINARY_DIR}/ropecheckTargets.cmake")
if(ROPECHECK_PACKAGE_HAS_GTEST)
  export(EXPORT ropecheckGTestTargets
         NAMESPACE ropecheck::
         FILE "${PROJECT_BINARY_DIR}/ropecheckGTestTargets.cmake")
endif()
