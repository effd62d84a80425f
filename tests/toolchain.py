"""What the board tests need on the machine: the Arm GCC toolchain and QEMU, as skip markers."""

from __future__ import annotations

import shutil

import pytest

HAVE_ARM_GCC = shutil.which("arm-none-eabi-gcc") is not None
HAVE_QEMU = shutil.which("qemu-system-arm") is not None
needs_gcc = pytest.mark.skipif(not HAVE_ARM_GCC, reason="arm-none-eabi-gcc not installed")
needs_qemu = pytest.mark.skipif(not (HAVE_ARM_GCC and HAVE_QEMU), reason="qemu-system-arm or arm-none-eabi-gcc missing")
