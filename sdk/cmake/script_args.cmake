# What the SDK's check scripts (check_*.cmake, run with cmake -P by ctest)
# share: their -D arguments. Lists arrive separated by ':', which survives
# add_test's argument quoting.

# Fails naming SCRIPT unless every variable in ARGN was given with -D.
function(hal_require_script_args script)
  foreach(var IN LISTS ARGN)
    if(NOT DEFINED ${var})
      message(FATAL_ERROR "${script}: -D${var}= is required")
    endif()
  endforeach()
endfunction()

# OUT = each entry of the ':'-separated LIST with FLAG in front (-I<dir> ...).
function(hal_flag_list out flag list)
  string(REPLACE ":" ";" items "${list}")
  set(result)
  foreach(item IN LISTS items)
    list(APPEND result ${flag}${item})
  endforeach()
  set(${out} "${result}" PARENT_SCOPE)
endfunction()
