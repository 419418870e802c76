# AddressSanitizer + UndefinedBehaviorSanitizer copies of the project's libraries and executables, for
# the unit tests and the CLI that run under the sanitizers in CI (tests/CMakeLists.txt: test_asan_<module>,
# ctest tests test_asan_*; the instrumented `ropecheck` and kernel host, ctest tests cli_asan_*).
#
# ropecheck_asan_copy(TARGET) defines TARGET_asan from TARGET's own properties (sources, include
# directories, definitions, options, per-source options such as the AVX-512 file's, links), with the
# project's libraries it links replaced by their _asan copies, so that nothing of ours is linked twice
# and every translation unit of ours in a sanitized test is instrumented. Reading the targets keeps the
# copies true when a library gains or splits a file. External libraries (MPFR, libzip, OpenSSL, fmt,
# GoogleTest) stay uninstrumented; ASan still checks every access our code makes. An executable of ours
# (the CLI: its unity unit, not the files it includes) is copied the same way.
include_guard(GLOBAL)

add_library(ropecheck_asan_flags INTERFACE)
# -Og: GCC's level for debugging, -O1 without the passes that cost most compile time under the
# sanitizers' instrumentation: a third less than -O1 to compile, the same test time (measured in
# docs/measurements.md "Build time"). Reports keep their frames (frame pointers, -g1); no recovery, so
# any undefined behaviour fails the test. The teeth test (tests/support/sanitizer_teeth.cpp) checks that
# every kind of report still fires at this level.
target_compile_options(ropecheck_asan_flags INTERFACE
  -Og -g1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all)
target_link_options(ropecheck_asan_flags INTERFACE -fsanitize=address,undefined)

# The name of TARGET's sanitized copy (creating it), or "" for an external library.
function(ropecheck_asan_name out item)
  set(${out} "" PARENT_SCOPE)
  if(NOT TARGET ${item})
    return()
  endif()
  get_target_property(real ${item} ALIASED_TARGET)
  if(NOT real)
    set(real ${item})
  endif()
  get_target_property(imported ${real} IMPORTED)
  if(imported OR NOT real MATCHES "^ropecheck_")
    return()
  endif()
  ropecheck_asan_copy(${real})
  set(${out} ${real}_asan PARENT_SCOPE)
endfunction()

# The link items of a copy: ours replaced by their copies, $<LINK_ONLY:x> unwrapped the same way.
function(ropecheck_asan_links out)
  set(result)
  foreach(item IN LISTS ARGN)
    set(wrapped OFF)
    if(item MATCHES "^\\$<LINK_ONLY:(.+)>$")
      set(item ${CMAKE_MATCH_1})
      set(wrapped ON)
    endif()
    ropecheck_asan_name(copy ${item})
    if(copy)
      set(item ${copy})
    endif()
    if(wrapped)
      set(item "$<LINK_ONLY:${item}>")
    endif()
    list(APPEND result ${item})
  endforeach()
  set(${out} ${result} PARENT_SCOPE)
endfunction()

function(ropecheck_asan_copy target)
  if(TARGET ${target}_asan)
    return()
  endif()
  get_target_property(type ${target} TYPE)
  set(copy ${target}_asan)
  get_target_property(iface_links ${target} INTERFACE_LINK_LIBRARIES)
  if(NOT iface_links)
    set(iface_links)
  endif()
  if(type STREQUAL "INTERFACE_LIBRARY")
    add_library(${copy} INTERFACE)
    target_include_directories(${copy} INTERFACE $<TARGET_PROPERTY:${target},INTERFACE_INCLUDE_DIRECTORIES>)
    target_compile_definitions(${copy} INTERFACE $<TARGET_PROPERTY:${target},INTERFACE_COMPILE_DEFINITIONS>)
    target_compile_options(${copy} INTERFACE $<TARGET_PROPERTY:${target},INTERFACE_COMPILE_OPTIONS>)
    ropecheck_asan_links(links ${iface_links})
    target_link_libraries(${copy} INTERFACE ${links})
    return()
  endif()
  get_target_property(sources ${target} SOURCES)
  get_target_property(dir ${target} SOURCE_DIR)
  set(cpp)
  set(generated OFF)
  set(cuda OFF)
  foreach(src IN LISTS sources)
    if(src MATCHES "^\\$<TARGET_OBJECTS:(.+)>$")  # an OBJECT library's units (e.g. reference's fast rounding)
      set(objects ${CMAKE_MATCH_1})
      ropecheck_asan_copy(${objects})
      list(APPEND cpp "$<TARGET_OBJECTS:${objects}_asan>")
      continue()
    endif()
    if(src MATCHES "\\.cu$")
      set(cuda ON)
      continue()
    endif()
    if(NOT src MATCHES "\\.(cpp|cc|cxx)$")
      continue()
    endif()
    if(NOT IS_ABSOLUTE ${src})
      set(src ${dir}/${src})
    elseif(NOT src MATCHES "^${PROJECT_SOURCE_DIR}/")
      set(generated ON)
    endif()
    get_source_file_property(header_only ${src} TARGET_DIRECTORY ${target} HEADER_FILE_ONLY)
    if(header_only)  # included by a unity unit (the CLI's cli_unit.cpp), listed for IDEs
      continue()
    endif()
    get_source_file_property(options ${src} TARGET_DIRECTORY ${target} COMPILE_OPTIONS)
    if(options)
      # A file with its own options is an ISA file (AVX-512): instrumented, GCC 12 warns
      # falsely inside the intrinsics ("used uninitialized" in _mm512_undefined_*), so that warning is off
      # and any other stays a warning here; the release build keeps the file free of them (ROPECHECK_WERROR).
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${options};-Wno-error;-Wno-uninitialized")
    endif()
    list(APPEND cpp ${src})
  endforeach()
  if(cuda)
    # Device code (nvcc) is not instrumented: the copy takes the original's CUDA objects as built.
    list(APPEND cpp "$<FILTER:$<TARGET_OBJECTS:${target}>,INCLUDE,\\.cu\\.o$>")
  endif()
  if(type STREQUAL "OBJECT_LIBRARY")
    add_library(${copy} OBJECT ${cpp})
  elseif(type STREQUAL "EXECUTABLE")
    add_executable(${copy} ${cpp})
  else()
    add_library(${copy} STATIC ${cpp})
  endif()
  if(generated)
    add_dependencies(${copy} ${target})  # generated sources (embedded presets) come from the original's rules
  endif()
  target_include_directories(${copy}
    PRIVATE $<TARGET_PROPERTY:${target},INCLUDE_DIRECTORIES>
    INTERFACE $<TARGET_PROPERTY:${target},INTERFACE_INCLUDE_DIRECTORIES>)
  target_compile_definitions(${copy}
    PRIVATE $<TARGET_PROPERTY:${target},COMPILE_DEFINITIONS>
    INTERFACE $<TARGET_PROPERTY:${target},INTERFACE_COMPILE_DEFINITIONS>)
  target_compile_options(${copy} PRIVATE $<TARGET_PROPERTY:${target},COMPILE_OPTIONS>)
  target_compile_features(${copy} PUBLIC cxx_std_20)
  get_target_property(links ${target} LINK_LIBRARIES)
  if(NOT links)
    set(links)
  endif()
  ropecheck_asan_links(links ${links})
  # Everything linked publicly: a static library's private links reach the final link anyway.
  target_link_libraries(${copy} PUBLIC ropecheck_asan_flags ${links})
