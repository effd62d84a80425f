# Corstone-300 (Cortex-M55 + MVE): everything board-specific is in board.toml.
include(${BOARD_DIR}/../common/cortexm/cortexm.cmake)
