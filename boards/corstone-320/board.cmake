# Corstone-320 (Cortex-M85 + MVE): everything board-specific is in board.toml.
include(${BOARD_DIR}/../common/cortexm/cortexm.cmake)