endfunction()

# ropecheck_asan_gtest(NAME LABEL [NO_TEST] LIBS... SOURCES src...): a GoogleTest executable of the given
# test sources linked with the sanitized copies of LIBS (external ones, e.g. RapidCheck, as they are),
# registered as the ctest test NAME unless NO_TEST.
function(ropecheck_asan_gtest name label)
  cmake_parse_arguments(PARSE_ARGV 2 arg "NO_TEST" "" "LIBS;SOURCES")
  set(libs)
  foreach(lib IN LISTS arg_LIBS)
    ropecheck_asan_name(copy ${lib})
    if(copy)
      list(APPEND libs ${copy})
    else()
      list(APPEND libs ${lib})  # an external library (RapidCheck): not instrumented
    endif()
  endforeach()
  add_executable(${name} ${arg_SOURCES} ${CMAKE_CURRENT_SOURCE_DIR}/support/sanitizer_defaults.cpp)
  target_link_libraries(${name} PRIVATE ${libs} ropecheck_asan_flags ropecheck_test_main GTest::gtest)
  target_include_directories(${name} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/support)
  # Registered as a whole (or in GoogleTest shards by the caller), not one ctest test per case: an
  # instrumented process takes about a second to start and exit (leak check), which per case
  # (gtest_discover_tests) doubled the CPU time. A failure names its case; `NAME --gtest_filter=CASE`
  # reruns it. The sanitizers' options and the small test scale are built in
  # (support/sanitizer_defaults.cpp).
  if(arg_NO_TEST)
    return()
  endif()
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS ${label} TIMEOUT 300)
endfunction()

# ropecheck_asan_gtest_of(NAME TARGETS t...): one sanitized GoogleTest executable NAME made of the
# sources of the given test executables, linked with the sanitized copies of the libraries they link,
# with their include directories, compile definitions and build dependencies (plugins they load).
# Reading the test targets keeps NAME true when a test file or a test executable is added. Not a ctest
# test itself: the caller registers it (GoogleTest shards).
function(ropecheck_asan_gtest_of name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "TARGETS")
  set(sources)
  set(libs)
  set(includes)
  set(definitions)
  set(depends)
  foreach(t IN LISTS arg_TARGETS)
    get_target_property(dir ${t} SOURCE_DIR)
    get_target_property(srcs ${t} SOURCES)
    foreach(src IN LISTS srcs)
      if(NOT IS_ABSOLUTE ${src})
        set(src ${dir}/${src})
      endif()
      list(APPEND sources ${src})
    endforeach()
    foreach(prop_var IN ITEMS LINK_LIBRARIES:libs INCLUDE_DIRECTORIES:includes COMPILE_DEFINITIONS:definitions
                              MANUALLY_ADDED_DEPENDENCIES:depends)
      string(REPLACE ":" ";" pv ${prop_var})
      list(GET pv 0 prop)
      list(GET pv 1 var)
      get_target_property(values ${t} ${prop})
      if(values)
        list(APPEND ${var} ${values})
      endif()
    endforeach()
  endforeach()
  foreach(var IN ITEMS sources libs includes definitions depends)
    list(REMOVE_DUPLICATES ${var})
  endforeach()
  # The test main, the test paths and GoogleTest come with ropecheck_asan_gtest.
  list(FILTER libs EXCLUDE REGEX "^(ropecheck_test_.*|GTest::.*)$")
  ropecheck_asan_gtest(${name} unit NO_TEST LIBS ${libs} SOURCES ${sources})
  target_include_directories(${name} PRIVATE ${includes})
  target_compile_definitions(${name} PRIVATE ${definitions})
  if(depends)
    add_dependencies(${name} ${depends})
  endif()
endfunction()
