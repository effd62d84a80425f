# Shared build logic for the Cortex-M boards, included by boards/<name>/board.cmake
# after the firmware's targets exist (firmware/CMakeLists.txt). Needs BOARD_DIR
# and FW_ROOT; adds the CPU flags to every target, the start-up and platform
# sources and the link script to `runner`.
#
# Options:
#   FW_CONSOLE       semihosting (default) | uart   console channel
#   FW_SEMIHOSTING   ON (default) | OFF             OFF: no BKPT 0xAB at all (hardware without debugger)
#   FW_USE_MVE       ON (default) | OFF             OFF: compile with the board's nomve_cflags + -DFW_NO_MVE
#                                                   (portable C: no MVE and no DSP-extension kernels)
#   FW_CODE_IN_SRAM  OFF (default) | ON             code in [link].code_fallback instead of [link].code
#   EMBED_MODEL      path to a .bpte linked into the image at the model address
#   FW_PYTHON        Python 3.11+ used to read board.toml
set(_cortexm_dir ${CMAKE_CURRENT_LIST_DIR})
set(_fw_repo ${_cortexm_dir}/../../..)

set(FW_CONSOLE "semihosting" CACHE STRING "console: semihosting or uart")
set_property(CACHE FW_CONSOLE PROPERTY STRINGS semihosting uart)
option(FW_SEMIHOSTING "use semihosting (exit status, output files, console)" ON)
option(FW_USE_MVE "build with the M-profile vector extension" ON)
option(FW_CODE_IN_SRAM "place code in the board's code_fallback memory" OFF)
set(EMBED_MODEL "" CACHE FILEPATH ".bpte to link into the image (default: loaded by the simulator)")

if(NOT FW_CONSOLE MATCHES "^(semihosting|uart)$")
  message(FATAL_ERROR "FW_CONSOLE='${FW_CONSOLE}': use semihosting or uart")
endif()
if(FW_CONSOLE STREQUAL "semihosting" AND NOT FW_SEMIHOSTING)
  message(FATAL_ERROR "FW_CONSOLE=semihosting needs FW_SEMIHOSTING=ON: use -DFW_CONSOLE=uart for a board without semihosting")
endif()

if(NOT FW_PYTHON)
  if(EXISTS ${_fw_repo}/.venv/bin/python)
    set(FW_PYTHON ${_fw_repo}/.venv/bin/python)
  else()
    find_package(Python3 3.11 REQUIRED COMPONENTS Interpreter)
    set(FW_PYTHON ${Python3_EXECUTABLE})
  endif()
endif()

# board.toml -> board_memory.ld, board_config.h, board_flags.cmake
set(_gen_dir ${CMAKE_BINARY_DIR}/board)
set(_gen_args)
if(FW_CODE_IN_SRAM)
  list(APPEND _gen_args --code-in-fallback)
endif()
execute_process(
  COMMAND ${FW_PYTHON} ${_fw_repo}/emlkit/deploy/boards.py gen ${BOARD_DIR} --out ${_gen_dir} ${_gen_args}
  RESULT_VARIABLE _gen_rc ERROR_VARIABLE _gen_err OUTPUT_VARIABLE _gen_out)
if(NOT _gen_rc EQUAL 0)
  message(FATAL_ERROR "reading ${BOARD_DIR}/board.toml failed:\n${_gen_err}${_gen_out}")
