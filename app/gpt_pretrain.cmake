add_executable(gpt_pretrain ${CMAKE_CURRENT_SOURCE_DIR}/gpt_pretrain.cpp)
target_link_libraries(gpt_pretrain PRIVATE gpt_config gpt_log gpt_dist gpt_plan gpt_train gpt_data)
install(TARGETS gpt_pretrain RUNTIME DESTINATION bin)
