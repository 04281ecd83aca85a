# prepare_cache: build a run's dataset index caches ahead of the job (lib/train/run/prepare_cache.hpp).
add_executable(prepare_cache ${CMAKE_CURRENT_LIST_DIR}/prepare_cache.cpp)
target_link_libraries(prepare_cache PRIVATE gpt_config gpt_log gpt_train)
install(TARGETS prepare_cache RUNTIME DESTINATION bin)
