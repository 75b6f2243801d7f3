# SPDX-License-Identifier: MIT
# sensim_probe, the health check of the image, added to the project's own build without
# touching it: the image configures with
#
#   cmake -S . -B /build -DCMAKE_PROJECT_sensim_INCLUDE=docker/probe/probe.cmake
#
# CMake includes this file right after project(sensim); the target is defined once the whole
# tree has been read (deferred), from the C client's public target and header only.
function(sensim_probe_target)
  add_executable(sensim_probe ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/probe.c)
  target_link_libraries(sensim_probe PRIVATE sensim_client)
  sensim_warnings(sensim_probe)
endfunction()
cmake_language(DEFER CALL sensim_probe_target)
