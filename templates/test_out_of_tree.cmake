# templates.out_of_tree_build: proves that templates/plugin works the way its
# README says, against an installed HAL and from outside the source tree.
#
#   1. cmake --install <HAL build> into a fresh prefix;
#   2. copy templates/plugin to a fresh directory, build it against the
#      prefix, load it with <prefix>/bin/hal-info (text and --json) and run
#      <prefix>/bin/hal-conformance on it: op.add.float32 passes, every other
#      op test is skipped with a reason, nothing fails;
#   3. copy it again, rename it to "acme" with the commands of README.md's
#      "Copy and rename" (read from the README), build it, load it, install
#      it into the prefix and check that libhal discovers it there next to
#      the cpu plugin;
#   3b. replace acme_ops.cc with the code of docs/vendor_guide.md's worked
#      example (worked_example.cmake), rebuild, and run the installed
#      hal-conformance on it with conformance/tests/check_run.py's
#      worked_example checks (needs -DPYTHON=<python3>);
#   4. build templates/package_test against the prefix (find_package(HAL)
#      gives hal::sdk, hal::runtime, hal_add_plugin) and round-trip bytes
#      through the template's device with the installed libhal;
#   5. remove the temporary directories (kept when HAL_TEST_KEEP_TEMP is set
#      in the environment, for debugging).
#
# Run with: cmake -DHAL_SOURCE_DIR=<src> -DHAL_BINARY_DIR=<build>
#   [-DGENERATOR=<gen>] [-DMAKE_PROGRAM=<prog>] [-DCXX_COMPILER=<c++>]
#   [-DSANITIZE=ON] [-DPYTHON=<python3>] -P test_out_of_tree.cmake
cmake_minimum_required(VERSION 3.20)
include(${CMAKE_CURRENT_LIST_DIR}/worked_example.cmake)

foreach(var HAL_SOURCE_DIR HAL_BINARY_DIR)
  if(NOT IS_DIRECTORY "${${var}}")
    message(FATAL_ERROR "templates.out_of_tree_build: -D${var}=<dir> is required (got '${${var}}')")
  endif()
endforeach()

# ---- helpers ----------------------------------------------------------------

# Removes every temp dir made so far, unless the user asked to keep them.
function(cleanup)
  get_property(dirs GLOBAL PROPERTY hal_temp_dirs)
  if(DEFINED ENV{HAL_TEST_KEEP_TEMP})
    message(STATUS "HAL_TEST_KEEP_TEMP is set; keeping ${dirs}")
  elseif(dirs)
    file(REMOVE_RECURSE ${dirs})
  endif()
endfunction()

# Fails the test with MESSAGE after cleaning up.
function(fail message)
  cleanup()
  message(FATAL_ERROR "templates.out_of_tree_build: ${message}")
endfunction()

# Makes a fresh private (mode 0700) temp dir; libhal refuses plugins in
# world-writable directories, so nothing is built in /tmp itself.
function(make_temp_dir out_var label)
  execute_process(COMMAND mktemp -d -t hal-${label}.XXXXXX RESULT_VARIABLE rc
                  OUTPUT_VARIABLE dir ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0 OR NOT IS_DIRECTORY "${dir}")
    fail("mktemp -d failed (${rc}): ${err}")
  endif()
  set_property(GLOBAL APPEND PROPERTY hal_temp_dirs "${dir}")
  set(${out_var} "${dir}" PARENT_SCOPE)
endfunction()

