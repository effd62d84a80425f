"""The firmware's host library (boards/host/query.c through emlkit.hostfw): the compiler and the fit check ask
it the firmware's own rules (placement, runtime memory, kernel scratch) instead of restating them, so these
tests hold its answers against the runner itself and against the rules' documented behaviour."""

from __future__ import annotations

import json
import subprocess

from emlkit import hostfw


def test_placement_is_largest_arena_first_16_byte_aligned_and_continues_past_a_failure() -> None:
    regions = [(0x1004, 1000), (0x20000, 5000)]
    placed = hostfw.place(regions, arenas=[500, 4000, 0], runtime=300, scratch=4096, delegate=0, after=[64])
    assert [(p.kind, p.arena, p.size, p.region) for p in placed] == [
        ("arena", 1, 4000, 1),          # the largest arena first, into the first region with room
        ("arena", 0, 500, 0),
        ("arena", 2, 1, 0),             # a 0-byte arena is placed as 1 byte so that it has an address
        ("runtime", 0, 300, 0),
        ("kernel scratch", 0, 4096, None),  # no room left anywhere ...
        ("after", 0, 64, 0),            # ... and the next piece is still placed
    ]
    assert placed[4].roomiest == 1      # 5000 - 4000 bytes left beat 1000 - 12 - 500 - 16 - 1 - 15 - 300
    # The 12 bytes of padding to the first 16-byte boundary count: 988 usable bytes do not hold 989.
    assert hostfw.place([(0x1004, 1000)], [989], 0, 0, 0, [])[0].region is None
    assert hostfw.place([(0x1004, 1000)], [988], 0, 0, 0, [])[0].region == 0


def test_runtime_bytes_is_the_firmware_formula_with_the_given_struct_sizes() -> None:
    counts = {"values": 10, "tensors": 3, "operators": 2, "instructions": 5, "arguments": 17, "kernel_state": 48}
    layout = {"et_value": 24, "et_tensor": 52, "et_op_slot": 32, "et_instr": 48, "pointer": 4}
    up8 = lambda x: (x + 7) // 8 * 8  # noqa: E731
    assert hostfw.runtime_bytes(counts, layout) == up8(240) + up8(156) + up8(64) + up8(240) + up8(68) + 48


def test_program_needs_match_what_the_host_runner_reports(compiled) -> None:
    """The host library's counts, with the host's own struct sizes, give the runtime bytes the host runner
    computes when it loads the same program."""
    cres = compiled("conv_relu", "cortex-m55")
    needs = hostfw.program_needs(cres.pte.read_bytes())
    p = subprocess.run([str(hostfw.build_host_runner()), str(cres.bpte), "--load-only"], capture_output=True,
                       text=True, timeout=120)
    loaded = json.loads([ln for ln in p.stdout.splitlines() if ln.startswith("{")][-1])
    assert loaded["status"] == "loaded", loaded
    assert needs["runtime_bytes"] == loaded["runtime_bytes"]
    assert needs["arenas"] == loaded["arena_bytes"][1:]
    assert needs["instructions"] > 0 and needs["arguments"] > needs["instructions"]


def test_a_damaged_program_is_refused_with_the_loaders_message() -> None:
    try:
        hostfw.program_needs(b"\0" * 64)
    except hostfw.ProgramRefused as exc:
        assert str(exc)
    else:
        raise AssertionError("the loader took 64 zero bytes for a program")


# The kernel the MVE path runs for each one-group conv shape (in_c, out_c, k_h, k_w, stride, pad), input offset 0:
# neighbouring shapes on either side of a rule (64 -> 32 channels pairs pixels, 64 -> 36 does not).
CONV_PATHS = {
    "conv_k16 (weights in registers)": [(16, 32, 1, 1, (1, 1), (0, 0))],
    "conv_xq (pixel row in registers)": [(32, 32, 1, 1, (1, 1), (0, 0)), (24, 32, 1, 1, (1, 1), (0, 0)),
                                         (64, 36, 1, 1, (1, 1), (0, 0)), (3, 16, 3, 3, (2, 2), (1, 1)),
                                         (1, 64, 8, 4, (2, 2), (5, 1))],
    "conv_rows (direct)": [(32, 30, 1, 1, (1, 1), (0, 0)), (72, 32, 1, 1, (1, 1), (0, 0))],
    "conv_rows (im2col)": [(16, 32, 3, 3, (1, 1), (1, 1)), (3, 18, 3, 3, (2, 2), (1, 1))],
    "conv_xp (two pixels per weight load)": [(64, 32, 1, 1, (1, 1), (0, 0)), (1, 64, 10, 4, (2, 2), (5, 1))],
}
# The kernel for each 3x3 depthwise conv (in_c, out_c), stride 1, pad 1, input offset 0, without the program's
# blocks.
DW_PATHS = {"dw_16ch": (8, 8), "dw_mult4 (depth multiplier)": (8, 32), "dw_as_conv (one input channel)": (1, 16)}


def test_kernel_paths_are_the_firmwares_choice() -> None:
    for path, shapes in CONV_PATHS.items():
        for shape in shapes:
            assert hostfw.conv2d_s8(*shape, 1, 0)[1] == path, shape
    assert hostfw.conv2d_s8(16, 32, 3, 3, (1, 1), (1, 1), 2, 0) == (0, "conv_mve_general")
    for path, (in_c, out_c) in DW_PATHS.items():
        assert hostfw.depthwise_conv2d_s8(in_c, out_c, 3, 3, (1, 1), (1, 1), 0, False)[1] == path, (in_c, out_c)
    assert hostfw.depthwise_conv2d_s8(8, 8, 3, 3, (1, 1), (1, 1), 0, True)[0] == 0  # the program's blocks
    assert hostfw.depthwise_conv2d_s8(4, 12, 3, 3, (1, 1), (1, 1), 0, False)[1].startswith("dw_reference")
