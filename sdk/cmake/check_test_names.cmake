# cmake -DROOT=<source dir> -P check_test_names.cmake
# Fails when a doctest TEST_CASE name contains ';': ctest (through
# doctest_discover_tests) would split it into tests whose --test-case filter
# matches nothing, so the case would never run and its ctest would pass.
file(GLOB_RECURSE sources ${ROOT}/hal/*.cc ${ROOT}/sdk/*.cc ${ROOT}/plugins/*.cc ${ROOT}/conformance/*.cc
     ${ROOT}/framework_bridge/*.cc ${ROOT}/templates/*.cc)
set(bad "")
foreach(f ${sources})
  file(STRINGS ${f} lines REGEX "TEST_CASE\\(\"[^\"]*;")
  foreach(l ${lines})
    string(APPEND bad "\n  ${f}: ${l}")
  endforeach()
endforeach()
if(bad)
  message(FATAL_ERROR "TEST_CASE names with ';' never run under ctest (rename them):${bad}")
endif()
