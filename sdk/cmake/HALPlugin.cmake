# hal_add_plugin(<name> SOURCES <files...> [OUTPUT_DIRECTORY <dir>])
#
# Builds libhal_plugin_<name>.so, a HAL plugin module: links hal::sdk, hides
# every symbol but the entry point, and (in the HAL build tree) places it
# where libhal looks for plugins. Installed with HAL's package config, so a
# vendor's out-of-tree CMakeLists.txt can call it after find_package(HAL).
function(hal_add_plugin name)
  cmake_parse_arguments(ARG "" "OUTPUT_DIRECTORY" "SOURCES" ${ARGN})
  set(target hal_plugin_${name})
  add_library(${target} MODULE ${ARG_SOURCES})
  if(TARGET hal::sdk)
    target_link_libraries(${target} PRIVATE hal::sdk)
  else()
    target_link_libraries(${target} PRIVATE hal_sdk)
  endif()
  set_target_properties(${target} PROPERTIES
    PREFIX "lib" OUTPUT_NAME "hal_plugin_${name}"
    CXX_VISIBILITY_PRESET hidden C_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  if(ARG_OUTPUT_DIRECTORY)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${ARG_OUTPUT_DIRECTORY})
  elseif(DEFINED HAL_PLUGIN_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${HAL_PLUGIN_OUTPUT_DIR})
  endif()
  # Unresolved symbols are an error at link time, not at dlopen time; the
  # version script exports the entry point alone (hidden visibility still
  # lets some libstdc++ symbols through).
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/${target}.map "{ global: hal_plugin_entry; local: *; };\n")
  target_link_options(${target} PRIVATE -Wl,--no-undefined
                      -Wl,--version-script=${CMAKE_CURRENT_BINARY_DIR}/${target}.map)
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${CMAKE_CURRENT_BINARY_DIR}/${target}.map)
endfunction()
