"""An Ethos-U NPU co-simulated beside QEMU, so the unmodified firmware image runs Ethos-U programs here.

QEMU's `mps3-an547` maps the Corstone-300 NPU window as an unimplemented device (reads 0, writes
ignored) and has no Ethos-U. This harness plays the NPU through QEMU's gdbstub:

* The firmware touches NPU registers only through two out-of-line accessors (firmware/npu/ethosu_io.c)
  whose load/store is followed by the labels `ethosu_reg_read_done` / `ethosu_reg_write_done`.
  The harness sets a breakpoint on each label. At a read it puts the register's value in r0, at a
  write it takes the address (r0) and value (r1) into its register model (ID, CONFIG, STATUS, CMD,
  RESET, PROT, QBASE/QSIZE, BASEP0-7, REGIONCFG, AXI, PMU). No instruction is skipped: the access
  itself still executes against QEMU's empty window, so the guest's instruction count is exact.
* A write of CMD with "transition to running" starts a job: the harness reads the command stream from
  QBASE/QSIZE and lets the bit-exact functional model (emlkit/npu) execute it on guest memory, reached
  through BASEP0-7 exactly as the NPU's AXI masters would (every access is checked against the memories
  board.toml [npu].dma_regions lists; anything else is a bus abort). Results go back into guest memory,
  STATUS shows the end of the stream, and the completion interrupt is raised.
* Raising the interrupt: debug writes cannot reach QEMU's NVIC, so the harness has the CPU itself pend it:
  it re-points the accessor's own store (`ethosu_reg_write_store`, `str r1, [r0]`) at the NVIC's Software
  Trigger Interrupt Register with the NPU's line number, and resumes. QEMU then takes the interrupt
  through its real exception logic. That is the one instruction the co-simulation adds per inference.
* With `-icount shift=0` QEMU's clock stands still while the guest is halted, so CPU instruction counts
  are those of the firmware alone; the NPU's own time is not simulated. Its PMU counts an estimate instead:
  as the functional model executes each command, the cycle counter (and the NPU_ACTIVE event) advances by
  that command's share of Vela's per-operation estimate (emlkit/npu/perf.py, from the compile report,
  recognised by the stream's SHA-256). A stream without estimates counts nothing (the PMU reads 0); the
  other events (MAC active, AXI beats) are not modelled and read 0.

Faults can be injected for tests: "hang" (the job never completes, no interrupt), "drop-irq" (the job
completes but the interrupt is never raised) and "bus-error" (the NPU reports a bus abort on the IFM).
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from emlkit.deploy.gdbremote import LR, PC, GdbError, GdbRemote
from emlkit.npu.errors import NpuError

log = logging.getLogger(__name__)

NVIC_STIR = 0xE000EF00
WINDOW = 0x2000           # bytes of register space the model answers (the U85's PMU sits at +0x1000)
PAGE = 4096
FAULTS = ("hang", "drop-irq", "bus-error")

# Register offsets (firmware/npu/ethosu_regs.h).
ID, STATUS, CMD, RESET, QBASE, QBASE_HI, QREAD, QCONFIG, QSIZE, PROT, CONFIG = (
    0x00, 0x04, 0x08, 0x0C, 0x10, 0x14, 0x18, 0x1C, 0x20, 0x24, 0x28)
BASEP = 0x80
# PMU registers from the PMU block's base (firmware/npu/ethosu_regs.h); the U85's block sits at +0x1000.
PMCR, PMCNTENSET, PMCNTENCLR, PMCCNTR, PMCCNTR_HI, PMEVCNTR, PMEVTYPER = 0x180, 0x184, 0x188, 0x1A0, 0x1A4, 0x300, 0x380
PMU_EVENTS = 8
PMU_EVENT_NPU_ACTIVE = 35
ST_RUNNING, ST_IRQ, ST_BUS, ST_PARSE, ST_END = 1 << 0, 1 << 1, 1 << 2, 1 << 4, 1 << 5

# (ID register, CONFIG fields) of the NPUs the harness plays; ID values are each product's architecture
# version as the hardware reports it (U55 1.1.0, U65 1.0.6, U85 2.0.0).
_PRODUCTS = {"ethos-u55": (0, 0x10104201, 0), "ethos-u65": (1, 0x10066001, 0), "ethos-u85": (2, 0x20007001, 1)}
_SHRAM_KIB = {("ethos-u55", 32): 16, ("ethos-u55", 64): 16, ("ethos-u55", 128): 24, ("ethos-u55", 256): 48,
              ("ethos-u65", 256): 48, ("ethos-u65", 512): 48}


class CosimError(RuntimeError):
    """The co-simulation cannot go on: a feature the functional model lacks, or the simulator failed."""


class NpuBusError(NpuError):
    """An NPU memory access outside every memory its AXI masters reach."""

    def __init__(self, message: str, channel: int) -> None:
        super().__init__(message)
        self.channel = channel


@dataclass(frozen=True)
class NpuSpec:
    """The NPU the harness plays: product and MAC count, e.g. ethos-u55-128."""

    product: str
    macs: int

    @classmethod
    def parse(cls, name: str) -> "NpuSpec":
        parts = name.rsplit("-", 1)
        if len(parts) != 2 or parts[0] not in _PRODUCTS or not parts[1].isdigit():
            raise ValueError(f"unknown NPU '{name}': use ethos-u55-<macs>, ethos-u65-<macs> or ethos-u85-<macs>")
        macs = int(parts[1])
        if macs & (macs - 1) or not 32 <= macs <= 2048:
            raise ValueError(f"NPU '{name}': the MAC count must be a power of two from 32 to 2048")
        return cls(parts[0], macs)

    @property
    def name(self) -> str:
        return f"{self.product}-{self.macs}"

    @property
    def label(self) -> str:
        return f"Ethos-U{self.product[-2:]}-{self.macs}"

    @property
    def arch(self) -> str:
        return "u85" if self.product == "ethos-u85" else "u55"

    def id_word(self) -> int:
        return _PRODUCTS[self.product][1]

    def config_word(self) -> int:
        product, _, cmd_version = _PRODUCTS[self.product]
        word = (product << 28) | (cmd_version << 4) | (self.macs.bit_length() - 1)
        if self.product == "ethos-u85":
            # log2 of the SRAM AXI ports (regor's Ethos-U85 table: 2 ports up to 1024 MACs, 4 on the 2048)
            return word | ((2 if self.macs == 2048 else 1) << 8)
        return word | (_SHRAM_KIB.get((self.product, self.macs), 48) << 8)


# ---------------------------------------------------------------- guest memory as the NPU sees it


class GuestMemory:
    """Guest memory through the gdbstub, cached by page, with writes kept until flush().

    Only the memories the NPU can reach are accessible; anything else raises NpuBusError."""

    def __init__(self, gdb: GdbRemote, reachable: list[tuple[int, int, str]]) -> None:
        self.gdb = gdb
        self.reachable = reachable        # (base, end, name)
        self.pages: dict[int, np.ndarray] = {}
        self.dirty: set[int] = set()
        self.bytes_read = 0
        self.bytes_written = 0

    def check(self, start: int, end: int, write: bool) -> None:
        for base, stop, _ in self.reachable:
            if base <= start and end <= stop:
                return
        names = ", ".join(n for _, _, n in self.reachable)
        raise NpuBusError(f"NPU {'write' if write else 'read'} of bytes {start:#x}..{end:#x} lies outside the memories it "
                          f"reaches ({names})", 8 if write else 1)

    def _page(self, p: int) -> np.ndarray:
        page = self.pages.get(p)
        if page is None:
            page = np.frombuffer(bytearray(self.gdb.read(p * PAGE, PAGE)), dtype=np.uint8)
            self.bytes_read += PAGE
            self.pages[p] = page
        return page

    def window(self, start: int, end: int, write: bool = False) -> np.ndarray:
        """Bytes [start, end) as a new array (a copy)."""
        self.check(start, end, write)
        first, last = start // PAGE, (end - 1) // PAGE
        buf = np.concatenate([self._page(p) for p in range(first, last + 1)])
        return buf[start - first * PAGE: end - first * PAGE].copy()

    def store(self, start: int, data: np.ndarray) -> None:
        end = start + len(data)
        self.check(start, end, True)
        pos = start
        while pos < end:
            p = pos // PAGE
            page = self._page(p)
            off = pos - p * PAGE
            n = min(PAGE - off, end - pos)
            page[off:off + n] = data[pos - start: pos - start + n]
            self.dirty.add(p)
            pos += n

    def flush(self) -> None:
        for p in sorted(self.dirty):
            self.gdb.write(p * PAGE, self.pages[p].tobytes())
            self.bytes_written += PAGE
        self.dirty.clear()
        self.pages.clear()  # the CPU owns memory again until the next job


class GuestRegion:
    """One NPU region (BASEP[r] onwards) with the indexing the functional model uses on its numpy regions."""

    LIMIT = 1 << 40  # no region bound: the NPU addresses base + offset, checked by GuestMemory

    def __init__(self, mem: GuestMemory, base: int) -> None:
        self.mem = mem
        self.base = base

    def __len__(self) -> int:
        return self.LIMIT

    def _span(self, key: Any) -> tuple[int, int, Any]:
        if isinstance(key, slice):
            if key.step not in (None, 1):
                raise NpuError("strided region access is not supported")
            return int(key.start or 0), int(key.stop), None
        idx = np.asarray(key, dtype=np.int64)
        if idx.size == 0:
            return 0, 0, idx
        return int(idx.min()), int(idx.max()) + 1, idx

    def __getitem__(self, key: Any) -> np.ndarray:
        lo, hi, idx = self._span(key)
        if hi <= lo:
            return np.zeros(0 if idx is None else idx.shape, dtype=np.uint8)
        win = self.mem.window(self.base + lo, self.base + hi)
        return win if idx is None else win[idx - lo]

    def __setitem__(self, key: Any, value: Any) -> None:
        lo, hi, idx = self._span(key)
        if hi <= lo:
            return
        if idx is None:
            self.mem.store(self.base + lo, np.asarray(value, dtype=np.uint8).reshape(-1))
            return
        win = self.mem.window(self.base + lo, self.base + hi, write=True)
        win[idx - lo] = np.asarray(value, dtype=np.uint8)
        self.mem.store(self.base + lo, win)


# ---------------------------------------------------------------- the NPU's register file


@dataclass
class Job:
    commands: int = 0
    operations: int = 0
    seconds: float = 0.0
    result: str = "ok"           # ok, bus-error, parse-error, hang, dropped-irq
    detail: str = ""
    estimated_cycles: int | None = None  # Vela per-op model's cycles for the stream; None without estimates


@dataclass
class NpuModel:
    spec: NpuSpec
    fault: str | None = None
    regs: dict[int, int] = field(default_factory=dict)
    status: int = 0
    jobs: list[Job] = field(default_factory=list)
    unsupported: str | None = None  # a feature the functional model lacks: the run cannot be judged
    estimates: dict[str, dict[int, int]] = field(default_factory=dict)  # stream SHA-256 -> {offset: cycles}
    pmu_cycles: int = 0
    pmu_events: list[int] = field(default_factory=lambda: [0] * PMU_EVENTS)

    @property
    def pmu_base(self) -> int:
        return 0x1000 if self.spec.arch == "u85" else 0

    def _pmu_read(self, rel: int) -> int | None:
        if rel == PMCCNTR:
            return self.pmu_cycles & 0xFFFFFFFF
        if rel == PMCCNTR_HI:
            return (self.pmu_cycles >> 32) & 0xFFFF
        if PMEVCNTR <= rel < PMEVCNTR + 4 * PMU_EVENTS:
            return self.pmu_events[(rel - PMEVCNTR) // 4] & 0xFFFFFFFF
        return None

    def pmu_write(self, rel: int, value: int) -> bool:
        """A write to the PMU block; False when `rel` is not a PMU register the model acts on."""
        if rel == PMCR:
            if value & 2:
                self.pmu_events = [0] * PMU_EVENTS
            if value & 4:
                self.pmu_cycles = 0
        elif rel == PMCNTENSET:
            self.regs[self.pmu_base + PMCNTENSET] = self.regs.get(self.pmu_base + PMCNTENSET, 0) | value
            return True
        elif rel == PMCNTENCLR:
            self.regs[self.pmu_base + PMCNTENSET] = self.regs.get(self.pmu_base + PMCNTENSET, 0) & ~value
            return True
        else:
            return False
        self.regs[self.pmu_base + rel] = value & 1  # the reset bits read back as 0
        return True

    def count(self, cycles: int) -> None:
        """The PMU's counters over `cycles` estimated cycles of NPU activity, as far as they are enabled."""
        if not self.regs.get(self.pmu_base + PMCR, 0) & 1:
            return
        enabled = self.regs.get(self.pmu_base + PMCNTENSET, 0)
        if enabled & (1 << 31):
            self.pmu_cycles = (self.pmu_cycles + cycles) & ((1 << 48) - 1)
        for i in range(PMU_EVENTS):
            if enabled & (1 << i) and self.regs.get(self.pmu_base + PMEVTYPER + 4 * i, 0) == PMU_EVENT_NPU_ACTIVE:
                self.pmu_events[i] += cycles

    def read(self, off: int) -> int:
        if off == ID:
            return self.spec.id_word()
        if off == CONFIG:
            return self.spec.config_word()
        if off == STATUS:
            return self.status
        if off == CMD:
            return self.regs.get(CMD, 0) & 0xC
        pmu = self._pmu_read(off - self.pmu_base)
        if pmu is not None:
            return pmu
        return self.regs.get(off, 0)

    def reset(self, value: int) -> None:
        self.regs = {PROT: value & 3}
        self.status = 0
        self.pmu_cycles, self.pmu_events = 0, [0] * PMU_EVENTS

    def base(self, r: int) -> int:
        return self.regs.get(BASEP + 8 * r, 0) | (self.regs.get(BASEP + 8 * r + 4, 0) << 32)


