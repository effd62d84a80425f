"""The per-core timing model behind "cycles (model)": instruction classes and their modelled cycles.

QEMU counts instructions. This module turns an executed instruction stream (emlkit/exec_stream.py rebuilds
it from QEMU's exec log) into a *modelled* cycle count per core, from the instruction timing tables of Arm's
Technical Reference Manuals as written down in emlkit/cycle_timings.toml (each class says whether its figure
is read from a document or assumed). It is a model, never a measurement: zero-wait-state memory, no caches,
no bus contention, a fixed pipeline refill per core, and the simplifications each core's `notes` state.

    classify("vmladava.s8", "r0, q0, q1")  -> "mve_mac"
    CoreModel.load("cortex-m4").block_cycles(instrs, state, taken) -> (cycles, state)
"""

from __future__ import annotations

import logging
import re
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

TIMINGS_FILE = Path(__file__).with_name("cycle_timings.toml")
CORES = ("cortex-m0plus", "cortex-m3", "cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55")
CORE_ALIASES = {"cortex-m85": "cortex-m55"}  # QEMU runs Cortex-M85 programs on a Cortex-M55 (README)

_CONDS = ("eq", "ne", "cs", "hs", "cc", "lo", "mi", "pl", "vs", "vc", "hi", "ls", "ge", "lt", "gt", "le", "al")
_REG_RE = re.compile(r"\b(r1[0-5]|r[0-9]|sb|sl|fp|ip|sp|lr|pc)\b")
_Q_RE = re.compile(r"\bq[0-7]\b")
_REG_ALIAS = {"sb": "r9", "sl": "r10", "fp": "r11", "ip": "r12", "sp": "r13", "lr": "r14", "pc": "r15"}

# Scalar mnemonics (without condition, size or width suffixes) by class.
_ALU = set("""adc add addw subw adr and asr bfc bfi bic clz cmn cmp eor lsl lsr mov movt movw mvn neg orn orr rbit rev rev16
revsh ror rrx rsb sbc sbfx sub teq tst ubfx sxtb sxth uxtb uxth nop csel csinc csinv csneg cset csetm cinc cinv
cneg asrl lsll lsrl sqrshr sqshl srshr uqrshl uqshl urshr sqrshrl uqrshll uqshll srshrl urshrl sqshll""".split())
_SAT = {"ssat", "usat", "qadd", "qsub", "qdadd", "qdsub"}
_DSP = set("""sadd16 sadd8 ssub16 ssub8 sasx ssax qadd16 qadd8 qsub16 qsub8 qasx qsax shadd16 shadd8 shsub16 shsub8
shasx shsax uadd16 uadd8 usub16 usub8 uasx usax uqadd16 uqadd8 uqsub16 uqsub8 uqasx uqsax uhadd16 uhadd8 uhsub16
uhsub8 uhasx uhsax sel usad8 usada8 ssat16 usat16 pkhbt pkhtb sxtab sxtah sxtab16 sxtb16 uxtab uxtah uxtab16 uxtb16
smlabb smlabt smlatb smlatt smlawb smlawt smulbb smulbt smultb smultt smulwb smulwt smlad smladx smlsd smlsdx
smlald smlaldx smlsld smlsldx smlalbb smlalbt smlaltb smlaltt smuad smuadx smusd smusdx smmul smmulr smmla smmlar
smmls smmlsr""".split())
_MUL = {"mul"}
_MLA = {"mla", "mls"}
_MULL = {"smull", "umull"}
_MLAL = {"smlal", "umlal", "umaal"}
_DIV = {"sdiv", "udiv"}
_LOAD = {"ldr", "ldrb", "ldrh", "ldrsb", "ldrsh", "ldrt", "ldrbt", "ldrht", "ldrsbt", "ldrsht", "ldrex", "ldrexb",
         "ldrexh", "lda", "ldab", "ldah", "ldaex", "ldaexb", "ldaexh", "pld", "pli"}
_STORE = {"str", "strb", "strh", "strt", "strbt", "strht", "strex", "strexb", "strexh", "stl", "stlb", "stlh",
          "stlex", "stlexb", "stlexh"}
