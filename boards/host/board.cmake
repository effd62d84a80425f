# Host board: the runner as a normal Linux program (stdio, clock_gettime).
target_sources(runner PRIVATE ${BOARD_DIR}/platform.c)
target_compile_definitions(runner PRIVATE _POSIX_C_SOURCE=200809L)
