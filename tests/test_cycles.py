"""The cycle model (emlkit/cycles.py), the exec-log stream parser (emlkit/exec_stream.py), the per-op attribution
(emlkit/cycle_run.py), the microbenchmark validation (emlkit/cycle_bench.py, docs/cycle-model.md) and
`emlkit run --cycles`.

The logs in tests/data/cycles/ were recorded from real QEMU 7.2 runs of two microbenchmark images
(`-d in_asm,exec,nochain`), with objdump's disassembly of the same images."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from emlkit.cycle_run import RUNTIME, CycleCounter, OpAttribution, adapter_ops
from emlkit.cycles import START, CoreModel, Instr, TimingError, branch_taken, classify, register_count
from emlkit.exec_stream import Block, Disassembly, StreamError, exec_blocks
from toolchain import needs_qemu

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "cycles"


# mnemonic | operands | class: one instruction as objdump prints it, and the timing class it falls in
_CLASSES = """
adds        | r0, #1            | alu
addeq       | r1, r2            | alu
mov.w       | r2, #15728640     | alu
bics        | r0, r1            | alu
mov         | pc, r3            | write_pc
cmp         | r0, #0            | alu
it          | eq                | it
ittet       | ne                | it
muls        | r1, r0, r1        | mul
mla         | r1, r0, r0, r8    | mla
smull       | r1, r2, r3, r0    | mull
umlal       | r0, r1, r2, r3    | mlal
sdiv        | r1, r2, r3        | div
ssat        | r0, #8, r1        | sat
smlad       | r1, r0, r8, r9    | dsp
sxtb16      | r1, r2            | dsp
qadd8       | r0, r1, r2        | dsp
ldr.w       | r0, [r1, #-4]!    | load
ldrbeq      | r0, [r1]          | load
str         | r0, [sp, #4]      | store
ldrd        | r0, r1, [r2]      | load_dual
ldr         | pc, [sp], #4      | load_pc
ldmia.w     | r0!, {r1, r2, r3} | ldm
push        | {r4, r5, r6, lr}  | stm
pop         | {r4, pc}          | pop_pc
pop.w       | {r4, r5}          | ldm
b.n         | 1c                | branch
bne.n       | 1c                | branch_cond
bls         | 8                 | branch_cond
cbz         | r0, 20            | branch_cond
bl          | 1000              | bl
bx          | lr                | bx
blx         | r3                | bx
dsb         | sy                | barrier
msr         | MSPLIM, r4        | system
bkpt        | 0x00ab            | system
vadd.f32    | s1, s0, s9        | fp_alu
vfma.f32    | s1, s0, s9        | fp_mac
vdiv.f32    | s0, s1, s2        | fp_div
vldr        | s0, [r0, #4]      | fp_load
vstr        | d0, [sp]          | fp_store
vpush       | {d8-d9}           | fp_ldm
vmov        | s0, r1            | fp_xfer
vmrs        | APSR_nzcv, fpscr  | fp_xfer
vldrb.u8    | q3, [r7], #16     | mve_load
vstrw.32    | q0, [r1]          | mve_store
vmlava.s8   | r0, q0, q1        | mve_mac
vmladava.s8 | r2, q0, q1        | mve_mac
vmul.i32    | q0, q1, q2        | mve_mac
vadd.i8     | q0, q1, q2        | mve_alu
vshl.s32    | q0, r1            | mve_alu
vadd.f32    | q0, q1, q2        | mve_fp
vdup.8      | q0, r1            | mve_xfer
vmov.32     | q0[2], r1         | mve_xfer
vpst        |                   | mve_pred
vctp.8      | r2                | mve_pred
dls         | lr, lr            | lob_start
dlstp.8     | lr, r9            | lob_start
vldrbt.u8   | q0, [r1]          | mve_load
vstrbt.8    | q0, [r1]          | mve_store
vcmpt.f32   | q0, q1            | mve_fp
vmovlt.f32  | s15, s13          | fp_alu
vmovlt.s8   | q0, q1            | mve_alu
addw        | r0, r1, #4095     | alu
bleq        | 1000              | bl
vpsel       | q0, q1, q2        | mve_pred
le          | lr, 10006764      | lob_end
letp        | lr, 100           | lob_end
frobnicate  | r0                | other
"""
CLASS_CASES = [tuple(f.strip() for f in line.split("|")) for line in _CLASSES.strip().splitlines()]


@pytest.mark.parametrize("mnemonic, operands, cls", CLASS_CASES)
def test_classify(mnemonic: str, operands: str, cls: str) -> None:
    assert classify(mnemonic, operands) == cls


def test_register_count() -> None:
    assert register_count("{r4, r5, r6, r7, r8, sb, sl, fp, lr}") == 9
    assert register_count("r0!, {r1-r8}") == 8
    assert register_count("{d8-d15}") == 8
    assert register_count("r0, [r1]") == 0


def _ins(addr: int, mnem: str, ops: str, size: int = 2) -> Instr:
    return Instr.make(addr, size, mnem, ops)


def test_m4_load_pipelining_and_dependency() -> None:
    m4 = CoreModel.load("cortex-m4")
    indep = tuple(_ins(2 * i, "ldr", f"r{1 + i}, [r0, #{4 * i}]") for i in range(4))
    assert m4.block_cycles(indep, START, False)[0] == 2 + 1 + 1 + 1
    chain = tuple(_ins(2 * i, "ldr", "r0, [r0]") for i in range(4))
    assert m4.block_cycles(chain, START, False)[0] == 8
    # the state carries the pipelining into the next block
    _, state = m4.block_cycles(indep[:1], START, False)
    assert m4.block_cycles(indep[1:2], state, False)[0] == 1


def test_branch_costs_follow_the_stream() -> None:
    bne = _ins(0x1E, "bne.n", "1c")
    assert branch_taken(bne, 0x1C) and not branch_taken(bne, 0x20) and not branch_taken(bne, None)
    assert not branch_taken(_ins(0x10, "adds", "r0, #1"), 0x40)
    m0, m4 = CoreModel.load("cortex-m0plus"), CoreModel.load("cortex-m4")
    assert (m0.block_cycles((bne,), START, True)[0], m0.block_cycles((bne,), START, False)[0]) == (2, 1)
    assert (m4.block_cycles((bne,), START, True)[0], m4.block_cycles((bne,), START, False)[0]) == (1 + m4.refill, 1)


def test_m55_beat_overlap() -> None:
    m55 = CoreModel.load("cortex-m55")
    ld, mac = _ins(0, "vldrb.u8", "q2, [r0]", 4), _ins(4, "vmladava.s8", "r2, q0, q1", 4)
    assert m55.block_cycles((mac, mac, mac), START, False)[0] == 6      # one resource: 2 cycles each
    assert m55.block_cycles((ld, mac, ld, mac), START, False)[0] == 5   # 2, then 1 for each overlapped one
    add = _ins(8, "adds", "r1, #1")
    assert m55.block_cycles((ld, add, mac), START, False)[0] == 2 + 1 + 2  # scalar between: no overlap


def test_m3_and_m4_differ_where_the_trms_do() -> None:
    mla = (_ins(0, "mla", "r1, r0, r0, r8", 4),)
    assert CoreModel.load("cortex-m3").block_cycles(mla, START, False)[0] == 2
    assert CoreModel.load("cortex-m4").block_cycles(mla, START, False)[0] == 1


def test_unknown_core_is_one_clear_error() -> None:
    with pytest.raises(TimingError, match="no timing model for core 'cortex-m99'"):
        CoreModel.load("cortex-m99")
    assert CoreModel.load("cortex-m85").core == "cortex-m55"  # runs as an M55 under QEMU


def test_every_class_the_classifier_returns_has_a_timing() -> None:
    """A class with no entry would silently fall back to 'other' on that core."""
    from emlkit import cycles

    scalar = {"alu", "write_pc", "mul", "load", "store", "load_pc", "ldm", "stm", "pop_pc", "branch",
              "branch_cond", "bl", "bx", "barrier", "system", "other"}
    v7 = scalar | {"it", "mla", "mull", "mlal", "div", "sat", "load_dual"}
    fp = {"dsp", "fp_alu", "fp_mac", "fp_div", "fp_load", "fp_store", "fp_ldm", "fp_xfer"}
    mve = {"lob_start", "lob_end", "mve_load", "mve_store", "mve_alu", "mve_mac", "mve_fp", "mve_pred", "mve_xfer"}
    want = {"cortex-m0plus": scalar, "cortex-m3": v7, "cortex-m4": v7 | fp, "cortex-m7": v7 | fp,
            "cortex-m33": v7 | fp, "cortex-m55": v7 | fp | mve}
    for core in cycles.CORES:
        assert want[core] <= set(CoreModel.load(core).classes), core


def _dis(name: str) -> Disassembly:
    return Disassembly.from_objdump_text((DATA / name).read_text())


def test_parser_rebuilds_the_stream_of_a_recorded_m4_log() -> None:
    """countdown_loop on mps2-an386: CPACR set-up with two I/O rewinds, then MOVS and 16 x SUBS/BNE."""
    blocks = list(exec_blocks((DATA / "m4_countdown.log").read_text().splitlines(), _dis("m4_countdown.dis")))
    # the first block ran only its first LDR before the I/O access at 0xa was rewound and re-run alone
    assert [i.addr for i in blocks[0].instrs] == [0x8]
    assert [i.addr for i in blocks[1].instrs] == [0xA]
    assert [i.addr for i in blocks[2].instrs] == [0xC]  # ORR, then the STR at 0x10 was rewound
    bench = [i for b in blocks for i in b.instrs if 0x1A <= i.addr < 0x20]
    assert [i.mnemonic for i in bench].count("subs") == 16 and [i.mnemonic for i in bench].count("bne.n") == 16
    m4 = CoreModel.load("cortex-m4")
    from emlkit.cycle_bench import model_range

    n, cycles, _ = model_range((DATA / "m4_countdown.log").read_text().splitlines(), _dis("m4_countdown.dis"), m4,
                               0x1A, 0x20)
    assert n == 33 and cycles == 1 + 16 + 15 * (1 + m4.refill) + 1


def test_parser_takes_mve_instructions_from_objdump() -> None:
    """QEMU's capstone decodes VMLADAVA as '.byte' + 'cmp': the block's instructions come from objdump instead."""
    log = (DATA / "m55_mve.log").read_text()
    assert ".byte    0xf0, 0xee" in log
    blocks = list(exec_blocks(log.splitlines(), _dis("m55_mve.dis")))
    bench = [i for b in blocks for i in b.instrs if 0x1000001C <= i.addr < 0x1000003C]
    assert [i.cls for i in bench] == ["mve_load", "mve_mac"] * 4
    assert CoreModel.load("cortex-m55").block_cycles(tuple(bench), START, False)[0] == 2 + 7


def test_parser_drops_a_block_that_did_not_start() -> None:
    lines = (DATA / "m4_countdown.log").read_text().splitlines()
    at = next(k for k, ln in enumerate(lines) if "Trace 0: 0x7f3e04000ac0" in ln)
    stop = "Stopped execution of TB chain before 0x7f3e04000ac0 [0000001c] bench_start"
    dis = _dis("m4_countdown.dis")
    before = len(list(exec_blocks(lines, dis)))
    assert len(list(exec_blocks(lines[:at + 1] + [stop] + lines[at + 1:], dis))) == before - 1


def test_parser_refuses_a_cut_log() -> None:
    lines = (DATA / "m4_countdown.log").read_text().splitlines()
    cut = [ln for ln in lines if ln.startswith("Trace")]
    with pytest.raises(StreamError, match="ran before its in_asm listing"):
        list(exec_blocks(cut, _dis("m4_countdown.dis")))


def test_adapter_table_names_the_registry_functions() -> None:
    ops = adapter_ops(ROOT / "firmware" / "ops")
    assert ops["op_cortex_m_quantized_conv2d_out"] == ("cortex_m::quantized_conv2d", True)
    assert ops["op_cortex_m_quantized_conv2d_out_prepare"] == ("cortex_m::quantized_conv2d", False)


def _blk(pc: int, n: int = 1, last: str = "adds", ops: str = "r0, #1") -> Block:
    instrs = tuple(Instr.make(pc + 2 * k, 2, "adds" if k < n - 1 else last, "r0, #1" if k < n - 1 else ops)
                   for k in range(n))
    return Block(pc, (pc, pc + 2 * n), instrs)


def test_attribution_by_symbol_ranges() -> None:
    """Dispatcher at 0x100-0x200; op A's eval at 0x400 (prepare 0x480), op B's eval at 0x500; kernels at 0x600;
    the caller at 0x50 calls the dispatcher twice (warm-up, measured run)."""
    attr = OpAttribution((0x100, 0x200), {0x400: ("A", True), 0x480: ("A", False), 0x500: ("B", True)})
    counter = CycleCounter(CoreModel.load("cortex-m0plus"), attr)
    call = _blk(0x50, 2, "bl", "100")     # ends with BL: returns to 0x54
    one_run = [_blk(0x100, 3), _blk(0x110, 1, "blx", "r3"), _blk(0x480, 2, "bx", "lr"), _blk(0x112, 1, "blx", "r3"),
               _blk(0x400, 2, "bl", "600"), _blk(0x600, 5), _blk(0x404, 1, "bx", "lr"), _blk(0x114, 1, "blx", "r3"),
               _blk(0x500, 4, "bx", "lr"), _blk(0x116, 2, "bx", "lr")]
    for b in [_blk(0x10, 3), call, *one_run, _blk(0x54, 2), call, *one_run, _blk(0x54, 7)]:
        counter.feed(b)
    counter.close()
    assert len(counter.per_run) == 2
    rep = counter.report(1)
    a, b, rt = rep.op("A"), rep.op("B"), rep.op(RUNTIME)
    assert a is not None and b is not None and rt is not None
    assert (a.calls, a.instructions) == (1, 2 + 2 + 5 + 1)   # prepare, eval and the kernel it calls
    assert (b.calls, b.instructions) == (1, 4)
    assert rt.instructions == 3 + 1 + 1 + 1 + 2               # the dispatcher's own blocks
    assert rep.instructions == a.instructions + b.instructions + rt.instructions  # the caller's blocks are outside
    assert rep.cycles > rep.instructions                       # BL/BX cost more than one cycle on an M0+
    with pytest.raises(Exception, match="shows 2 runs"):
        counter.report(3)


@needs_qemu
def test_microbenchmarks_reproduce_documented_counts_and_the_doc_is_current() -> None:
    from emlkit.cycle_bench import BENCHES, run_bench

    # the validation page is generated from every core's results (scripts/cycle_validation.py)
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "cycle_validation.py"), "--check"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    for b in BENCHES:
        for core, (lo, hi) in b.documented.items():
            if core in ("cortex-m4", "cortex-m55"):  # the page check above ran every core; spot-check two here
                r = run_bench(b, core)
                assert lo <= r.cycles <= hi, (b.name, core, r.cycles)


@pytest.mark.slow
@needs_qemu
def test_run_cycles_prints_modelled_cycles_per_op(emlkit_cli, tmp_path: Path) -> None:
    out = emlkit_cli(["run", "conv_relu", "--target", "cortex-m4", "--cycles", "-o", str(tmp_path)], ROOT)
    assert out.returncode == 0, out.stderr
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("{"))
    d = json.loads(line)
    model = d["cycles_model"]
    assert model["label"] == "cycles (model)" and "not measured" in model["note"]
    per_op = {o["op"]: o for o in d["per_op"]}
    for o in model["per_op"]:
        if o["op"] in per_op:  # the stream's count agrees with the runner's counter within its resolution
            assert abs(o["instructions"] - per_op[o["op"]]["count"]) <= 40 * 2 + 400, o
            assert o["calls"] == per_op[o["op"]]["calls"]
            assert o["cycles_model"] > 0
    assert "cycles (model" in out.stdout
    bad = emlkit_cli(["run", "conv_relu", "--target", "cortex-m4", "--board", "host", "--cycles", "-o", str(tmp_path)], ROOT)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1].startswith("error: --cycles")
    assert "Traceback" not in bad.stderr


def test_run_cycles_leaves_unfinished_runs_alone_and_refuses_other_simulators() -> None:
    from emlkit.deploy.result import RunResult
    from emlkit.errors import EXIT_USAGE, AotError
    from emlkit.run import RunOutcome, add_cycle_model

    skipped = RunOutcome("conv_relu", "cortex-m0plus", "microbit", "qemu", "SKIP", reason="does not fit microbit")
    add_cycle_model(skipped, None, "microbit", 1.0)  # type: ignore[arg-type]  # the fit message is the report
    assert skipped.cycles is None
    host = RunOutcome("conv_relu", "cortex-m4", "host", "host", "PASS", result=RunResult("pass", cases=1))
    with pytest.raises(AotError, match="--cycles models a Cortex-M program's cycles") as err:
        add_cycle_model(host, None, "host", 1.0)  # type: ignore[arg-type]
    assert err.value.exit_code == EXIT_USAGE