_LOAD_DUAL = {"ldrd", "strd"}
_LDM = {"ldm", "ldmia", "ldmfd", "ldmdb", "ldmea", "pop"}
_STM = {"stm", "stmia", "stmea", "stmdb", "stmfd", "push"}
_BARRIER = {"dmb", "dsb", "isb"}
_SYSTEM = {"mrs", "msr", "cpsid", "cpsie", "wfi", "wfe", "sev", "yield", "bkpt", "svc", "udf", "tt", "ttt", "tta",
           "ttat", "sg", "clrex", "dbg", "clrm", "vscclrm", "esb", "pssbb", "ssbb", "csdb"}
_BRANCH_TAIL = {"b", "bf", "bfl", "bfx", "bflx", "bfcsel"}
# Floating point (FPv4/FPv5 scalar): by mnemonic stem.
_FP_MAC = {"vmla", "vmls", "vnmla", "vnmls", "vfma", "vfms", "vfnma", "vfnms"}
_FP_DIV = {"vdiv", "vsqrt"}
_FP_LDM = {"vldm", "vldmia", "vldmdb", "vstm", "vstmia", "vstmdb", "vpush", "vpop"}
_FP_XFER = {"vmrs", "vmsr"}
# MVE (Helium) mnemonic stems by the execution resource they use.
_MVE_LOAD = {"vldrb", "vldrh", "vldrw", "vldrd", "vld20", "vld21", "vld40", "vld41", "vld42", "vld43"}
_MVE_STORE = {"vstrb", "vstrh", "vstrw", "vstrd", "vst20", "vst21", "vst40", "vst41", "vst42", "vst43"}
_MVE_MAC = set("""vmla vmlas vmladav vmladava vmladavx vmladavax vmlav vmlava vmlaldav vmlaldava vmlaldavx vmlaldavax
vmlalv vmlalva vmlsdav vmlsdava vmlsdavx vmlsdavax vmlsldav vmlsldava vrmlaldavh vrmlaldavha vrmlalvh vrmlalvha
vrmlsldavh vrmlsldavha vmul vmulh vrmulh vmullb vmullt vqdmulh vqrdmulh vqdmladh vqdmladhx vqrdmladh vqrdmladhx
vqdmlsdh vqdmlsdhx vqrdmlsdh vqrdmlsdhx vqdmlah vqrdmlah vqdmlash vqrdmlash vqdmullb vqdmullt""".split())
_MVE_PRED = {"vpst", "vpt", "vpte", "vptt", "vptet", "vptee", "vpttt", "vptte", "vpttee", "vptett", "vpteee", "vptete",
             "vpstt", "vpste", "vpstee", "vpstet", "vpsttt", "vpstte", "vpsttee", "vctp", "vpnot", "vpsel"}
_MVE_XFER = {"vdup", "vaddv", "vaddva", "vaddlv", "vaddlva", "vminv", "vmaxv", "vminav", "vmaxav", "vmaxnmv",
             "vminnmv", "vmaxnmav", "vminnmav", "vabav"}
_MVE_ONLY = _MVE_LOAD | _MVE_STORE | _MVE_PRED | _MVE_XFER | {
    "vmladav", "vmladava", "vmlav", "vmlava", "vmlaldav", "vmlaldava", "vshlc", "vidup", "viwdup", "vddup", "vdwdup",
    "vctp", "vqmovn", "vqmovun", "vmovnb", "vmovnt", "vqmovnb", "vqmovnt", "vqmovunb", "vqmovunt", "vmovlb", "vmovlt",
    "vshllb", "vshllt", "vshrnb", "vshrnt", "vrshrnb", "vrshrnt", "vqshrnb", "vqshrnt", "vqrshrnb", "vqrshrnt",
    "vqshrunb", "vqshrunt", "vqrshrunb", "vqrshrunt", "vbrsr", "vadc", "vadci", "vsbc", "vsbci", "vhcadd", "vcadd"}
_LOB_START = {"dls", "dlstp", "wls", "wlstp"}
_LOB_END = {"le", "letp", "lctp"}


