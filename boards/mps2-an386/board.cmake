# MPS2 AN386 (Cortex-M4): everything board-specific is in board.toml.
include(${BOARD_DIR}/../common/cortexm/cortexm.cmake)
