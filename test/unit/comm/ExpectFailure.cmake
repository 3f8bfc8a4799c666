# cmake -DMPIRUN=... -DPROGRAM=... -DMODE=... [-DMPIRUN_FLAGS="..."]
#       -DEXPECT=REGEX -DMAX_SECONDS=N -P ExpectFailure.cmake
#
# Runs PROGRAM MODE --timeout 3 on 4 ranks and passes if the run exits
# non-zero within MAX_SECONDS and its output matches EXPECT.
separate_arguments(flags UNIX_COMMAND "${MPIRUN_FLAGS}")
string(TIMESTAMP start "%s" UTC)
execute_process(
  COMMAND ${MPIRUN} -n 4 --oversubscribe --bind-to none ${flags}
          ${PROGRAM} ${MODE} --timeout 3
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
  TIMEOUT 50)
string(TIMESTAMP end "%s" UTC)
math(EXPR elapsed "${end} - ${start}")
message("exit status '${rc}' after ${elapsed} s; output:\n${out}${err}")
if("${rc}" STREQUAL "0")
  message(FATAL_ERROR "the run succeeded; it should have failed")
endif()
if(NOT "${rc}" MATCHES "^[0-9]+$")
  message(FATAL_ERROR "the run did not end by itself: ${rc}")
endif()
if(NOT "${out}${err}" MATCHES "${EXPECT}")
  message(FATAL_ERROR "no line matches: ${EXPECT}")
endif()
if(elapsed GREATER MAX_SECONDS)
  message(FATAL_ERROR "took ${elapsed} s, more than ${MAX_SECONDS}")
endif()