def _stem(mnemonic: str) -> tuple[str, str]:
    """(mnemonic without .w/.n and data-type suffixes, the suffix part) e.g. vldrb.u8 -> (vldrb, u8)."""
    m = mnemonic.lower()
    base, _, suffix = m.partition(".")
    return base, suffix


def _strip_cond(base: str, known: set[str]) -> str | None:
    """The base without its flag-setting S and condition-code suffix (addseq -> add), or None when neither
    the base nor a stripped form is `known`."""
    forms = [base]
    if len(base) > 2 and base[-2:] in _CONDS:
        forms.append(base[:-2])
    for f in list(forms):
        if f.endswith("s"):
            forms.append(f[:-1])
    return next((f for f in forms if f in known), None)


_SCALAR_TABLE: list[tuple[set[str], str]] = [
    (_ALU, "alu"), (_SAT, "sat"), (_DSP, "dsp"), (_MUL, "mul"), (_MLA, "mla"), (_MULL, "mull"), (_MLAL, "mlal"),
    (_DIV, "div"), (_LOAD_DUAL, "load_dual"), (_LOAD, "load"), (_STORE, "store"), (_LDM, "ldm"), (_STM, "stm"),
    (_BARRIER, "barrier"), (_SYSTEM, "system"),
]
_ALL_SCALAR = set().union(*(s for s, _ in _SCALAR_TABLE))


def _writes_pc(operands: str) -> bool:
    first = operands.split(",", 1)[0].strip()
    return first == "pc"


def classify(mnemonic: str, operands: str = "") -> str:
    """The timing class of one instruction as GNU objdump prints it (mnemonic, operand text)."""
    base, suffix = _stem(mnemonic)
    ops = operands.lower()
    if base in _LOB_START:
        return "lob_start"
    if base in _LOB_END:
        return "lob_end"
    if base.startswith("it") and set(base[1:]) <= {"t", "e"}:
        return "it"
    if base in ("cbz", "cbnz"):
        return "branch_cond"
    if base == "bl" or (base.startswith("bl") and base[2:] in _CONDS):  # BLEQ: BL inside an IT block
        return "bl"
    if base == "blx" or (base.startswith("blx") and base[3:] in _CONDS):
        return "bx"
    if base == "bx" or (base.startswith("bx") and base[2:] in _CONDS) or base in ("bxns", "blxns", "tbb", "tbh"):
        return "bx"
    if base == "b" or base in _BRANCH_TAIL:
        return "branch"
    if base.startswith("b") and base[1:] in _CONDS:
        return "branch_cond"
    if base.startswith("v"):
        return _classify_vector(base, suffix, ops)
    b = _strip_cond(base, _ALL_SCALAR)
    if b is None:
        return "other"
    if b == "pop" and "pc" in ops:
        return "pop_pc"
    if b in _LDM and b != "pop" and re.search(r"\bpc\b", ops.split("{", 1)[-1]):
        return "pop_pc"
    if b in _LOAD and _writes_pc(ops):
        return "load_pc"
    for names, cls in _SCALAR_TABLE:
        if b in names:
            if cls == "alu" and _writes_pc(ops) and b not in ("cmp", "cmn", "tst", "teq"):
                return "write_pc"
            return cls
    return "other"


_FP_REG_RE = re.compile(r"\b[sd]\d+\b")
_MVE_SETS = _MVE_PRED | _MVE_LOAD | _MVE_STORE | _MVE_MAC | _MVE_XFER | _MVE_ONLY


def _mve_base(base: str) -> str:
    """An MVE mnemonic without its VPT-block predication letter (vldrbt -> vldrb, vcmpt -> vcmp)."""
    if base not in _MVE_SETS and base[-1:] in ("t", "e") and len(base) > 3:
        return base[:-1]
    return base