endif()
set_property(DIRECTORY ${CMAKE_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
  ${BOARD_DIR}/board.toml ${_fw_repo}/emlkit/deploy/boards.py)
include(${_gen_dir}/board_flags.cmake)

if(FW_USE_MVE)
  set(_cpu_flags ${BOARD_CFLAGS})
  set(_cpu_defs)
else()
  set(_cpu_flags ${BOARD_NOMVE_CFLAGS})
  set(_cpu_defs FW_NO_MVE)
endif()
if(FW_CONSOLE STREQUAL "uart")
  if(NOT BOARD_HAS_UART)
    message(FATAL_ERROR "FW_CONSOLE=uart: ${BOARD} has no uart_base in board.toml [board]")
  endif()
  list(APPEND _cpu_defs FW_CONSOLE_UART)
endif()
if(NOT FW_SEMIHOSTING)
  list(APPEND _cpu_defs FW_NO_SEMIHOSTING)
endif()

# Every target (the runtime, kernels and the runner) gets the same CPU flags:
# mixing float ABIs or MVE/no-MVE objects does not link or misbehaves.
get_property(_fw_targets DIRECTORY ${CMAKE_SOURCE_DIR} PROPERTY BUILDSYSTEM_TARGETS)
foreach(_t IN LISTS _fw_targets)
  get_target_property(_type ${_t} TYPE)
  if(_type MATCHES "LIBRARY|EXECUTABLE" AND NOT _type STREQUAL "INTERFACE_LIBRARY")
    target_compile_options(${_t} PRIVATE ${_cpu_flags} -ffunction-sections -fdata-sections)
    target_compile_definitions(${_t} PRIVATE ${_cpu_defs})
  endif()
endforeach()

set(_plat_sources ${_cortexm_dir}/startup.c ${_cortexm_dir}/platform.c ${_cortexm_dir}/semihost.c)
if(EMBED_MODEL)
  get_filename_component(_embed ${EMBED_MODEL} ABSOLUTE)
  if(NOT EXISTS ${_embed})
    message(FATAL_ERROR "EMBED_MODEL=${EMBED_MODEL}: file not found")
  endif()
  file(SIZE ${_embed} _embed_size)
  math(EXPR _embed_total "${_embed_size} + 16")
  if(_embed_total GREATER BOARD_MODEL_MAX)
    message(FATAL_ERROR "EMBED_MODEL: ${_embed} is ${_embed_size} bytes, the ${BOARD} model slot holds "
                        "${BOARD_MODEL_MAX} bytes with the 16-byte header: use a smaller model")
  endif()
  # The same EMDL header + .bpte the simulator would load, as a section the
  # link script places at the model address (flags 0: no output files).
  file(WRITE ${_gen_dir}/embed_model.c.in
    "/* Generated: embeds @_embed@ (EMBED_MODEL). */\n"
    "__asm__(\".section .emdl_model,\\\"a\\\"\\n.balign 16\\n.ascii \\\"EMDL\\\"\\n"
    ".word @_embed_size@\\n.word 0\\n.word 0\\n.incbin \\\"@_embed@\\\"\\n.previous\\n\");\n")
  configure_file(${_gen_dir}/embed_model.c.in ${_gen_dir}/embed_model.c @ONLY)
  set_source_files_properties(${_gen_dir}/embed_model.c PROPERTIES OBJECT_DEPENDS ${_embed})
  list(APPEND _plat_sources ${_gen_dir}/embed_model.c)
endif()

if(FW_SIZE_FLAGS) # firmware/CMakeLists.txt FW_SIZE_OPT: start-up and platform code for size
  set_source_files_properties(${_plat_sources} PROPERTIES COMPILE_OPTIONS "${FW_SIZE_FLAGS}")
endif()
target_sources(runner PRIVATE ${_plat_sources})
target_compile_definitions(runner PRIVATE RUNNER_SCRATCH_BYTES=${BOARD_KERNEL_SCRATCH}u)
target_include_directories(runner PRIVATE ${_cortexm_dir} ${_gen_dir} ${FW_ROOT}/platform)

set(_link_script ${_cortexm_dir}/link.ld)
if(EXISTS ${BOARD_DIR}/link.ld)
  set(_link_script ${BOARD_DIR}/link.ld) # a board may bring its own placement
endif()
target_link_options(runner PRIVATE
  ${_cpu_flags}
  # Full newlib, not nano: nano's printf family has no %lld/%llu (64-bit
  # counters) and needs extra flags for floats; the code fits the ITCM anyway.
  -nostartfiles --specs=nosys.specs
  -Wl,--gc-sections -Wl,--no-warn-rwx-segments
  -L${_gen_dir} -T${_link_script}
  -Wl,-Map=${CMAKE_BINARY_DIR}/runner.map)
set_property(TARGET runner APPEND PROPERTY LINK_DEPENDS ${_link_script} ${_gen_dir}/board_memory.ld)
set_target_properties(runner PROPERTIES SUFFIX ".elf")

find_program(FW_SIZE_TOOL arm-none-eabi-size)
if(FW_SIZE_TOOL)
  add_custom_command(TARGET runner POST_BUILD COMMAND ${FW_SIZE_TOOL} $<TARGET_FILE:runner> VERBATIM)
endif()
