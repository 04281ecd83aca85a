# gpt_cuda_sources(target file.cu...): adds CUDA sources to a target. Normally nvcc compiles
# them; in the SIMT-emulator build (-DGPT_CUDA_EMU=ON, tests/cuda_emu) each is rewritten
# into host C++ (rewrite_cu.pl) and compiled against the emulator's CUDA headers, so the
# same kernels run on CPUs in CI.
function(gpt_cuda_sources target)
  if(NOT GPT_CUDA_EMU)
    target_sources(${target} PRIVATE ${ARGN})
    # ptxas fails the build when a kernel spills registers to local memory, for every
    # architecture built (80 and 90a): a spill, or a __launch_bounds__ that squeezes a kernel
    # below the registers it needs (ptxas then spills to meet it), is a slowdown no test
    # without a GPU would see. Local arrays (a stack frame without spills) stay allowed.
    target_compile_options(${target} PRIVATE
                           $<$<COMPILE_LANGUAGE:CUDA>:-Xptxas=--warn-on-spills,--warning-as-error>)
    return()
  endif()
  foreach(src IN LISTS ARGN)
    get_filename_component(abs ${src} ABSOLUTE)
    get_filename_component(name ${src} NAME)
    set(out ${CMAKE_CURRENT_BINARY_DIR}/cuda_emu/${name}.cpp)
    add_custom_command(OUTPUT ${out}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_CURRENT_BINARY_DIR}/cuda_emu
      COMMAND perl ${PROJECT_SOURCE_DIR}/tests/cuda_emu/rewrite_cu.pl ${abs} ${out}
      DEPENDS ${abs} ${PROJECT_SOURCE_DIR}/tests/cuda_emu/rewrite_cu.pl
      COMMENT "cuda_emu: ${name} as host C++" VERBATIM)
    target_sources(${target} PRIVATE ${out})
    # Device code idioms that are fine under nvcc (unsigned threadIdx against signed
    # bounds, #pragma unroll) would only be noise here.
    set_source_files_properties(${out} PROPERTIES COMPILE_OPTIONS "-Wno-sign-compare;-Wno-unknown-pragmas")
  endforeach()
  target_link_libraries(${target} PRIVATE gpt_cuda_emu)
endfunction()
