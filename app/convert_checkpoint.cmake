# convert_checkpoint: our checkpoints to and from Hugging Face GPT-2 (lib/hf/convert.hpp).
add_executable(convert_checkpoint ${CMAKE_CURRENT_LIST_DIR}/convert_checkpoint.cpp)
target_link_libraries(convert_checkpoint PRIVATE gpt_hf gpt_dist gpt_log)
install(TARGETS convert_checkpoint RUNTIME DESTINATION bin)