# ---------------------------------------------------------------- running a job


def _machine(spec: NpuSpec, regions: dict[int, GuestRegion]) -> Any:
    from emlkit.npu.blob import DriverConfig, VelaBlob
    from emlkit.npu.run import machine_for

    product = {"ethos-u55": 0, "ethos-u65": 1, "ethos-u85": 2}[spec.product]
    cfg = spec.config_word()
    blob = VelaBlob(commands=np.zeros(0, dtype=np.uint32), cmd_offset=0, weights=b"", scratch_size=0, inputs=[],
                    outputs=[], config=DriverConfig(product, cfg & 0xF, (cfg >> 8) & 0xFF if product < 2 else 0,
                                                    spec.id_word()))
    m = machine_for(blob)
    m.regions = regions  # the functional model addresses guest memory through the base pointers
    return m


def run_job(npu: NpuModel, mem: GuestMemory) -> Job:
    """Execute the command stream at QBASE on the functional model; sets STATUS as the NPU would."""
    from emlkit.npu.commands import decode
    from emlkit.npu.perf import stream_key

    job = Job()
    t0 = time.monotonic()
    qbase = npu.regs.get(QBASE, 0) | (npu.regs.get(QBASE_HI, 0) << 32)
    qsize = npu.regs.get(QSIZE, 0)
    npu.status = ST_RUNNING
    if npu.fault == "hang":
        job.result = "hang"
        npu.jobs.append(job)
        return job
    try:
        if npu.fault == "bus-error":
            raise NpuBusError("bus abort injected by the test harness", 1)
        try:
            raw = mem.window(qbase, qbase + qsize)
        except NpuBusError as err:
            raise NpuBusError(str(err), 0) from None
        if qsize % 4:
            raise NpuError(f"QSIZE {qsize} is not a whole number of command words")
        cmds = decode(np.frombuffer(raw.tobytes(), dtype="<u4"), 0, npu.spec.arch)
        job.commands = len(cmds)
        regions = {r: GuestRegion(mem, npu.base(r)) for r in range(8)}
        m = _machine(npu.spec, regions)
        est = npu.estimates.get(stream_key(raw.tobytes()))
        if est is None:
            m.run(cmds)
        else:
            job.estimated_cycles = 0

            def on_op(entry: Any) -> None:  # the PMU advances as each command completes
                n = est.get(entry.offset, 0)
                job.estimated_cycles = (job.estimated_cycles or 0) + n
                npu.count(n)

            m.run(cmds, on_op)
        job.operations = len(m.trace)
        mem.flush()
        npu.status = ST_END | ST_IRQ
        npu.regs[QREAD] = qsize
    except NpuBusError as err:
        mem.pages.clear()
        mem.dirty.clear()
        job.result, job.detail = "bus-error", str(err)
        npu.status = ST_BUS | ST_IRQ | ((err.channel & 0xF) << 12)
    except NpuError as err:
        mem.pages.clear()
        mem.dirty.clear()
        if "not modelled" in str(err) or "not supported" in str(err):
            npu.unsupported = str(err)
            raise CosimError(f"NPU functional model: {err}") from None
        job.result, job.detail = "parse-error", str(err)
        npu.status = ST_PARSE | ST_IRQ
    job.seconds = time.monotonic() - t0
    npu.jobs.append(job)
    return job


