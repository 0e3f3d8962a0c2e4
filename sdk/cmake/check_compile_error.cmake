# Compiles SOURCE (syntax only) and passes only if the compiler refuses it
# with a message matching EXPECT: a misuse of the SDK must be explained by
# the compiler. Not installed; driven by ctest:
#   cmake -DCXX=<compiler> -DSOURCE=<file> -DINCLUDES=<dir:dir> [-DDEFINES=<A=1:B>] -DEXPECT=<regex>
#         -P check_compile_error.cmake
foreach(var CXX SOURCE INCLUDES EXPECT)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_compile_error.cmake: -D${var}= is required")
  endif()
endforeach()
string(REPLACE ":" ";" INCLUDES "${INCLUDES}")
string(REPLACE ":" ";" DEFINES "${DEFINES}")
set(args)
foreach(dir IN LISTS INCLUDES)
  list(APPEND args -I${dir})
endforeach()
foreach(d IN LISTS DEFINES)
  list(APPEND args -D${d})
endforeach()
execute_process(COMMAND ${CXX} -std=c++17 -fsyntax-only ${args} -x c++ ${SOURCE}
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
if(rc EQUAL 0)
  message(FATAL_ERROR "${SOURCE} (${DEFINES}) compiled, but it must be refused with /${EXPECT}/")
endif()
if(NOT err MATCHES "${EXPECT}")
  message(FATAL_ERROR "${SOURCE} (${DEFINES}) was refused without /${EXPECT}/ in the message:\n${err}")
endif()
message(STATUS "refused as expected: ${CMAKE_MATCH_0}")
