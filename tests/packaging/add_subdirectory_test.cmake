# ropecheck consumed with add_subdirectory (like fmt's add-subdirectory-test): configures
# tests/packaging/subdir_consumer, which vendors this source tree, builds its executable (only the leaf
# libraries it links are compiled) and runs it.
#   cmake -DSOURCE_DIR=... -DWORK_DIR=... -DGENERATOR=... -DCXX_COMPILER=... -P add_subdirectory_test.cmake
foreach(var SOURCE_DIR WORK_DIR GENERATOR CXX_COMPILER)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "add_subdirectory_test.cmake: -D${var}=... is required")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK_DIR}")
set(options -DROPECHECK_SOURCE_DIR=${SOURCE_DIR} -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
if(MAKE_PROGRAM)
  list(APPEND options -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM})
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" -S "${SOURCE_DIR}/tests/packaging/subdir_consumer" -B "${WORK_DIR}"
                        -G "${GENERATOR}" ${options}
                RESULT_VARIABLE rv OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rv EQUAL 0)
  message(FATAL_ERROR "the add_subdirectory consumer does not configure:\n${out}")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" --build "${WORK_DIR}" --target subdir_consumer
                RESULT_VARIABLE rv OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rv EQUAL 0)
  message(FATAL_ERROR "the add_subdirectory consumer does not build:\n${out}")
endif()
execute_process(COMMAND "${WORK_DIR}/subdir_consumer" RESULT_VARIABLE rv OUTPUT_VARIABLE out)
if(NOT rv EQUAL 0)
  message(FATAL_ERROR "the add_subdirectory consumer ran and failed (${rv}): ${out}")
endif()
message(STATUS "add_subdirectory consumer: ${out}")