# ---------------------------------------------------------------- the QEMU session


@dataclass
class CosimResult:
    console: str
    exit_code: int | None
    timed_out: bool
    seconds: float
    jobs: list[Job]
    register_accesses: int
    unsupported: str | None = None


def _symbols(elf: Path) -> dict[str, int]:
    nm = shutil.which("arm-none-eabi-nm")
    if nm is None:
        raise CosimError("arm-none-eabi-nm not found: apt-get install gcc-arm-none-eabi")
    out = subprocess.run([nm, str(elf)], stdout=subprocess.PIPE, text=True, check=True).stdout
    syms = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3:
            syms[parts[2]] = int(parts[0], 16) & ~1
    need = ("ethosu_reg_read_done", "ethosu_reg_write_done", "ethosu_reg_write_store")
    missing = [s for s in need if s not in syms]
    if missing:
        raise CosimError(f"{elf} has no Ethos-U driver ({', '.join(missing)} missing): rebuild the firmware image")
    return syms


class _Session:
    """One co-simulation over QEMU's gdbstub: the guest's NPU register accesses stop at the driver's accessors and
    are answered from the NpuModel; a finished job pends the NPU's interrupt."""

    def __init__(self, gdb: GdbRemote, mem: GuestMemory, npu: NpuModel, syms: dict[str, int], npu_base: int,
                 irq: int, fault: str | None) -> None:
        self.gdb, self.mem, self.npu, self.npu_base, self.irq, self.fault = gdb, mem, npu, npu_base, irq, fault
        self.read_done, self.write_done = syms["ethosu_reg_read_done"], syms["ethosu_reg_write_done"]
        self.store = syms["ethosu_reg_write_store"]
        self.accesses = 0
        self.pending_irq = False
        self.resume_from: int | None = None

    def run(self, deadline: float) -> tuple[bool, bool]:
        """Until the guest exits or the deadline passes: (timed_out, clean_exit)."""
        gdb = self.gdb
        gdb.set_breakpoint(self.read_done)
        gdb.set_breakpoint(self.write_done)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return True, False
            try:
                if self.resume_from is not None:
                    stop = gdb.step_over(self.resume_from)
                    self.resume_from = None
                    if stop.exited:
                        return False, True
                stop = gdb.cont(timeout=left)
            except GdbError as err:
                if "did not answer" in str(err):
                    return True, False
                raise
            if stop.exited:
                return False, True
            self._on_stop(gdb.reg(PC))

    def _on_stop(self, pc: int) -> None:
        self.resume_from = pc if pc in (self.read_done, self.write_done) else None
        if pc == self.read_done:
            self._on_read()
        elif pc == self.write_done:
            self._on_write()
        else:
            raise CosimError(f"the guest stopped at {pc:#x} (lr {self.gdb.reg(LR):#x}), not at an NPU accessor")

    def _on_read(self) -> None:
        addr = self.gdb.reg(1)
        if self.npu_base <= addr < self.npu_base + WINDOW:
            self.accesses += 1
            value = self.npu.read(addr - self.npu_base)
            self.gdb.set_reg(0, value)
            if self.accesses < 200:
                log.debug("NPU read  %#06x -> %#010x", addr - self.npu_base, value)

    def _on_write(self) -> None:
        gdb, npu = self.gdb, self.npu
        addr, value = gdb.reg(0), gdb.reg(1)
        if addr == NVIC_STIR:
            return  # the interrupt this harness raised
        if not self.npu_base <= addr < self.npu_base + WINDOW:
            return
        self.accesses += 1
        off = addr - self.npu_base
        if self.accesses < 200:
            log.debug("NPU write %#06x <- %#010x", off, value)
        if off == RESET:
            npu.reset(value)
        elif npu.pmu_write(off - npu.pmu_base, value):
            pass
        elif off == CMD:
            npu.regs[CMD] = value & 0xC
            if value & 2:
                npu.status &= ~ST_IRQ
            if value & 1:
                job = run_job(npu, self.mem)
                self.pending_irq = job.result not in ("hang",) and self.fault != "drop-irq"
        else:
            npu.regs[off] = value
        if self.pending_irq and self.irq >= 0:
            # Have the CPU pend the NPU's interrupt: re-run the accessor's store against NVIC STIR.
            self.pending_irq = False
            gdb.set_reg(0, NVIC_STIR)
            gdb.set_reg(1, self.irq)
            gdb.set_reg(PC, self.store)
            self.resume_from = None


