# hal_add_plugin(<name> SOURCES <files...> [OUTPUT_DIRECTORY <dir>])
#
# Builds libhal_plugin_<name>.so, a HAL plugin module: links hal::sdk, hides
# every symbol but the entry point, and (in the HAL build tree) places it
# where libhal looks for plugins. Installed with HAL's package config, so a
# vendor's out-of-tree CMakeLists.txt can call it after find_package(HAL).
# A HAL module (MODULE library) named lib<prefix><name>.so exporting ENTRY alone.
function(_hal_add_module target output_name entry)
  cmake_parse_arguments(ARG "" "OUTPUT_DIRECTORY" "SOURCES" ${ARGN})
  add_library(${target} MODULE ${ARG_SOURCES})
  if(TARGET hal::sdk)
    target_link_libraries(${target} PRIVATE hal::sdk)
  else()
    target_link_libraries(${target} PRIVATE hal_sdk)
  endif()
  set_target_properties(${target} PROPERTIES
    PREFIX "lib" OUTPUT_NAME "${output_name}"
    CXX_VISIBILITY_PRESET hidden C_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  if(ARG_OUTPUT_DIRECTORY)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${ARG_OUTPUT_DIRECTORY})
  elseif(DEFINED HAL_PLUGIN_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${HAL_PLUGIN_OUTPUT_DIR})
  endif()
  # Unresolved symbols are an error at link time, not at dlopen time; the
  # version script exports the entry point alone (hidden visibility still
  # lets some libstdc++ symbols through).
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/${target}.map "{ global: ${entry}; local: *; };\n")
  target_link_options(${target} PRIVATE -Wl,--no-undefined
                      -Wl,--version-script=${CMAKE_CURRENT_BINARY_DIR}/${target}.map)
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${CMAKE_CURRENT_BINARY_DIR}/${target}.map)
endfunction()

function(hal_add_plugin name)
  _hal_add_module(hal_plugin_${name} hal_plugin_${name} hal_plugin_entry ${ARGN})
endfunction()

# hal_add_layer(<name> SOURCES ... [OUTPUT_DIRECTORY dir]): target
# hal_layer_<name>, file libhal_layer_<name>.so exporting hal_layer_entry
# (hal/layer.h); found by name in the plugin search paths.
function(hal_add_layer name)
  _hal_add_module(hal_layer_${name} hal_layer_${name} hal_layer_entry ${ARGN})
endfunction()
