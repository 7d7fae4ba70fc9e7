##===- cmake/KVQSpec.cmake - Compile kvq specs at build time --*- cmake -*-===##
#
# kvq_add_spec(<target> <spec.mlir> [ARTIFACT_ONLY] [EMITTED_ATTEND]
#              [QUANTIZED_ATTEND_PROGRAMS] [OUTPUT_DIR <dir>] [HOST_CPU <cpu>]
#              [DOT_FACTOR_BITS <bits>])
#
# Adds a build step running `kvq-opt --kvq-compile=<dir> <spec>` (whenever the
# spec or kvq-opt changes) and an INTERFACE target <target> that
#  - depends on the step, so consumers build after the artifact exists;
#  - defines KVQ_ARTIFACT_DIR_<TARGET>="<dir>" (<TARGET> upper-cased, as a C
#    identifier) for consumers that open the artifact at run time;
#  - links the artifact's host object kernels.o into consumers (unless
#    ARTIFACT_ONLY), exporting its symbols so that a cache created with
#    HostCode::Linked finds them in the program. (CMake OBJECT libraries drop
#    external objects, so the object travels on the interface link line.)
# The directory is also the target property KVQ_ARTIFACT_DIR; it also holds
# compiled.mlir, the IR after kvq-compile-pipeline (for inspection). <dir>
# defaults to ${CMAKE_CURRENT_BINARY_DIR}/<target>.kvq. HOST_CPU (default
# KVQ_HOST_CPU, else native) is the CPU the host code is compiled for
# (`kvq-opt --kvq-host-cpu`): name a generic one (x86-64-v2, x86-64-v3) for an
# artifact that ships to other machines. EMITTED_ATTEND emits the attend
# kernels of full-precision layers instead of building them as programs
# (`kvq-opt --kvq-attend-programs=false`), for side-by-side tests;
# QUANTIZED_ATTEND_PROGRAMS builds those of quantized layers in channel
# order as programs (`kvq-opt --kvq-quantized-attend-programs`).
# DOT_FACTOR_BITS (16 or 8) rounds the factors of the host CPU's integer
# dots to that many bits (`kvq-opt --kvq-dot-factor-bits`; default 16).
#
# kvq-opt is the in-tree target when it exists, else KVQ_OPT_EXECUTABLE (set
# by kvqConfig.cmake for installed packages).
#
# Linking two artifacts' kernels.o into one program needs distinct kernel
# names; use ARTIFACT_ONLY (run-time loading of kernels.so) otherwise.
#
##===----------------------------------------------------------------------===##

function(kvq_add_spec target spec)
  cmake_parse_arguments(ARG
                        "ARTIFACT_ONLY;EMITTED_ATTEND;QUANTIZED_ATTEND_PROGRAMS"
                        "OUTPUT_DIR;HOST_CPU;DOT_FACTOR_BITS" "" ${ARGN})
  if(NOT ARG_HOST_CPU)
    set(ARG_HOST_CPU ${KVQ_HOST_CPU})
  endif()
  if(NOT ARG_HOST_CPU)
    set(ARG_HOST_CPU native)
  endif()
  get_filename_component(spec "${spec}" ABSOLUTE)
  if(ARG_OUTPUT_DIR)
    set(dir "${ARG_OUTPUT_DIR}")
  else()
    set(dir "${CMAKE_CURRENT_BINARY_DIR}/${target}.kvq")
  endif()

  if(TARGET kvq-opt)
    set(opt $<TARGET_FILE:kvq-opt>)
    set(opt_dep kvq-opt)
  elseif(KVQ_OPT_EXECUTABLE)
    set(opt "${KVQ_OPT_EXECUTABLE}")
    set(opt_dep "${KVQ_OPT_EXECUTABLE}")
  else()
    message(FATAL_ERROR "kvq_add_spec: no kvq-opt (set KVQ_OPT_EXECUTABLE)")
  endif()

  set(flags)
  if(ARG_EMITTED_ATTEND)
    list(APPEND flags --kvq-attend-programs=false)
  endif()
  if(ARG_QUANTIZED_ATTEND_PROGRAMS)
    list(APPEND flags --kvq-quantized-attend-programs)
  endif()
  if(ARG_DOT_FACTOR_BITS)
    list(APPEND flags --kvq-dot-factor-bits=${ARG_DOT_FACTOR_BITS})
  endif()
  # The project's own specs run the verifier after every pass, as its lit
  # tests do; a user's build verifies the lowered module only.
  if(TARGET kvq-opt)
    list(APPEND flags --verify-each)
  endif()

  set(outputs "${dir}/manifest.json" "${dir}/kernels.o" "${dir}/kernels.so")
  add_custom_command(
    OUTPUT ${outputs}
    COMMAND ${CMAKE_COMMAND} -E make_directory "${dir}"
    COMMAND ${opt} "--kvq-compile=${dir}" "--kvq-host-cpu=${ARG_HOST_CPU}"
            ${flags} "${spec}" -o "${dir}/compiled.mlir"
    DEPENDS "${spec}" ${opt_dep}
    COMMENT "Compiling kvq spec ${spec}"
    VERBATIM)
  add_custom_target(${target}_kvq_artifact DEPENDS ${outputs})

  add_library(${target} INTERFACE)
  add_dependencies(${target} ${target}_kvq_artifact)
  string(MAKE_C_IDENTIFIER "${target}" id)
  string(TOUPPER "${id}" id)
  target_compile_definitions(${target} INTERFACE
    "KVQ_ARTIFACT_DIR_${id}=\"${dir}\"")
  if(NOT ARG_ARTIFACT_ONLY)
    # The host code calls libm (exp2f, ...).
    target_link_libraries(${target} INTERFACE "${dir}/kernels.o" m)
    target_link_options(${target} INTERFACE "LINKER:--export-dynamic")
  endif()
  set_target_properties(${target} PROPERTIES KVQ_ARTIFACT_DIR "${dir}")
endfunction()