def run_cosim(cmd: list[str], elf: Path, workdir: Path, spec: NpuSpec, npu_base: int, irq: int,
              reachable: list[tuple[int, int, str]], timeout: float, fault: str | None = None,
              estimates: dict[str, dict[int, int]] | None = None) -> CosimResult:
    """Run QEMU (`cmd`, without -gdb/-S) with the NPU co-simulated; returns the console and what the NPU did.
    `estimates` (emlkit.npu.perf.cycles_by_stream) drive the PMU; without them it reads 0."""
    if fault is not None and fault not in FAULTS:
        raise ValueError(f"unknown NPU fault '{fault}': use one of {', '.join(FAULTS)}")
    syms = _symbols(elf)
    sock = workdir / "gdb.sock"
    if sock.exists():
        sock.unlink()
    console_path = workdir / "console.txt"
    full = [*cmd, "-chardev", f"socket,id=npugdb,path={sock},server=on,wait=off", "-gdb", "chardev:npugdb", "-S"]
    t0 = time.monotonic()
    npu = NpuModel(spec, fault, estimates=dict(estimates or {}))
    session: _Session | None = None
    timed_out = False
    with open(console_path, "wb") as console:
        proc = subprocess.Popen(full, cwd=workdir, stdin=subprocess.DEVNULL, stdout=console, stderr=subprocess.STDOUT,
                                start_new_session=True)
        gdb: GdbRemote | None = None
        clean_exit = False
        try:
            gdb = GdbRemote(str(sock), connect_timeout=min(10.0, timeout))
            session = _Session(gdb, GuestMemory(gdb, reachable), npu, syms, npu_base, irq, fault)
            timed_out, clean_exit = session.run(t0 + timeout)
        except CosimError:
            raise
        except GdbError as err:
            if proc.poll() is None:
                raise CosimError(f"co-simulation lost QEMU's gdbstub: {err}") from None
        finally:
            if gdb is not None:
                gdb.close()
            try:
                proc.wait(timeout=5 if clean_exit else 0.01)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    console_text = console_path.read_text(errors="replace")
    code = None if timed_out else proc.returncode
    accesses = session.accesses if session is not None else 0
    return CosimResult(console_text, code, timed_out, time.monotonic() - t0, npu.jobs, accesses, npu.unsupported)
