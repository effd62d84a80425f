"""Our kernels against Arm's CMSIS-NN, side by side, on every kernel layer of compiled models, on every core.

    .venv/bin/python scripts/bench_cmsis_nn.py --cmsis-nn /path/to/CMSIS-NN [MODEL ...] [--out DIR]
        [--core cortex-m55|cortex-m4|cortex-m7|cortex-m33|cortex-m3|cortex-m0plus|all]

For each model (default: mobilenet_v2 and mlperf_kws_dscnn) the script compiles it for the core's target, takes
every conv / depthwise / fully connected / add / mul / average and max pool layer from the program (shapes,
strides, pads, offsets, multipliers and shifts, activation ranges, weights, biases, kernel sums), builds one
image with our kernels and CMSIS-NN compiled from the checkout you pass, runs both on the same random inputs
under QEMU (-icount: instructions) in one run, checks the outputs byte for byte, and prints per-class and
whole-model ratios, the worst layer and the bit-identical count (table, JSON, plot).

The cores, each against the CMSIS-NN build that fits it (-Ofast; our kernels with the firmware's flags):
  cortex-m55     corstone-300 (mps3-an547): our MVE kernels vs CMSIS-NN's MVE build (ARM_MATH_MVEI, ARM_MATH_DSP)
  cortex-m4      mps2-an386: our DSP-extension kernels vs CMSIS-NN's DSP-only build (ARM_MATH_DSP)
  cortex-m7      mps2-an500: the same, -mcpu=cortex-m7 -mfpu=fpv5-d16
  cortex-m33     mps2-an505: the same, Armv8-M Mainline with the DSP extension
  cortex-m3      mps2-an385: our portable C vs CMSIS-NN's pure-C build (neither macro)
  cortex-m0plus  an385-m0plus (the Armv6-M image on the AN385, unaligned accesses trap): the same, Armv6-M
  all            every core above, one table per core and a summary table at the end

--cmsis-nn is required: fetch CMSIS-NN yourself, outside this repository, and pass its path. Nothing
is printed that this run did not measure.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import shutil
import struct
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger("bench_cmsis_nn")
ROOT = Path(__file__).resolve().parent.parent
BENCH_SRC = ROOT / "scripts" / "cmsis_bench"
LAYER_WORDS = 48
KINDS = {"quantized_conv2d": 1, "quantized_depthwise_conv2d": 2, "quantized_linear": 3, "quantized_add": 4,
         "quantized_avg_pool2d": 5, "quantized_max_pool2d": 6, "quantized_mul": 7}
CLASS = {1: "conv", 2: "depthwise", 3: "fully connected", 4: "add", 5: "average pool", 6: "max pool", 7: "mul"}
F = {n: i for i, n in enumerate(
    "KIND N IH IW IC OH OW OC KH KW SH SW PH PW DH DW MULT IOFF OOFF AMIN AMAX W B M S KS FOFF QM QS AZP AM AS BZP BM BS "
    "ELEMS INLEN OUTLEN DB".split())}
# --core: (compile target, board, QEMU machine, CMSIS-NN build: mve = ARM_MATH_MVEI + ARM_MATH_DSP, dsp = ARM_MATH_DSP,
# c = neither, its pure-C paths)
CORES = {"cortex-m55": ("cortex-m55", "corstone-300", "mps3-an547", "mve"),
         "cortex-m4": ("cortex-m4", "mps2-an386", "mps2-an386", "dsp"),
         "cortex-m7": ("cortex-m7", "mps2-an500", "mps2-an500", "dsp"),
         "cortex-m33": ("cortex-m33", "mps2-an505", "mps2-an505", "dsp"),
         "cortex-m3": ("cortex-m3", "mps2-an385", "mps2-an385", "c"),
         "cortex-m0plus": ("cortex-m0plus", "an385-m0plus", "mps2-an385", "c")}
CMSIS_BUILD = {"mve": "CMSIS-NN MVE", "dsp": "CMSIS-NN DSP-only", "c": "CMSIS-NN pure C"}


@dataclass
class Layer:
    index: int          # instruction index in the program
    kind: int
    desc: str
    rec: list[int] = field(default_factory=lambda: [0] * LAYER_WORDS)


class Blob:
    """Layer records and the data they point into (offsets from the start of the table)."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.layers: list[Layer] = []

    def add(self, raw: bytes) -> int:
        while len(self.data) % 16:
            self.data.append(0)
        off = len(self.data)
        self.data += raw
        return off

    def table(self) -> bytes:
        head = 16 + LAYER_WORDS * 4 * len(self.layers)
        recs = bytearray()
        for lay in self.layers:
            r = list(lay.rec)
            for k in ("W", "B", "M", "S", "KS", "DB"):
                r[F[k]] = r[F[k]] + head if r[F[k]] >= 0 else -1
            recs += struct.pack(f"<{LAYER_WORDS}i", *r)
        total = head + len(self.data)
        return b"LAYR" + struct.pack("<iii", len(self.layers), total, 0) + bytes(recs) + bytes(self.data)