def _classify_vector(base: str, suffix: str, ops: str) -> str:
    has_q = bool(_Q_RE.search(ops))
    # MVE needs a Q register or an MVE-only mnemonic; an s/d register means scalar FP (VMOVLT.F32 s0, s1 is a
    # conditional VMOV, not the MVE VMOVLT)
    mve = has_q or (_mve_base(base) in _MVE_ONLY and not _FP_REG_RE.search(ops))
    if mve:
        b = _mve_base(base)
        if b in _MVE_PRED or b.startswith("vpt") or b.startswith("vpst"):
            return "mve_pred"
        if b in _MVE_LOAD:
            return "mve_load"
        if b in _MVE_STORE:
            return "mve_store"
        if b in _MVE_MAC:
            return "mve_mac"
        if b in _MVE_XFER or (b == "vmov" and ("[" in ops or _REG_RE.search(ops))):
            return "mve_xfer"
        if suffix in ("f16", "f32"):
            return "mve_fp"
        return "mve_alu"
    if base in _FP_MAC:
        return "fp_mac"
    if base in _FP_DIV:
        return "fp_div"
    if base in _FP_LDM:
        return "fp_ldm"
    if base in _FP_XFER or (base == "vmov" and _REG_RE.search(ops)):
        return "fp_xfer"
    if base == "vldr":
        return "fp_load"
    if base == "vstr":
        return "fp_store"
    return "fp_alu"


def register_count(operands: str) -> int:
    """Registers in a register list ({r4-r7, lr} -> 5; VPUSH {d8-d9} -> 2); 0 without a list."""
    if "{" not in operands:
        return 0
    body = operands[operands.index("{") + 1: operands.index("}") if "}" in operands else len(operands)]
    n = 0
    for part in body.split(","):
        part = part.strip()
        if "-" in part:
            a, b = (p.strip() for p in part.split("-", 1))
            try:
                n += int(re.sub(r"\D", "", b)) - int(re.sub(r"\D", "", a)) + 1
            except ValueError:
                n += 1
        elif part:
            n += 1
    return n


def _reg(name: str) -> str:
    return _REG_ALIAS.get(name, name)


def dest_register(operands: str) -> str | None:
    m = _REG_RE.match(operands.strip().lower())
    return _reg(m.group(1)) if m else None


def source_registers(cls: str, operands: str) -> frozenset[str]:
    """The core registers an instruction reads (the destination left out where it is only written)."""
    text = operands.lower()
    regs = [_reg(r) for r in _REG_RE.findall(text)]
    if cls in ("store", "load_dual", "stm", "mve_store", "fp_store", "branch_cond") or not regs:
        return frozenset(regs)
    if "[" in text:  # loads: the address registers
        return frozenset(_reg(r) for r in _REG_RE.findall(text[text.index("["):]))
    return frozenset(regs[1:]) if cls not in ("it", "bx") else frozenset(regs)


@dataclass(frozen=True)
class Instr:
    """One instruction of a translation block: address, byte size, mnemonic, operands and what the model needs."""

    addr: int
    size: int
    mnemonic: str
    operands: str
    cls: str
    nregs: int
    dest: str | None
    reads: frozenset[str]

    @staticmethod
    def make(addr: int, size: int, mnemonic: str, operands: str) -> "Instr":
        cls = classify(mnemonic, operands)
        return Instr(addr, size, mnemonic, operands, cls, register_count(operands), dest_register(operands),
                     source_registers(cls, operands))


class TimingError(ValueError):
    """The timing data file is missing a core or a class, or a core name is unknown."""


@dataclass(frozen=True)
class ClassTiming:
    cycles: float
    taken: float | None = None
    per_reg: float = 0.0
    pipelined: float | None = None    # cost when it follows a load/store single (M3/M4 pipelining)
    use_stall: float = 0.0            # extra when the next instruction reads the loaded register (M55)
    overlap: float | None = None      # MVE: cost when overlapping an MVE instruction of another unit
    unit: str = ""
    doc: tuple[float, float] = (0.0, 0.0)
    source: str = "trm"


# Single-cycle classes the Cortex-M7 simplification lets pair (cycle_timings.toml [core.cortex-m7] notes).
_M7_PAIRABLE = {"alu", "sat", "dsp", "mul", "mla", "mull", "mlal", "load", "store", "fp_alu", "it"}
_M7_LS = {"load", "store"}
_M7_MUL = {"mul", "mla", "mull", "mlal", "dsp"}
_M7_FP = {"fp_alu"}
_LS_SINGLE = {"load", "store"}
_BRANCHES = {"branch", "branch_cond", "bl", "bx", "pop_pc", "load_pc", "write_pc", "lob_start", "lob_end"}

