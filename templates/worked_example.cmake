# The vendor guide's worked example (docs/vendor_guide.md, "Worked example"),
# made from the guide itself so that its text and the built code are one
# source: the guide's code blocks whose info string is `cpp file=<name>`,
# concatenated in order, are the file <name>.
#
# Included by test_out_of_tree.cmake (functions only). Run as a script by
# templates/CMakeLists.txt to make the in-tree test plugin hal_plugin_acme:
#   cmake -DHAL_SOURCE_DIR=<src> -DOUT_DIR=<dir> -P worked_example.cmake
# copies templates/plugin to <dir>, renames it to acme with the commands of
# the template README's "1. Copy and rename" (as a vendor would), and
# replaces acme_ops.cc with the guide's.
if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  cmake_minimum_required(VERSION 3.20)  # before the functions: they keep these policies
endif()

# hal_guide_code(<guide.md> <file name> <out var>): the concatenated code of
# GUIDE's ```cpp file=<file name> blocks; empty when there is none. Fails on
# a block that is never closed.
function(hal_guide_code guide name out_var)
  file(READ "${guide}" text)
  set(open "\n```cpp file=${name}\n")
  string(LENGTH "${open}" open_len)
  set(code "")
  while(TRUE)
    string(FIND "${text}" "${open}" at)
    if(at EQUAL -1)
      break()
    endif()
    math(EXPR at "${at} + ${open_len}")
    string(SUBSTRING "${text}" ${at} -1 text)
    if(text MATCHES "^```")
      continue()  # an empty block
    endif()
    string(FIND "${text}" "\n```" end)
    if(end EQUAL -1)
      message(FATAL_ERROR "${guide}: a ```cpp file=${name} block is never closed")
    endif()
    math(EXPR end "${end} + 1")
    string(SUBSTRING "${text}" 0 ${end} block)
    string(APPEND code "${block}")
    string(SUBSTRING "${text}" ${end} -1 text)
  endwhile()
  set(${out_var} "${code}" PARENT_SCOPE)
endfunction()

# hal_readme_rename_script(<README.md> <out var>): the sh commands of the
# template README's "1. Copy and rename" block minus its cp and cd lines
# (run inside the copy, they rename it to acme); empty when the README has
# no such block with mv and sed commands.
function(hal_readme_rename_script readme out_var)
  file(READ "${readme}" text)
  set(block "")
  string(FIND "${text}" "\n## 1. Copy and rename\n" at)
  if(at GREATER -1)
    string(SUBSTRING "${text}" ${at} -1 block)
    string(FIND "${block}" "```sh\n" at)
  endif()
  if(at GREATER -1)
    math(EXPR at "${at} + 6")
    string(SUBSTRING "${block}" ${at} -1 block)
    string(FIND "${block}" "```" at)
    string(SUBSTRING "${block}" 0 ${at} block)
  endif()
  string(REGEX REPLACE "(^|\n)(cp|cd) [^\n]*" "" script "${block}")
  if(NOT script MATCHES "mv " OR NOT script MATCHES "sed -i")
    set(script "")
  endif()
  set(${out_var} "${script}" PARENT_SCOPE)
endfunction()

if(NOT CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  return()  # included: the functions only
endif()

foreach(var HAL_SOURCE_DIR OUT_DIR)
  if(NOT ${var})
    message(FATAL_ERROR "worked_example.cmake: -D${var}=<dir> is required")
  endif()
endforeach()
set(readme ${HAL_SOURCE_DIR}/templates/plugin/README.md)
hal_readme_rename_script(${readme} rename)
if(NOT rename)
  message(FATAL_ERROR "${readme} has no \"1. Copy and rename\" sh block with mv and sed commands")
endif()
hal_guide_code(${HAL_SOURCE_DIR}/docs/vendor_guide.md acme_ops.cc code)
if(NOT code)
  message(FATAL_ERROR "${HAL_SOURCE_DIR}/docs/vendor_guide.md has no ```cpp file=acme_ops.cc block")
endif()

file(REMOVE_RECURSE ${OUT_DIR})
get_filename_component(parent ${OUT_DIR} DIRECTORY)
file(MAKE_DIRECTORY ${parent})
file(COPY ${HAL_SOURCE_DIR}/templates/plugin/ DESTINATION ${OUT_DIR} PATTERN build EXCLUDE)
file(WRITE ${OUT_DIR}.rename.sh "set -e\n${rename}")
execute_process(COMMAND sh ${OUT_DIR}.rename.sh WORKING_DIRECTORY ${OUT_DIR}
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the template README's rename failed in ${OUT_DIR} (${rc}): ${err}")
endif()
file(WRITE ${OUT_DIR}/acme_ops.cc "${code}")
# file(COPY) kept the sources' times; the build must see these as new.
file(TOUCH ${OUT_DIR}/acme_plugin.cc ${OUT_DIR}/acme_plugin.hpp)
