# `cmake --install build --prefix P`: binaries in P/bin, configs, Slurm templates and GPT-2
# tokenizer files in P/share/gpt-pretrain, the modulefile in P/share/modulefiles. Nothing
# refers to the build tree, so the installed tree can be moved.
set(GPT_SHARE share/gpt-pretrain)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/configs/ DESTINATION ${GPT_SHARE}/configs)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/slurm/ DESTINATION ${GPT_SHARE}/slurm USE_SOURCE_PERMISSIONS)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/data/gpt2/ DESTINATION ${GPT_SHARE}/data/gpt2)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/modules/gpt-pretrain/ DESTINATION share/modulefiles/gpt-pretrain)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${GPT_SHARE})
