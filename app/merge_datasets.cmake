# merge_datasets: concatenate .bin/.idx datasets (lib/text/merge.hpp).
add_executable(merge_datasets ${CMAKE_CURRENT_LIST_DIR}/merge_datasets.cpp)
target_link_libraries(merge_datasets PRIVATE gpt_text Boost::program_options)
