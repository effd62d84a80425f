"""Per-command NPU cycle estimates (emlkit/npu/perf.py) and the co-simulated PMU they drive
(emlkit/deploy/npu_cosim.py): the split of Vela's per-operation estimates over the commands, the PMU registers
as the firmware's driver programs them, and the compile report's estimates against Vela's own totals."""

from __future__ import annotations

import pytest

from emlkit.npu.commands import Command
from emlkit.npu.errors import NpuError
from emlkit.npu.perf import VelaOp, VelaPerf, estimate_stream, parse_debug_db


def _set(off: int, name: str, value: int, payload: bool = False) -> Command:
    return Command(off, 0, name, 0 if payload else value, value if payload else None)


def _op(off: int, name: str) -> Command:
    return Command(off, 0, name, 0, None)


def _stream() -> list[Command]:
    """A DMA, an operation in two stripes (the second not queued), a DMA and a chained pair, then STOP."""
    return [_set(0, "NPU_SET_DMA0_LEN", 100, payload=True), _op(8, "NPU_OP_DMA_START"), _op(12, "NPU_OP_DMA_WAIT"),
            _set(16, "NPU_SET_OFM_HEIGHT_M1", 1), _set(20, "NPU_SET_OFM_WIDTH_M1", 3), _set(24, "NPU_SET_OFM_DEPTH_M1", 7),
            _op(28, "NPU_OP_CONV"), _set(32, "NPU_SET_OFM_HEIGHT_M1", 0), _op(40, "NPU_OP_CONV"),
            _op(44, "NPU_OP_DMA_START"), _op(48, "NPU_OP_CONV"), _op(52, "NPU_OP_ELEMENTWISE"),
            _op(56, "NPU_OP_KERNEL_WAIT"), _op(60, "NPU_OP_STOP")]


def _perf(extra: dict[int, VelaOp] | None = None) -> VelaPerf:
    ops = {1: VelaOp(1, "conv_a", "Conv2D", 1000, 900), 2: VelaOp(2, "conv_b", "Conv2D", 500, 500),
           3: VelaOp(3, "add_b", "Add", 0, 0), **(extra or {})}
    return VelaPerf(ops, {28: 1, 48: 2, 52: 3}, {3: 2})


def test_estimates_split_each_operation_over_its_commands() -> None:
    est = estimate_stream(_stream(), _perf())
    got = [(c.offset, c.kind, c.op, c.cycles) for c in est.commands]
    # op 1: its DMA takes the memory-bound excess (1000 - 900), its stripes the rest by OFM elements (64 : 32,
    # one cycle each first); op 3 is chained to op 2: one budget of 500 over the DMA and both commands.
    assert got == [(8, "DMA", "conv_a", 100), (28, "CONV", "conv_a", 600), (40, "CONV", "conv_a", 300),
                   (44, "DMA", "conv_b", 1), (48, "CONV", "conv_b", 250), (52, "ELEMENTWISE", "add_b", 249)]
    assert est.cycles == est.vela_total == 1500 and est.vela_npu_only == 1400 and est.unplaced == []


def test_an_operation_without_commands_is_reported_not_hidden() -> None:
    est = estimate_stream(_stream(), _perf({4: VelaOp(4, "lost", "Conv2D", 70, 70)}))
    assert est.unplaced == ["lost"] and est.cycles == 1500 and est.vela_total == 1570


def test_a_debug_database_of_another_stream_is_refused() -> None:
    perf = _perf()
    perf.queue = {1000: 1}
    with pytest.raises(NpuError, match="not this stream's"):
        estimate_stream(_stream(), perf)


def test_parse_vela_debug_database() -> None:
    xml = """<?xml version='1.0' encoding='UTF-8'?>
<debug source="out">
<table name="perf">
<![CDATA[
"id","source_id","optimised_id","operator","name","staging_usage","op_cycles","npu_cycles","mac_count"
361,26,168,"Conv2D","tosa_rescale_default",12992,26301,26000,320000
368,34,167,"Add","tosa_add",0,0,0,0
]]>
</table>
<table name="queue">
<![CDATA[
"offset","cmdstream_id","optimised_id","scheduled_id"
328,1,168,361
412,1,167,368
]]>
</table>
<table name="group">
<![CDATA[
"id","group_id"
368,361
]]>
</table>
</debug>
"""
    p = parse_debug_db(xml)
    assert p.ops[361] == VelaOp(361, "tosa_rescale_default", "Conv2D", 26301, 26000)
    assert p.queue == {328: 361, 412: 368} and p.groups == {368: 361}
    with pytest.raises(NpuError, match="no 'queue' table"):
        parse_debug_db(xml.split('<table name="queue">')[0] + "</debug>")


