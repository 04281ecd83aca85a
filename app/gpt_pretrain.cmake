add_executable(gpt_pretrain ${CMAKE_CURRENT_SOURCE_DIR}/gpt_pretrain.cpp)
target_link_libraries(gpt_pretrain PRIVATE gpt_config gpt_log gpt_dist)
# Parts that land in their own issues are linked when their targets exist; the main says
# clearly what is missing otherwise.
foreach(part plan train data)
  if(TARGET gpt_${part})
    string(TOUPPER ${part} PART)
    target_link_libraries(gpt_pretrain PRIVATE gpt_${part})
    target_compile_definitions(gpt_pretrain PRIVATE GPT_HAVE_${PART}=1)
  endif()
endforeach()
# lib/train saves and loads checkpoints (--save/--load, --exit-signal-handler).
if(TARGET gpt_train)
  target_compile_definitions(gpt_pretrain PRIVATE GPT_TRAINER_CHECKPOINTS=1)
endif()
install(TARGETS gpt_pretrain RUNTIME DESTINATION bin)
