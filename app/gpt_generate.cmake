add_executable(gpt_generate ${CMAKE_CURRENT_SOURCE_DIR}/gpt_generate.cpp)
target_link_libraries(gpt_generate PRIVATE gpt_generation)
install(TARGETS gpt_generate RUNTIME DESTINATION bin)