# run(<what> [OUT <var>] [DIR <working dir>] COMMAND <command...>)
# Runs the command; on a non-zero exit fails the test, naming WHAT, the
# command and its output. OUT receives stdout (stderr in <var>_ERR).
function(run what)
  cmake_parse_arguments(ARG "" "OUT;DIR" "COMMAND" ${ARGN})
  if(NOT ARG_DIR)
    set(ARG_DIR "${work}")
  endif()
  message(STATUS "${what}")
  execute_process(COMMAND ${ARG_COMMAND} WORKING_DIRECTORY "${ARG_DIR}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    list(JOIN ARG_COMMAND " " shown)
    fail("${what} failed (exit status ${rc}):\n  ${shown}\n--- stdout\n${out}--- stderr\n${err}")
  endif()
  if(ARG_OUT)
    set(${ARG_OUT} "${out}" PARENT_SCOPE)
    set(${ARG_OUT}_ERR "${err}" PARENT_SCOPE)
  endif()
endfunction()

# Fails unless TEXT matches REGEX; WHAT says what was expected.
function(expect_match text regex what)
  if(NOT text MATCHES "${regex}")
    fail("${what} (no match for /${regex}/) in:\n${text}")
  endif()
endfunction()

# ---- 1. install HAL into a fresh prefix ---------------------------------------

make_temp_dir(prefix prefix)
make_temp_dir(work work)

# Configure arguments shared by every out-of-tree project: the fresh prefix
# only, and the same generator and compiler as the HAL build.
set(configure_args -DCMAKE_PREFIX_PATH=${prefix})
if(GENERATOR)
  list(APPEND configure_args -G "${GENERATOR}")
endif()
if(MAKE_PROGRAM)
  list(APPEND configure_args -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM})