def _program(pte: bytes) -> Any:
    from executorch.exir._serialize._program import deserialize_pte_binary

    return deserialize_pte_binary(pte).program


def _nhwc(sizes: list[int], order: list[int]) -> list[int]:
    """NHWC dims of a 4-D activation whatever its dim order (sizes are NCHW logical)."""
    if len(sizes) != 4:
        raise ValueError(f"not a 4-D activation: {sizes}")
    n, c, h, w = sizes
    return [n, h, w, c]


class _Reader:
    """The program's values as the layer records need them, and the blob their constants go into."""

    def __init__(self, prog: Any, blob: Blob) -> None:
        self.prog, self.vals, self.blob = prog, prog.execution_plan[0].values, blob

    def ival(self, i: int) -> int:
        return int(self.vals[i].val.int_val)

    def ints(self, i: int) -> list[int]:
        return [int(self.vals[j].val.int_val) for j in self.vals[i].val.items]

    def tensor(self, i: int) -> Any:
        t = self.vals[i].val
        return t if type(t).__name__ == "Tensor" else None

    def const(self, i: int) -> bytes | None:
        t = self.tensor(i)
        if t is None or t.data_buffer_idx <= 0:
            return None
        return bytes(self.prog.constant_buffer[t.data_buffer_idx].storage)

    def put(self, i: int) -> int:
        raw = self.const(i)
        return self.blob.add(raw) if raw is not None else -1

    def put_opt(self, i: int) -> int:
        return self.put(i) if self.tensor(i) is not None else -1


def _numel(t: Any) -> int:
    n = 1
    for d in t.sizes:
        n *= int(d)
    return n


