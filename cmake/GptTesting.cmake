# The test files' own code at -O1 in optimised builds (the libraries they test keep their -O3):
# GoogleTest's macros and the tests' bodies are most of the tests' compile time at -O3, and run
# once. Given to the precompiled header too (tests/common), which must see the same options.
function(gpt_test_compile_options target)
  target_compile_options(${target} PRIVATE $<$<CONFIG:Release,RelWithDebInfo>:-O1>)
endfunction()

# gpt_add_test(NAME SOURCES s... LIBS l... [RANKS n...] [THREADS2])
# One GoogleTest binary; without RANKS it runs as one process, with RANKS it is registered
# once per rank count and started by mpiexec -n N (tests must pass oversubscribed on 2 cores).
# THREADS2 registers NAME.threads2 as well: one process with OMP_NUM_THREADS=2, because
# scripts/test.sh runs everything else on one thread and the CPU backend's threaded paths
# would otherwise never run in CI.
# Tests labelled gpu report "skipped", not "passed", when they skipped for want of a GPU
# (test_main prints the marker only when nothing failed: see test_env.hpp).
function(gpt_add_test name)
  cmake_parse_arguments(T "THREADS2" "TIMEOUT" "SOURCES;LIBS;RANKS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} gpt_test_main GTest::gtest)
  gpt_test_compile_options(${name})
  if(GPT_TEST_PCH)
    target_precompile_headers(${name} REUSE_FROM gpt_test_pch)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  set(env "GPT_TEST_SOURCE_DIR=${PROJECT_SOURCE_DIR};GPT_TEST_BINARY_DIR=${PROJECT_BINARY_DIR}")
  set(registered)
  if(T_RANKS)
    foreach(n IN LISTS T_RANKS)
      add_test(NAME ${name}.np${n}
               COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${n} $<TARGET_FILE:${name}>)
      set_tests_properties(${name}.np${n} PROPERTIES TIMEOUT ${T_TIMEOUT} PROCESSORS ${n}
                           LABELS "mpi;${T_LABELS}" ENVIRONMENT "${env}")
      list(APPEND registered ${name}.np${n})
    endforeach()
  else()
    add_test(NAME ${name} COMMAND ${name})
    set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${T_LABELS}"
                         ENVIRONMENT "${env}")
    list(APPEND registered ${name})
  endif()
  if(T_THREADS2)
    add_test(NAME ${name}.threads2 COMMAND ${name})
    set_tests_properties(${name}.threads2 PROPERTIES TIMEOUT ${T_TIMEOUT} PROCESSORS 2
                         LABELS "threads;${T_LABELS}" ENVIRONMENT "${env};OMP_NUM_THREADS=2")
  endif()
  if("gpu" IN_LIST T_LABELS)
    gpt_gpu_test_properties(${registered})
  endif()
endfunction()

# For GPU tests registered by hand as well: a skip for missing hardware shows as a skip, and
# the emulator build, whose emulated device must always be there, fails instead of skipping.
function(gpt_gpu_test_properties)
  foreach(t IN LISTS ARGN)
    set_property(TEST ${t} PROPERTY SKIP_REGULAR_EXPRESSION "GPT_TEST_HARDWARE_SKIP:")
    if(GPT_CUDA_EMU)
      set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT GPT_TEST_REQUIRE_GPU=1)
    endif()
  endforeach()
endfunction()
