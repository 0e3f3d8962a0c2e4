# Compiles SOURCE (syntax only) and passes only if the compiler refuses it
# with a message matching EXPECT: a misuse of the SDK must be explained by
# the compiler. Not installed; driven by ctest:
#   cmake -DCXX=<compiler> -DSOURCE=<file> -DINCLUDES=<dir:dir> [-DDEFINES=<A=1:B>] -DEXPECT=<regex>
#         -P check_compile_error.cmake
include(${CMAKE_CURRENT_LIST_DIR}/script_args.cmake)
hal_require_script_args(check_compile_error.cmake CXX SOURCE INCLUDES EXPECT)
hal_flag_list(include_args -I "${INCLUDES}")
hal_flag_list(define_args -D "${DEFINES}")
string(REPLACE ":" ";" DEFINES "${DEFINES}")
execute_process(COMMAND ${CXX} -std=c++17 -fsyntax-only ${include_args} ${define_args} -x c++ ${SOURCE}
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
if(rc EQUAL 0)
  message(FATAL_ERROR "${SOURCE} (${DEFINES}) compiled, but it must be refused with /${EXPECT}/")
endif()
if(NOT err MATCHES "${EXPECT}")
  message(FATAL_ERROR "${SOURCE} (${DEFINES}) was refused without /${EXPECT}/ in the message:\n${err}")
endif()
message(STATUS "refused as expected: ${CMAKE_MATCH_0}")
