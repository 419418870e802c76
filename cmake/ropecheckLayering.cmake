# Writes the project's targets to <build>/ropecheck_link_graph.txt for tests/architecture/check_layering.py
# (ctest -R architecture): one line per target, "target|source dir|links|sources", the links being
# LINK_LIBRARIES (INTERFACE_LINK_LIBRARIES for header-only targets), generator expressions evaluated.
set(ropecheck_layering_lines "")
foreach(t ropecheck_core ropecheck_accuracy ropecheck_formulas ropecheck_io ropecheck_reference ropecheck_fast_rounding
          ropecheck_kernels ropecheck_attention ropecheck_attention_files ropecheck_cuda_kernels ropecheck_kernel_abi ropecheck_kut ropecheck_kut_cuda
          ropecheck_builtin_kernels ropecheck_plugin ropecheck_kernel_host ropecheck_golden ropecheck_checker
          ropecheck_props ropecheck_props_gtest ropecheck_drift ropecheck _core)
  if(TARGET ${t})
    get_target_property(type ${t} TYPE)
    get_target_property(dir ${t} SOURCE_DIR)
    if(type STREQUAL "INTERFACE_LIBRARY")
      string(APPEND ropecheck_layering_lines "${t}|${dir}|$<TARGET_PROPERTY:${t},INTERFACE_LINK_LIBRARIES>|\n")
    else()
      string(APPEND ropecheck_layering_lines "${t}|${dir}|$<TARGET_PROPERTY:${t},LINK_LIBRARIES>|$<TARGET_PROPERTY:${t},SOURCES>\n")
    endif()
  endif()
endforeach()
file(GENERATE OUTPUT "${PROJECT_BINARY_DIR}/ropecheck_link_graph.txt" CONTENT "${ropecheck_layering_lines}")
