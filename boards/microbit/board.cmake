# micro:bit (nRF51822, Cortex-M0): everything board-specific is in board.toml.
include(${BOARD_DIR}/../common/cortexm/cortexm.cmake)
# The 208 KiB code partition cannot hold every portable float kernel with
# soft-float libm: the full image registers none; a program's own image
# links the float kernels it uses.
set(FW_FULL_IMAGE_FLOAT_OPS OFF)
