# micro:bit (nRF51822, Cortex-M0): everything board-specific is in board.toml.
include(${BOARD_DIR}/../common/cortexm/cortexm.cmake)
