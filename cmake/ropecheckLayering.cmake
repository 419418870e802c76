# Writes the link graph of the project's library targets to <build>/ropecheck_link_graph.txt
# ("target: dep;dep;..." per line: LINK_LIBRARIES, or INTERFACE_LINK_LIBRARIES for header-only targets,
# generator expressions evaluated), read by tests/architecture/check_layering.py (ctest -R architecture).
set(ropecheck_layering_lines "")
foreach(t ropecheck_core ropecheck_accuracy ropecheck_formulas ropecheck_reference ropecheck_kernels
          ropecheck_cuda_kernels ropecheck_kut ropecheck_kut_cuda ropecheck_golden ropecheck_plugin_target ropecheck_props ropecheck_props_gtest
          ropecheck_drift ropecheck_builtin_kernels)
  if(TARGET ${t})
    get_target_property(type ${t} TYPE)
    if(type STREQUAL "INTERFACE_LIBRARY")
      string(APPEND ropecheck_layering_lines "${t}:$<TARGET_PROPERTY:${t},INTERFACE_LINK_LIBRARIES>\n")
    else()
      string(APPEND ropecheck_layering_lines "${t}:$<TARGET_PROPERTY:${t},LINK_LIBRARIES>\n")
    endif()
  endif()
endforeach()
file(GENERATE OUTPUT "${PROJECT_BINARY_DIR}/ropecheck_link_graph.txt" CONTENT "${ropecheck_layering_lines}")
