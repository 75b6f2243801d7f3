# SPDX-License-Identifier: MIT
# confined.cmake: fail when a file of server/src outside the scene backend includes Embree or
# the backend's private headers, or when the backend's interface (scene/scene.h) or its
# backend-free files (prim, hfield, horizon) do. Run by ctest:
# cmake -DROOT=<server/src> -P confined.cmake
cmake_minimum_required(VERSION 3.22)
set(pattern "#[ \t]*include[ \t]*[<\"](embree3/|scene/embree\\.h|scene/packet\\.h)")
set(free scene/scene.h scene/prim.h scene/prim.c scene/horizon.h scene/horizon.c
         scene/hfield.h scene/hfield.c)
file(GLOB_RECURSE files RELATIVE ${ROOT} ${ROOT}/*.c ${ROOT}/*.h)
set(bad "")
foreach(f ${files})
  if(f MATCHES "^scene/" AND NOT f IN_LIST free)
    continue()
  endif()
  file(STRINGS ${ROOT}/${f} hits REGEX "${pattern}")
  if(hits)
    list(APPEND bad "${f}: ${hits}")
  endif()
endforeach()
if(bad)
  list(JOIN bad "\n  " text)
  message(FATAL_ERROR "Embree outside the scene backend (docs/backend.md):\n  ${text}")
endif()
list(LENGTH files n)
message(STATUS "Embree confined to the scene backend (${n} files checked)")
