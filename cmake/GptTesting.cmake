# gpt_add_test(NAME SOURCES s... LIBS l... [RANKS n...])
# One GoogleTest binary; without RANKS it runs as one process, with RANKS it is registered
# once per rank count and started by mpiexec -n N (tests must pass oversubscribed on 2 cores).
function(gpt_add_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;RANKS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} gpt_test_main GTest::gtest)
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  if(T_RANKS)
    foreach(n IN LISTS T_RANKS)
      add_test(NAME ${name}.np${n}
               COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${n} $<TARGET_FILE:${name}>)
      set_tests_properties(${name}.np${n} PROPERTIES TIMEOUT ${T_TIMEOUT} PROCESSORS ${n}
                           LABELS "mpi;${T_LABELS}"
                           ENVIRONMENT "GPT_TEST_SOURCE_DIR=${PROJECT_SOURCE_DIR};GPT_TEST_BINARY_DIR=${PROJECT_BINARY_DIR}")
    endforeach()
  else()
    add_test(NAME ${name} COMMAND ${name})
    set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${T_LABELS}"
                         ENVIRONMENT "GPT_TEST_SOURCE_DIR=${PROJECT_SOURCE_DIR};GPT_TEST_BINARY_DIR=${PROJECT_BINARY_DIR}")
  endif()
endfunction()
