# Compiles each of SOURCES alone (syntax only) and fails if one does not
# compile or includes, directly or transitively, a header whose path
# matches FORBID. Not installed; driven by ctest:
#   cmake -DCXX=<compiler> -DSOURCES=<a:b> -DINCLUDES=<dir:dir> -DFORBID=<regex> -P check_includes.cmake
# (lists separated by ':', which survives add_test's argument quoting).
include(${CMAKE_CURRENT_LIST_DIR}/script_args.cmake)
hal_require_script_args(check_includes.cmake CXX SOURCES INCLUDES FORBID)
string(REPLACE ":" ";" SOURCES "${SOURCES}")
hal_flag_list(include_args -I "${INCLUDES}")
foreach(src IN LISTS SOURCES)
  # -H lists every header the compiler opens, one per line, on stderr.
  execute_process(COMMAND ${CXX} -std=c++17 -fsyntax-only -H ${include_args} -x c++ ${src}
                  RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${src} does not compile on its own:\n${err}")
  endif()
  string(REGEX MATCH "[^\n]*(${FORBID})[^\n]*" hit "${err}")
  if(hit)
    message(FATAL_ERROR "${src} includes a header it must not (matches '${FORBID}'):\n${hit}")
  endif()
  message(STATUS "ok: ${src}")
endforeach()
