# SPDX-License-Identifier: MIT
# Fails unless every global symbol the C client library defines starts with `sensim_`, so that
# linking it into a program cannot clash with the program's own names.
# Usage: cmake -DNM=<nm> -DLIB=<libsensim.a> -P global_symbols.cmake
#        cmake -DNM=<nm> -DLIB=<libsensim.so> -DDYNAMIC=1 -P global_symbols.cmake (the symbols
#        the shared library exports)
if(DYNAMIC)
  set(scope -D)
else()
  set(scope -g)
endif()
execute_process(COMMAND ${NM} ${scope} --defined-only ${LIB}
                OUTPUT_VARIABLE out RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} ${LIB} failed: ${err}")
endif()
string(REPLACE "\n" ";" lines "${out}")
set(bad "")
set(count 0)
foreach(line IN LISTS lines)
  # "<address> <type> <name>"; archive member headers ("file.o:") and blank lines are skipped
  if(line MATCHES "^[0-9a-fA-F]+ [A-Za-z] (.+)$")
    set(name "${CMAKE_MATCH_1}")
    math(EXPR count "${count} + 1")
    # a sanitizer build's own indicators of our globals are not ours to name
    if(NOT name MATCHES "^sensim_" AND NOT name MATCHES "^__odr_asan\\.sensim_")
      list(APPEND bad "${name}")
    endif()
  endif()
endforeach()
if(count EQUAL 0)
  message(FATAL_ERROR "no global symbols found in ${LIB}")
endif()
if(bad)
  message(FATAL_ERROR "global symbols without the sensim_ prefix in ${LIB}: ${bad}")
endif()
message(STATUS "${count} global symbols, all prefixed sensim_")
