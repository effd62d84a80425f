# Toolchain file for bare-metal Arm Cortex-M with the GNU Arm Embedded toolchain.
# CPU flags are not set here: each board's board.cmake adds them (they come from
# boards/<name>/board.toml), so one toolchain file serves every board.
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)

set(_fw_prefix "arm-none-eabi-")
if(DEFINED ENV{ARM_NONE_EABI_PREFIX})
  # e.g. /opt/arm-gnu-toolchain/bin/arm-none-eabi- for a toolchain off PATH
  set(_fw_prefix "$ENV{ARM_NONE_EABI_PREFIX}")
endif()

find_program(CMAKE_C_COMPILER ${_fw_prefix}gcc)
if(NOT CMAKE_C_COMPILER)
  message(FATAL_ERROR "arm-none-eabi-gcc not found: install gcc-arm-none-eabi (apt) "
                      "or set ARM_NONE_EABI_PREFIX to the toolchain's bin/arm-none-eabi-")
endif()
find_program(CMAKE_ASM_COMPILER ${_fw_prefix}gcc)
find_program(CMAKE_OBJCOPY ${_fw_prefix}objcopy)
find_program(CMAKE_SIZE ${_fw_prefix}size)
find_program(CMAKE_AR ${_fw_prefix}ar)
find_program(CMAKE_RANLIB ${_fw_prefix}ranlib)

# Debian's gcc-arm-none-eabi ships GCC's freestanding <stdint.h>, which hides
# newlib's: then <inttypes.h> lacks PRId64/PRIu64. Put newlib's headers first
# when GCC's stdint.h does not forward to them.
execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=include
                OUTPUT_VARIABLE _fw_gcc_inc OUTPUT_STRIP_TRAILING_WHITESPACE)
if(EXISTS ${_fw_gcc_inc}/stdint.h)
  file(READ ${_fw_gcc_inc}/stdint.h _fw_stdint)
  if(NOT _fw_stdint MATCHES "include_next")
    execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libc.a
                    OUTPUT_VARIABLE _fw_libc OUTPUT_STRIP_TRAILING_WHITESPACE)
    get_filename_component(_fw_newlib_inc ${_fw_libc}/../../include ABSOLUTE)
    if(EXISTS ${_fw_newlib_inc}/stdint.h)
      set(CMAKE_C_FLAGS_INIT "-isystem ${_fw_newlib_inc}")
    endif()
  endif()
endif()

# The compiler test links a program; without a board's start-up code and
# linker script that cannot work on bare metal, so test a static library.
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)

set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

set(CMAKE_EXECUTABLE_SUFFIX ".elf")