# The model's state carried from one block to the next: (previous class, previous destination register,
# M7: whether the previous instruction is still open to pair). Hashable, so block costs can be cached.
State = tuple[str, str | None, bool]
START: State = ("", None, False)


@dataclass
class CoreModel:
    core: str
    document: str
    notes: str
    refill: float
    classes: dict[str, ClassTiming]
    dual_issue: bool = False

    @staticmethod
    def load(core: str, path: Path = TIMINGS_FILE) -> "CoreModel":
        return _load(CORE_ALIASES.get(core, core), path)

    def timing(self, cls: str) -> ClassTiming:
        return self.classes.get(cls) or self.classes["other"]

    def block_cycles(self, instrs: tuple[Instr, ...], state: State, taken: bool) -> tuple[float, State]:
        """Modelled cycles of one executed block whose last instruction, when a branch, was `taken`, and the
        state to carry into the next block."""
        total = 0.0
        prev_cls, prev_dest, open_pair = state
        last = len(instrs) - 1
        for i, ins in enumerate(instrs):
            t = self.timing(ins.cls)
            c = t.taken if (i == last and taken and t.taken is not None) else t.cycles
            c += t.per_reg * ins.nregs
            if t.pipelined is not None and prev_cls in _LS_SINGLE and not (prev_cls == "load" and prev_dest in ins.reads):
                c = t.pipelined
            if t.overlap is not None and prev_cls.startswith("mve_") and self.timing(prev_cls).unit not in ("", t.unit):
                c = t.overlap
            pt = self.classes.get(prev_cls)
            if pt is not None and pt.use_stall and prev_dest is not None and prev_dest in ins.reads:
                c += pt.use_stall
            if self.dual_issue:
                if open_pair and ins.cls in _M7_PAIRABLE and _m7_pairs(prev_cls, prev_dest, ins):
                    c, open_pair = 0.0, False  # issues alongside the previous instruction
                else:
                    open_pair = ins.cls in _M7_PAIRABLE
            total += c
            prev_cls, prev_dest = ins.cls, ins.dest
        return total, (prev_cls, prev_dest, open_pair)


def _m7_pairs(prev_cls: str, prev_dest: str | None, ins: Instr) -> bool:
    if prev_cls in _M7_LS and ins.cls in _M7_LS:
        return False
    if prev_cls in _M7_MUL and ins.cls in _M7_MUL:
        return False
    if prev_cls in _M7_FP and ins.cls in _M7_FP:
        return False
    return prev_dest is None or prev_dest not in ins.reads


@lru_cache(maxsize=None)
def _load(core: str, path: Path) -> CoreModel:
    try:
        data: dict[str, Any] = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise TimingError(f"{path}: cannot read the timing data ({exc}): restore it from the repository") from None
    cores = data.get("core", {})
    if core not in cores:
        raise TimingError(f"no timing model for core '{core}': one of {', '.join(sorted(cores))}")
    c = cores[core]
    classes: dict[str, ClassTiming] = {}
    for name, v in c.items():
        if not isinstance(v, dict):
            continue
        doc = v.get("doc", [v["cycles"], v["cycles"]])
        classes[name] = ClassTiming(float(v["cycles"]), _opt(v.get("taken")), float(v.get("per_reg", 0)),
                                    _opt(v.get("pipelined")), float(v.get("use_stall", 0)), _opt(v.get("overlap")),
                                    str(v.get("unit", "")), (float(doc[0]), float(doc[1])), str(v.get("source", "trm")))
    if "other" not in classes:
        raise TimingError(f"{path}: core '{core}' has no 'other' class (the fallback for unclassified instructions)")
    return CoreModel(core, str(c.get("document", "")), str(c.get("notes", "")), float(c.get("refill", 1)), classes,
                     bool(c.get("dual_issue", False)))


def _opt(v: Any) -> float | None:
    return None if v is None else float(v)


def branch_taken(last: Instr, next_pc: int | None) -> bool:
    """Whether the block's last instruction branched: the next executed block does not start right after it."""
    if last.cls not in _BRANCHES:
        return False
    return next_pc is not None and next_pc != last.addr + last.size