def _conv(rd: _Reader, args: list[int], lay: Layer) -> bool:
    """A conv (kind 1) or depthwise conv (kind 2)."""
    r, kind = lay.rec, lay.kind
    x, w, out = rd.tensor(args[0]), rd.tensor(args[1]), rd.tensor(args[-1])
    n_, ih, iw, ic = _nhwc(list(x.sizes), list(x.dim_order))
    _, oh, ow, oc = _nhwc(list(out.sizes), list(out.dim_order))
    stride, pad, dil = rd.ints(args[3]), rd.ints(args[4]), rd.ints(args[5])
    i = 6
    mult = 1
    if kind == 2:
        mult = rd.ival(args[i])
        i += 1
    r[F["IOFF"]], r[F["OOFF"]] = rd.ival(args[i]), rd.ival(args[i + 1])
    mraw = rd.const(args[i + 2])
    blocks = 4 * (2 * oc + (oc + 15) // 16 * 48)
    if mraw is not None and (len(mraw) == 4 * (oc + (oc + 3) // 4 * 4) if kind == 1
                             else len(mraw) in (8 * oc, blocks)):
        # multipliers followed by the folded window bias and, for depthwise, the 16-channel blocks
        # (emlkit/passes/window_bias.py; the runtime's conv_point_ext): ours gets them as the program
        # carries them, CMSIS-NN the multipliers alone
        r[F["M"]] = rd.blob.add(mraw[:4 * oc])
        r[F["KS"]] = rd.blob.add(mraw[4 * oc:8 * oc] if kind == 2 else mraw[4 * oc:])
        if len(mraw) == blocks and kind == 2:
            r[F["DB"]] = rd.blob.add(mraw[8 * oc:])
    else:
        r[F["M"]] = rd.put(args[i + 2])
    r[F["S"]] = rd.put(args[i + 3])
    r[F["AMIN"]], r[F["AMAX"]] = rd.ival(args[i + 4]), rd.ival(args[i + 5])
    r[F["W"]], r[F["B"]] = rd.put(args[1]), rd.put_opt(args[2])
    kh, kw = (int(w.sizes[1]), int(w.sizes[2]))
    for k, val in zip("N IH IW IC OH OW OC KH KW SH SW PH PW DH DW MULT".split(),
                      (n_, ih, iw, ic, oh, ow, oc, kh, kw, stride[0], stride[1], pad[0], pad[1], dil[0], dil[1], mult)):
        r[F[k]] = val
    r[F["INLEN"]], r[F["OUTLEN"]] = n_ * ih * iw * ic, n_ * oh * ow * oc
    lay.desc = (f"{'conv' if kind == 1 else 'dw'} {kh}x{kw}/{stride[0]} {ih}x{iw}x{ic}->{oh}x{ow}x{oc}"
                + (f" x{mult}" if mult > 1 else ""))
    return True


def _fc(rd: _Reader, args: list[int], lay: Layer) -> bool:
    r = lay.rec
    x, w = rd.tensor(args[0]), rd.tensor(args[1])
    k_ = int(x.sizes[-1])
    rows = _numel(x) // k_ if k_ else 0
    oc = int(w.sizes[0])
    r[F["N"]], r[F["IC"]], r[F["OC"]] = rows, k_, oc
    r[F["W"]], r[F["B"]], r[F["KS"]] = rd.put(args[1]), rd.put_opt(args[2]), rd.put_opt(args[3])
    r[F["IOFF"]], r[F["FOFF"]], r[F["OOFF"]] = rd.ival(args[4]), rd.ival(args[5]), rd.ival(args[6])
    r[F["QM"]], r[F["QS"]] = rd.ints(args[7])[0], rd.ints(args[8])[0]
    r[F["AMAX"]], r[F["AMIN"]] = rd.ival(args[9]), rd.ival(args[10])
    r[F["INLEN"]], r[F["OUTLEN"]] = rows * k_, rows * oc
    lay.desc = f"fc {rows}x{k_}->{oc}"
    return True


def _add(rd: _Reader, args: list[int], lay: Layer) -> bool:
    r = lay.rec
    x, y = rd.tensor(args[0]), rd.tensor(args[4])
    if list(x.sizes) != list(y.sizes):
        return False  # channel broadcast: CMSIS-NN's add has no such form
    n_el = _numel(x)
    (r[F["AZP"]], r[F["AM"]], r[F["AS"]]) = (rd.ival(args[1]), rd.ival(args[2]), rd.ival(args[3]))
    (r[F["BZP"]], r[F["BM"]], r[F["BS"]]) = (rd.ival(args[5]), rd.ival(args[6]), rd.ival(args[7]))
    r[F["OOFF"]], r[F["QM"]], r[F["QS"]] = rd.ival(args[8]), rd.ival(args[9]), rd.ival(args[10])
    r[F["AMIN"]], r[F["AMAX"]] = rd.ival(args[11]), rd.ival(args[12])
    r[F["ELEMS"]] = r[F["INLEN"]] = r[F["OUTLEN"]] = n_el
    lay.desc = f"add {n_el}"
    return True


def _mul(rd: _Reader, args: list[int], lay: Layer) -> bool:
    """quantized_mul(self, self_zp, other, other_zp, out_zp, out_mult, out_shift): no activation range, the
    reference clamps to int8."""
    r = lay.rec
    x, y = rd.tensor(args[0]), rd.tensor(args[2])
    if list(x.sizes) != list(y.sizes):
        return False  # channel broadcast: CMSIS-NN's mul has no such form
    n_el = _numel(x)
    r[F["AZP"]], r[F["BZP"]] = rd.ival(args[1]), rd.ival(args[3])
    r[F["OOFF"]], r[F["QM"]], r[F["QS"]] = rd.ival(args[4]), rd.ival(args[5]), rd.ival(args[6])
    r[F["AMIN"]], r[F["AMAX"]] = -128, 127
    r[F["ELEMS"]] = r[F["INLEN"]] = r[F["OUTLEN"]] = n_el
    lay.desc = f"mul {n_el}"
    return True


def _pool(rd: _Reader, args: list[int], lay: Layer) -> bool:
    """An average pool (kind 5) or max pool (kind 6)."""
    r = lay.rec
    x, out = rd.tensor(args[0]), rd.tensor(args[-1])
    n_, ih, iw, ic = _nhwc(list(x.sizes), list(x.dim_order))
    _, oh, ow, _ = _nhwc(list(out.sizes), list(out.dim_order))
    ks, st, pd = rd.ints(args[1]), rd.ints(args[2]), rd.ints(args[3])
    st = st or ks
    for k, val in zip("N IH IW IC OH OW OC KH KW SH SW PH PW".split(),
                      (n_, ih, iw, ic, oh, ow, ic, ks[0], ks[1], st[0], st[-1], pd[0], pd[-1])):
        r[F[k]] = val
    if lay.kind == 5:
        r[F["AZP"]], r[F["QM"]], r[F["QS"]] = rd.ival(args[5]), rd.ival(args[6]), rd.ival(args[7])
    r[F["AMIN"]], r[F["AMAX"]] = -128, 127
    r[F["INLEN"]], r[F["OUTLEN"]] = n_ * ih * iw * ic, n_ * oh * ow * ic
    lay.desc = f"{'avgpool' if lay.kind == 5 else 'maxpool'} {ks[0]}x{ks[1]} {ih}x{iw}x{ic}"
    return True


_RECORD = {1: _conv, 2: _conv, 3: _fc, 4: _add, 5: _pool, 6: _pool, 7: _mul}


def extract(pte: bytes) -> Blob:
    """Every kernel layer of the program's forward method."""
    prog = _program(pte)
    plan = prog.execution_plan[0]
    blob = Blob()
    rd = _Reader(prog, blob)
    for n, ins in enumerate(plan.chains[0].instructions):
        a = ins.instr_args
        if type(a).__name__ != "KernelCall":
            continue
        ns, _, name = plan.operators[a.op_index].name.partition("::")
        # emlkit:: ops (our own, e.g. the average pool with its own output qparams) have no CMSIS-NN twin
        if ns != "cortex_m" or name not in KINDS:
            continue
        kind = KINDS[name]
        lay = Layer(n, kind, name)
        for k in ("W", "B", "M", "S", "KS", "DB"):
            lay.rec[F[k]] = -1
        lay.rec[F["KIND"]] = kind
        if _RECORD[kind](rd, list(a.args), lay):
            blob.layers.append(lay)
    return blob


def build(cmsis: Path, out: Path, board: str = "corstone-300", variant: str = "mve") -> Path:
    from emlkit.hostfw import cmake_binary

    cmake = cmake_binary()
    if cmake is None:
        raise SystemExit("error: cmake not found: run ./scripts/setup.sh")
    key = hashlib.sha256(str(cmsis.resolve()).encode()).hexdigest()[:8]
    bdir = out / (f"build-{key}" if board == "corstone-300" else f"build-{key}-{board}")
    cfg = [cmake, "-S", str(BENCH_SRC), "-B", str(bdir), f"-DBOARD={board}", f"-DCMSIS_NN_ROOT={cmsis.resolve()}",
           f"-DCMSIS_NN_VARIANT={variant}",
           f"-DCMAKE_TOOLCHAIN_FILE={ROOT / 'firmware' / 'cmake' / 'arm-none-eabi.cmake'}", "-DCMAKE_BUILD_TYPE=Release",
           f"-DFW_PYTHON={sys.executable}"]
    for cmd in (cfg, [cmake, "--build", str(bdir), "-j", "2"]):
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"error: building the benchmark image failed:\n{(p.stdout + p.stderr)[-3000:]}")
    return bdir / "runner.elf"


def run(elf: Path, table: bytes, workdir: Path, timeout: float, board: str = "corstone-300",
        machine: str = "mps3-an547") -> list[dict[str, Any]]:
    from emlkit.deploy.boards import load_board

    b = load_board(board)
    qemu = shutil.which("qemu-system-arm")
    if qemu is None:
        raise SystemExit("error: qemu-system-arm not found: run ./scripts/setup.sh")
    path = workdir / "layers.bin"
    path.write_bytes(table)
    cmd = [qemu, "-M", machine, *b.qemu.args, "-kernel", str(elf), "-device",
           f"loader,file={path},addr={b.model.address:#x},force-raw=on"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=workdir)
    rows = []
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            rows.append(json.loads(line))
    if not rows or "done" not in rows[-1]:
        raise SystemExit(f"error: the benchmark image did not finish (exit {p.returncode}):\n{p.stdout[-2000:]}")
    return rows[:-1]


def report(model: str, blob: Blob, rows: list[dict[str, Any]]) -> dict[str, Any]:
    layers = []
    for lay, row in zip(blob.layers, rows):
        layers.append({"instruction": lay.index, "class": CLASS[lay.kind], "shape": lay.desc, "ours": row["ours"],
                       "cmsis_nn": row["cmsis"], "ratio": round(row["ours"] / row["cmsis"], 3) if row["cmsis"] else None,
                       "bit_identical": row["equal"], "cmsis_status": row["cmsis_status"],
                       # average pool: outputs that differ only because the two round half-way means differently
                       "tie_diffs": row.get("tie_diffs", 0), "other_diffs": row.get("other_diffs", 0)})
    classes: dict[str, dict[str, int]] = {}
    for lay in layers:
        c = classes.setdefault(lay["class"], {"ours": 0, "cmsis_nn": 0, "layers": 0, "bit_identical": 0})
        c["ours"] += lay["ours"]
        c["cmsis_nn"] += lay["cmsis_nn"]
        c["layers"] += 1
        c["bit_identical"] += int(lay["bit_identical"])
    ours, theirs = sum(x["ours"] for x in layers), sum(x["cmsis_nn"] for x in layers)
    timed = [x for x in layers if x["ratio"] is not None]
    worst = max(timed, key=lambda x: x["ratio"]) if timed else None
    return {"model": model, "worst": worst, "unit": "instructions (QEMU -icount shift=0)", "layers": layers,
            "classes": {k: {**v, "ratio": round(v["ours"] / v["cmsis_nn"], 3)} for k, v in classes.items()},
            "total": {"ours": ours, "cmsis_nn": theirs, "ratio": round(ours / theirs, 3) if theirs else None,
                      "layers": len(layers), "bit_identical": sum(int(x["bit_identical"]) for x in layers)}}


def plot(rep: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lay = rep["layers"]
    fig, ax = plt.subplots(figsize=(max(8, len(lay) * 0.18), 4))
    ax.bar(range(len(lay)), [x["ratio"] for x in lay], color=["tab:green" if x["ratio"] <= 1 else "tab:red" for x in lay])
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xlabel("kernel layer (program order)")
    ax.set_ylabel("ours / CMSIS-NN (instructions)")
    ax.set_title(f"{rep['model']}: ours/CMSIS-NN = {rep['total']['ratio']} over {len(lay)} layers")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def print_report(rep: dict[str, Any], board: str, build: str, verbose: bool) -> None:
    t = rep["total"]
    w = rep["worst"]
    print(f"\n{rep['model']} on {rep['core']} ({board}), ours vs {build}: {t['layers']} kernel layers, ours "
          f"{t['ours']:,} vs CMSIS-NN {t['cmsis_nn']:,} instructions = {t['ratio']}x; bit-identical "
          f"{t['bit_identical']}/{t['layers']}")
    if w is not None:
        print(f"  worst layer: #{w['instruction']} {w['shape']} {w['ratio']}x")
    print(f"  {'class':16s} {'layers':>6s} {'ours':>12s} {'CMSIS-NN':>12s} {'ratio':>6s} {'identical':>9s}")
    for k, c in sorted(rep["classes"].items()):
        print(f"  {k:16s} {c['layers']:6d} {c['ours']:12,} {c['cmsis_nn']:12,} {c['ratio']:6.3f} "
              f"{c['bit_identical']:>4d}/{c['layers']}")
    for lay in rep["layers"]:
        if verbose or lay["ratio"] is None or lay["ratio"] > 1.0 or not lay["bit_identical"]:
            same = "identical"
            if not lay["bit_identical"]:
                same = "DIFFERENT"
                if lay["tie_diffs"] and not lay["other_diffs"]:
                    same += (f" only at {lay['tie_diffs']} half-way means (rounding rule: reference half to even, "
                             "CMSIS-NN away from zero)")
            print(f"  #{lay['instruction']:<4d} {lay['shape']:40s} {lay['ours']:10,} {lay['cmsis_nn']:10,} "
                  f"{lay['ratio']}  {same}")


def print_summary(reports: list[dict[str, Any]]) -> None:
    """One line per (core, model): the total, each class and the worst layer (the speed targets' figures)."""
    classes = sorted({k for r in reports for k in r["classes"]})
    short = {"conv": "conv", "depthwise": "dw", "fully connected": "fc", "add": "add", "average pool": "avgpool",
             "max pool": "maxpool", "mul": "mul"}
    head = f"{'core':14s} {'model':18s} {'total':>6s} " + " ".join(f"{short.get(c, c):>7s}" for c in classes)
    print("\nsummary (ours / CMSIS-NN, instructions; - : no such layer)")
    print(head + f" {'identical':>9s}  worst layer")
    for r in reports:
        cls = " ".join(f"{r['classes'][c]['ratio']:7.3f}" if c in r["classes"] else f"{'-':>7s}" for c in classes)
        t, w = r["total"], r["worst"]
        worst = f"{w['ratio']}x {w['shape']}" if w is not None else "-"
        print(f"{r['core']:14s} {r['model']:18s} {t['ratio']:6.3f} {cls} {t['bit_identical']:>4d}/{t['layers']:<4d}  {worst}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", default=["mobilenet_v2", "mlperf_kws_dscnn"],
                    help="zoo models or .py model files (default: mobilenet_v2 mlperf_kws_dscnn)")
    ap.add_argument("--cmsis-nn", type=Path, help="a CMSIS-NN checkout (kept outside this repository)")
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "bench-cmsis-nn")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--core", choices=[*CORES, "all"], default="cortex-m55",
                    help="cortex-m55: MVE kernels vs CMSIS-NN's MVE build (default); cortex-m4/m7/m33: our DSP "
                         "kernels vs CMSIS-NN's DSP-only build; cortex-m3/m0plus: our portable C vs CMSIS-NN's "
                         "pure-C build; all: every core in one run")
    ap.add_argument("--verbose-layers", action="store_true", help="print every layer, not only the ones above 1.0")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    if args.cmsis_nn is None:
        print("error: no --cmsis-nn checkout given: fetch CMSIS-NN outside this repository and pass its path "
              "(--cmsis-nn /path/to/CMSIS-NN)", file=sys.stderr)
        return 2
    if not (args.cmsis_nn / "Include" / "arm_nnfunctions.h").is_file():
        print(f"error: {args.cmsis_nn} is not a CMSIS-NN checkout (no Include/arm_nnfunctions.h)", file=sys.stderr)
        return 2
    from emlkit.compile import compile_model, make_options

    cores = list(CORES) if args.core == "all" else [args.core]
    args.out = args.out.resolve()  # QEMU runs in it and loads the layer table by this path
    args.out.mkdir(parents=True, exist_ok=True)
    reports = []
    for core in cores:
        target, board, machine, variant = CORES[core]
        elf = build(args.cmsis_nn, args.out, board, variant)
        core_reports = []
        for model in args.models:
            cres = compile_model(model, target, args.out / "programs", options=make_options(), reuse_cache=True)
            blob = extract(cres.pte.read_bytes())
            rows = run(elf, blob.table(), args.out, args.timeout, board, machine)
            rep = report(cres.name, blob, rows)
            rep["core"], rep["board"], rep["cmsis_nn_build"] = core, board, CMSIS_BUILD[variant]
            core_reports.append(rep)
            print_report(rep, board, CMSIS_BUILD[variant], args.verbose_layers)
            plot(rep, args.out / (f"{cres.name}_ratios.png" if core == "cortex-m55" else f"{cres.name}_{core}_ratios.png"))
        res = args.out / ("results.json" if core == "cortex-m55" else f"results_{core}.json")
        res.write_text(json.dumps(core_reports, indent=2) + "\n")
        reports += core_reports
    print_summary(reports)
    if len(cores) > 1:
        (args.out / "results_all.json").write_text(json.dumps(reports, indent=2) + "\n")
    print(f"\nwrote the results JSON and the plots in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