@pytest.mark.parametrize("npu,base", [("ethos-u55-128", 0), ("ethos-u85-256", 0x1000)])
def test_pmu_counts_what_the_driver_enables(npu: str, base: int) -> None:
    from emlkit.deploy.npu_cosim import (PMCCNTR, PMCCNTR_HI, PMCNTENSET, PMCR, PMEVCNTR, PMEVTYPER, NpuModel,
                                         NpuSpec)

    m = NpuModel(NpuSpec.parse(npu))

    def wr(off: int, value: int) -> None:  # the harness's write path: PMU first, then the plain registers
        if not m.pmu_write(off - m.pmu_base, value):
            m.regs[off] = value

    m.count(500)  # not enabled yet: nothing counts
    assert m.read(base + PMCCNTR) == 0
    for i, ev in enumerate((35, 48, 130, 135)):  # the driver's pmu_start: NPU active, MAC active, AXI beats
        wr(base + PMEVTYPER + 4 * i, ev)
    wr(base + PMCNTENSET, (1 << 31) | 0xF)
    wr(base + PMCR, 7)
    m.count(3_000_000_000)
    m.count(1_500_000_000)
    assert m.read(base + PMCCNTR) | (m.read(base + PMCCNTR_HI) << 32) == 4_500_000_000
    assert m.read(base + PMEVCNTR) == 4_500_000_000 & 0xFFFFFFFF  # NPU active: every estimated cycle
    assert m.read(base + PMEVCNTR + 4) == 0  # MAC active: not modelled
    wr(base + PMCR, 0)  # pmu_stop
    m.count(7)
    assert m.read(base + PMCCNTR) == 4_500_000_000 & 0xFFFFFFFF
    wr(base + PMCR, 7)  # the next inference resets the counters
    assert m.read(base + PMCCNTR) == 0 and m.read(base + PMCCNTR_HI) == 0


NPU_TARGETS = ["ethos-u55-128", "ethos-u55-128-a16w8", "ethos-u55-32", "ethos-u55-64", "ethos-u55-256", "ethos-u65-256",
               "ethos-u65-512", "ethos-u85-256", "ethos-u85-256-a16w8", "ethos-u85-128", "ethos-u85-512",
               "ethos-u85-1024", "ethos-u85-2048"]


def test_every_npu_target_is_covered() -> None:
    from emlkit.targets import TARGETS

    assert sorted(NPU_TARGETS) == sorted(t for t, v in TARGETS.items() if v.npu)


# every configuration in the slow pass; one U55 and one U85 in the quick one
@pytest.mark.parametrize("target", [t if t in ("ethos-u55-128", "ethos-u85-256") else pytest.param(t, marks=pytest.mark.slow)
                                    for t in NPU_TARGETS])
def test_compile_report_estimates_match_vela(compiled, target: str) -> None:
    """Every command the functional model runs has an estimate, and they sum to Vela's total estimate."""
    from emlkit.npu.blob import parse_blob
    from emlkit.npu.commands import decode
    from emlkit.npu.perf import executed, stream_key
    from npu_helpers import program_parts

    res = compiled("conv_relu", target)
    (d,) = res.report["npu_estimates"]["delegates"]
    (check,) = res.report["npu_check"]["delegates"]
    assert len(d["commands"]) == check["commands"] > 0
    assert all(c[3] >= 1 for c in d["commands"]) and d["unplaced"] == []
    assert d["cycles"] == sum(c[3] for c in d["commands"]) == d["vela_total_cycles"]
    assert d["cycles"] == res.report["vela"]["total_cycles_estimate"]
    (blob,) = program_parts(res)[0]
    vb = parse_blob(blob)
    arch = "u85" if target.startswith("ethos-u85") else "u55"
    assert [c[0] for c in d["commands"]] == [c.offset for c in executed(decode(vb.commands, 0, arch))]
    assert d["stream_sha256"] == stream_key(vb.commands.astype("<u4").tobytes())


def test_suite_row_keeps_the_estimate_apart_from_real_pmu_counts(compiled) -> None:
    """Under QEMU the co-simulated PMU's count is an estimate: its own field, never the FVP/board PMU column."""
    from conftest import CACHE

    from emlkit.suite import Case, _cells, run_case

    res = compiled("conv_relu", "ethos-u55-128")
    row = run_case(Case("conv_relu", "ethos-u55-128", "corstone-300", "qemu"), str(CACHE), 120)
    assert row.status == "PASS", row.reason
    assert row.npu_pmu_cycles is None and row.npu_pmu_label == "" and _cells(row)[11] == "-"
    assert row.npu_pmu_cycles_estimate == 2 * res.report["vela"]["total_cycles_estimate"]  # warm-up + measured
