# MPS2 AN505 (Cortex-M33): everything board-specific is in board.toml.
include(${BOARD_DIR}/../common/cortexm/cortexm.cmake)
