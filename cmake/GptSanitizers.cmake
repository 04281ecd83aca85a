# Sanitizer and fuzzing builds (scripts/test.sh builds them in their own trees).
#   -DGPT_SANITIZE=address,undefined   AddressSanitizer + UndefinedBehaviorSanitizer
#   -DGPT_SANITIZE=thread              ThreadSanitizer
#   -DGPT_FUZZ=ON                      (clang) libFuzzer coverage in every library and the
#                                      fuzz targets of tests/fuzz linked against libFuzzer
# Every finding aborts the test that hit it: UBSan does not recover, so a report can never
# scroll past in a passing run. The suppressions of findings in the uninstrumented
# libraries we link (MPICH, OpenBLAS, HDF5, the OpenMP runtime) are in tests/sanitizers/.
set(GPT_SANITIZE "" CACHE STRING "Sanitizers for every target: address,undefined | thread | empty")
option(GPT_FUZZ "Build the libFuzzer targets of tests/fuzz (clang only)" OFF)

if(GPT_SANITIZE)
  if(GPT_SANITIZE MATCHES "thread" AND GPT_SANITIZE MATCHES "address")
    message(FATAL_ERROR "GPT_SANITIZE: ThreadSanitizer cannot be combined with AddressSanitizer")
  endif()
  # Line tables are enough for symbolised reports and keep objects small.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    set(GPT_SANITIZE_DEBUG -gline-tables-only)
  else()
    set(GPT_SANITIZE_DEBUG -g1)
  endif()
  add_compile_options(-fsanitize=${GPT_SANITIZE} -fno-omit-frame-pointer ${GPT_SANITIZE_DEBUG})
  add_link_options(-fsanitize=${GPT_SANITIZE})
  if(GPT_SANITIZE MATCHES "undefined")
    add_compile_options(-fno-sanitize-recover=undefined)
  endif()
endif()

if(GPT_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "GPT_FUZZ=ON needs clang (libFuzzer): configure with -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang")
  endif()
  # Coverage feedback from our code; the fuzz targets themselves link -fsanitize=fuzzer.
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()

# The run-time options (halt on the first report, the suppressions files) are compiled into
# every executable (tests/sanitizers/defaults.cpp, built here at configure time and put on
# each executable's link line), so a test finds them however it is started: by CTest, by
# mpiexec, by a test script, or by hand. ASAN_OPTIONS & co. in the environment still win.
if(GPT_SANITIZE)
  set(GPT_SANITIZER_DEFAULTS ${PROJECT_BINARY_DIR}/sanitizer_defaults.o)
  set(src ${PROJECT_SOURCE_DIR}/tests/sanitizers/defaults.cpp)
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -std=c++17 -O1 -fPIC -c ${src} -o ${GPT_SANITIZER_DEFAULTS}
                          -DGPT_SANITIZER_DIR="${PROJECT_SOURCE_DIR}/tests/sanitizers"
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "cannot compile ${src}")
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${src})
  add_link_options($<$<STREQUAL:$<TARGET_PROPERTY:TYPE>,EXECUTABLE>:${GPT_SANITIZER_DEFAULTS}>)
endif()
