# Host board: the runner as a normal Linux program (stdio, clock_gettime).
target_sources(runner PRIVATE ${BOARD_DIR}/platform.c)
target_compile_definitions(runner PRIVATE _POSIX_C_SOURCE=200809L)
# The compiler's load check and operator listing (emlkit/hostfw.py) exist in this build only.
target_compile_definitions(runner PRIVATE FW_LOAD_CHECK=1)
target_compile_definitions(fw_npu PRIVATE FW_LOAD_CHECK=1)
# The library the toolkit asks about the firmware's rules (boards/host/query.c, emlkit/hostfw.py): the same
# objects as the runner's, so everything is built position-independent.
add_library(emlkit_host SHARED ${BOARD_DIR}/query.c ${FW_REGISTRY_C})
target_link_libraries(emlkit_host PRIVATE fw_npu fw_runtime)
target_compile_definitions(emlkit_host PRIVATE FW_LOAD_CHECK=1)