endif()
if(CXX_COMPILER)
  list(APPEND configure_args -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
endif()
if(SANITIZE)
  # An ASan libhal needs the ASan runtime loaded first in every executable.
  foreach(kind CXX_FLAGS EXE_LINKER_FLAGS MODULE_LINKER_FLAGS)
    list(APPEND configure_args -DCMAKE_${kind}=-fsanitize=address,undefined)
  endforeach()
endif()

# configure_and_build(<source dir> <build dir>): like the README's
# `cmake -S . -B build -DCMAKE_PREFIX_PATH=<prefix>` + `cmake --build build`,
# and checks that HAL came from the fresh prefix, not from elsewhere.
function(configure_and_build src build)
  run("configure ${src}" COMMAND ${CMAKE_COMMAND} -S ${src} -B ${build} ${configure_args})
  file(STRINGS ${build}/CMakeCache.txt hal_dir REGEX "^HAL_DIR:")
  string(FIND "${hal_dir}" "=${prefix}/" at)
  if(at EQUAL -1)
    fail("${src} found HAL outside the fresh prefix ${prefix}: ${hal_dir}")
  endif()
  run("build ${src}" COMMAND ${CMAKE_COMMAND} --build ${build} --parallel 2)
endfunction()

run("install ${HAL_BINARY_DIR} into ${prefix}"
    COMMAND ${CMAKE_COMMAND} --install ${HAL_BINARY_DIR} --prefix ${prefix})
set(hal_info ${prefix}/bin/hal-info)
if(NOT EXISTS ${hal_info})
  fail("cmake --install did not install ${hal_info} (built with HAL_BUILD_TOOLS=OFF?)")
endif()
# hal-info reads HAL_CONFIG and HAL_PLUGIN_PATH; the caller's must not leak in.
set(hal_info_cmd ${CMAKE_COMMAND} -E env --unset=HAL_CONFIG --unset=HAL_PLUGIN_PATH ${hal_info})

# ---- 2. the template, copied out of the tree ---------------------------------

# Skip a stray in-source build directory a developer may have left behind.
file(COPY ${HAL_SOURCE_DIR}/templates/plugin DESTINATION ${work} PATTERN build EXCLUDE)
set(template_dir ${work}/plugin)
configure_and_build(${template_dir} ${template_dir}/build)
set(template_so ${template_dir}/build/libhal_plugin_template.so)
if(NOT EXISTS ${template_so})
  file(GLOB built ${template_dir}/build/*.so)
  fail("the build did not produce ${template_so} (found: ${built})")
endif()

run("hal-info --plugin ${template_so}" OUT text COMMAND ${hal_info_cmd} --plugin ${template_so})
expect_match("${text}" "plugins: 1 loaded, 0 skipped" "hal-info did not load exactly the template plugin")
expect_match("${text}" "\n  template [^\n]*devices: [1-9]" "hal-info did not list plugin 'template' with a device")
expect_match("${text}" "\n  template:0  " "hal-info did not list device template:0")

run("hal-info --json --plugin ${template_so}" OUT json COMMAND ${hal_info_cmd} --json --plugin ${template_so})
# json_get(<var> GET|LENGTH <path...>): reads from JSON or fails the test.
function(json_get out_var mode)
  string(JSON value ERROR_VARIABLE err ${mode} "${json}" ${ARGN})
  if(err)
    fail("hal-info --json: ${err}\n${json}")
  endif()
  set(${out_var} "${value}" PARENT_SCOPE)
endfunction()
json_get(name GET plugins 0 name)
json_get(device_id GET plugins 0 devices 0)
json_get(device_plugin GET devices 0 plugin)
json_get(device_caps GET devices 0 capabilities)
json_get(skipped LENGTH skipped)
if(NOT name STREQUAL "template" OR NOT device_id STREQUAL "template:0"
   OR NOT device_plugin STREQUAL "template" OR NOT skipped EQUAL 0)
  fail("hal-info --json: expected plugin 'template' with device 'template:0' and nothing skipped, got "
       "plugin '${name}', device '${device_id}' of plugin '${device_plugin}', ${skipped} skipped:\n${json}")
endif()
# The template has operators (add) but no streams, and must not claim them.
if(device_caps MATCHES "\"stream\"" OR NOT device_caps MATCHES "\"operator\"")
  fail("the template device should claim operator and not stream: ${device_caps}")
endif()

# README.md "Running hal-conformance": the installed runner passes the
# unmodified template's float32 add and skips every other op test with a
# reason (other ops: not implemented; other dtypes of add: refused).
set(hal_conformance ${prefix}/bin/hal-conformance)
if(EXISTS ${hal_conformance})
  set(report_file ${work}/template-conformance.json)
  run("hal-conformance --plugin ${template_so}" OUT text
      COMMAND ${CMAKE_COMMAND} -E env --unset=HAL_CONFIG --unset=HAL_PLUGIN_PATH ${hal_conformance}
              --plugin ${template_so} --report-json ${report_file})
  expect_match("${text}" "\n[1-9][0-9]* passed, 0 failed, [1-9][0-9]* skipped\n"
               "hal-conformance did not pass the template")
  file(READ ${report_file} json)
  json_get(test_count LENGTH tests)
  set(add_passed FALSE)
  set(wrong "")
  math(EXPR last "${test_count} - 1")
  foreach(i RANGE ${last})
    json_get(test_name GET tests ${i} name)
    json_get(test_status GET tests ${i} status)
    string(JSON reason ERROR_VARIABLE no_reason GET "${json}" tests ${i} skip_reason)
    if(test_name STREQUAL "op.add.float32")
      if(test_status STREQUAL "passed")
        set(add_passed TRUE)
      else()
        string(APPEND wrong "\n  ${test_name}: ${test_status}, expected passed")
      endif()
    elseif(test_name MATCHES "^op\\.")
      if(NOT test_status STREQUAL "skipped" OR no_reason OR reason STREQUAL "")
        string(APPEND wrong "\n  ${test_name}: ${test_status} (reason '${reason}'), expected skipped with a reason")
      endif()
    elseif(NOT test_status STREQUAL "passed")
      string(APPEND wrong "\n  ${test_name}: ${test_status}, expected passed")
    endif()
  endforeach()
  if(NOT add_passed OR wrong)
    fail("hal-conformance on the template: op.add.float32 passed = ${add_passed}; unexpected:${wrong}\n${text}")
  endif()
endif()

# ---- 3. rename exactly as README.md says, build, install ----------------------

file(COPY ${HAL_SOURCE_DIR}/templates/plugin/ DESTINATION ${work}/acme-hal-plugin PATTERN build EXCLUDE)
set(acme_dir ${work}/acme-hal-plugin)
# The README's "Copy and rename" block, minus its cp and cd lines, run as is.
hal_readme_rename_script(${HAL_SOURCE_DIR}/templates/plugin/README.md rename_script)
if(NOT rename_script)
  fail("README.md's \"1. Copy and rename\" has no sh block with the mv and sed commands")
endif()
file(WRITE ${work}/rename.sh "set -e\n${rename_script}")
run("rename to acme (README.md)" DIR ${acme_dir} COMMAND sh ${work}/rename.sh)
file(GLOB acme_files RELATIVE ${acme_dir} ${acme_dir}/*)
foreach(f acme_plugin.cc acme_plugin.hpp acme_ops.cc)
  if(NOT f IN_LIST acme_files)
    fail("the README's rename did not produce ${f} (have: ${acme_files})")
  endif()
endforeach()
foreach(f ${acme_files})
  if(f MATCHES "[Tt][Ee][Mm][Pp][Ll][Aa][Tt][Ee]")
    fail("after the README's rename, file ${f} still says 'template'")
  endif()
  if(f STREQUAL "README.md")
    continue()
  endif()
  file(STRINGS ${acme_dir}/${f} left REGEX "[Tt][Ee][Mm][Pp][Ll][Aa][Tt][Ee]")
  if(left)
    fail("after the README's rename, ${f} still says 'template': ${left}")
  endif()
endforeach()
configure_and_build(${acme_dir} ${acme_dir}/build)
set(acme_so ${acme_dir}/build/libhal_plugin_acme.so)
run("hal-info --plugin ${acme_so}" OUT text COMMAND ${hal_info_cmd} --plugin ${acme_so})
expect_match("${text}" "\n  acme:0  " "hal-info did not list device acme:0 of the renamed plugin")

# README step 5: installed into HAL's prefix, libhal finds it without config.
run("install the acme plugin into ${prefix}" COMMAND ${CMAKE_COMMAND} --install ${acme_dir}/build --prefix ${prefix})
run("hal-info (install-dir discovery)" OUT text COMMAND ${hal_info_cmd})
expect_match("${text}" "\n  cpu:0  " "hal-info did not discover the installed cpu plugin")
expect_match("${text}" "\n  acme:0  " "hal-info did not discover the acme plugin installed into the HAL prefix")

# ---- 3b. the vendor guide's worked example --------------------------------------

# docs/vendor_guide.md: replace acme_ops.cc with the guide's, build, and run
# the installed hal-conformance as the guide says (uniform float32 add, mul,
# relu and mm pass, mixed-dtype cases are declined, nothing fails; through
# the core with the installed cpu plugin as fallback device, the mixed cases
# pass).
hal_guide_code(${HAL_SOURCE_DIR}/docs/vendor_guide.md acme_ops.cc guide_code)
if(NOT guide_code)
  fail("docs/vendor_guide.md has no ```cpp file=acme_ops.cc block")
endif()
file(WRITE ${acme_dir}/acme_ops.cc "${guide_code}")
run("build the guide's worked example" COMMAND ${CMAKE_COMMAND} --build ${acme_dir}/build --parallel 2)
if(EXISTS ${hal_conformance})
  if(NOT PYTHON)
    fail("-DPYTHON=<python3> is required to check the worked example's conformance run")
  endif()
  file(GLOB cpu_so ${prefix}/lib*/hal/plugins/libhal_plugin_cpu.so)
  run("hal-conformance on the guide's worked example" OUT text
      COMMAND ${CMAKE_COMMAND} -E env --unset=HAL_CONFIG --unset=HAL_PLUGIN_PATH
              ${PYTHON} ${HAL_SOURCE_DIR}/conformance/tests/check_run.py worked_example
              ${hal_conformance} ${acme_so} ${work}/worked-example ${cpu_so})
  message(STATUS "${text}")
endif()

# ---- 4. the installed package from a consumer's point of view ----------------

configure_and_build(${HAL_SOURCE_DIR}/templates/package_test ${work}/package-build)
run("hal_package_test ${template_so}" OUT text
    COMMAND ${work}/package-build/hal_package_test ${template_so} template)
message(STATUS "${text}")

# ---- 5. clean up ---------------------------------------------------------------

cleanup()
message(STATUS "templates.out_of_tree_build: passed")
