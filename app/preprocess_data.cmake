# preprocess_data: loose-JSON corpus -> Megatron .bin/.idx (lib/text/preprocess.hpp).
add_executable(preprocess_data ${CMAKE_CURRENT_LIST_DIR}/preprocess_data.cpp)
target_link_libraries(preprocess_data PRIVATE gpt_text Boost::program_options)
