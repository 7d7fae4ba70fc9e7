##===- RunPackageTest.cmake - install kvq, build a consumer against it ----===##
#
# cmake -DKVQ_BUILD_DIR=... -DWORK_DIR=... -DSOURCE_DIR=... -DSPEC=...
#       -DGENERATOR=... [-DCONSUMER_FLAGS=...] -P RunPackageTest.cmake
#
# CONSUMER_FLAGS: compile and link flags of the consumer (a sanitizer build
# of kvq needs its consumers instrumented the same way).
#
##===----------------------------------------------------------------------===##

set(prefix ${WORK_DIR}/install)
set(build ${WORK_DIR}/build)
file(REMOVE_RECURSE ${WORK_DIR})

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}")
  endif()
  set(output "${out}" PARENT_SCOPE)
endfunction()

run(${CMAKE_COMMAND} --install ${KVQ_BUILD_DIR} --prefix ${prefix})
run(${CMAKE_COMMAND} -G ${GENERATOR} -S ${SOURCE_DIR} -B ${build}
    -DCMAKE_PREFIX_PATH=${prefix} -DKVQ_TEST_SPEC=${SPEC}
    "-DCMAKE_C_FLAGS=${CONSUMER_FLAGS}" "-DCMAKE_CXX_FLAGS=${CONSUMER_FLAGS}"
    "-DCMAKE_EXE_LINKER_FLAGS=${CONSUMER_FLAGS}")
run(${CMAKE_COMMAND} --build ${build})
run(${build}/package-test)
message(STATUS "${output}")
