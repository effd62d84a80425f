# Host board: the runner as a normal Linux program (stdio, clock_gettime).
target_sources(runner PRIVATE ${BOARD_DIR}/platform.c)
target_compile_definitions(runner PRIVATE _POSIX_C_SOURCE=200809L)
# The compiler's load check and operator listing (emlkit/hostfw.py) exist in this build only.
target_compile_definitions(runner PRIVATE FW_LOAD_CHECK=1)
target_compile_definitions(fw_npu PRIVATE FW_LOAD_CHECK=1)
