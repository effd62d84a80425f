"""CPU/NPU accuracy parity: int8 SNR of every zoo model on cortex-m55 against ethos-u55-128.

Usage: .venv/bin/python scripts/parity.py [--models a,b] [--samples K] [--held-out M] [--markdown]

Both targets quantize the same model with the same calibration: ModelInputs
plus K-1 inputs drawn from the same distribution (per-tensor mean and std of
ModelInputs, seeded). The SNR of each lowered program (its host reference:
cortex_m:: Python references, tosa_reference_model for the NPU delegate) is
taken against the float model over all scored inputs' outputs together. One input
is not enough: a 2-logit classifier's SNR moves by several dB when one logit
is one int8 step off, and the CPU's CMSIS-NN fixed-point requantization and
the NPU's TOSA rescale round differently on about 1% of elements. A gap above
1 dB (NPU better) means the CPU lowering loses accuracy the NPU keeps.

Each target's quantized (fake-quant) PyTorch model is scored on the same inputs
too: where the two quantized models agree but the programs do not, the gap is
in a lowering's integer arithmetic, not in the quantization.

The figures are taken over M further inputs of the same distribution (another
seed) that calibration did not see (--held-out M, default 64), not the K
calibration inputs (--held-out 0): a model is used on inputs it was not
calibrated on, and with 2 or 10 logits 8 inputs are too few for a stable figure
(mlperf_vww_mobilenet_v1's gap moved by 3 dB between the two).

The "input-dependent" column is how much of the float model's output changes
with the input: the RMS over outputs of their standard deviation across the
scored inputs, in % of the outputs' RMS. Near 0 % the output is the same for
every input (a deep untrained network whose signal dies out before the
classifier): the SNR then scores how one constant rounds, and a gap between
targets is a step of rounding, not accuracy one of them loses.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings

import torch

from emlkit import models, numerics, reference
from emlkit.logsetup import setup_logging
from emlkit.compile import make_options
from emlkit.errors import AotError
from emlkit.targets import get_target

CPU, NPU = "cortex-m55", "ethos-u55-128"
LIMIT_DB = 1.0


def samples(inputs: tuple[torch.Tensor, ...], k: int, seed: int = 0) -> list[tuple[torch.Tensor, ...]]:
    g = torch.Generator().manual_seed(seed)
    out = [inputs]
    for _ in range(k - 1):
        out.append(tuple((torch.randn(t.shape, generator=g) * t.float().std() + t.float().mean()).to(t.dtype)
                         for t in inputs))
    return out


def scored_inputs(zm: models.ZooModel, k: int, held_out: int) -> list[tuple[torch.Tensor, ...]]:
    """The inputs figures are taken over: the K calibration inputs, or HELD_OUT fresh ones."""
    return samples(zm.inputs, held_out + 1, seed=1)[1:] if held_out else samples(zm.inputs, k)


def float_outputs(zm: models.ZooModel, inputs: list[tuple[torch.Tensor, ...]]) -> list[torch.Tensor]:
    """Per input, the float model's outputs flattened into one tensor (the reference both targets are scored on)."""
    with torch.no_grad():
        return [torch.cat([t.flatten() for t in numerics.flatten_outputs(zm.module(*x))]) for x in inputs]


def input_dependence(outs: list[torch.Tensor]) -> float:
    """% of the float output's RMS that varies with the input, over the scored inputs' OUTS."""
    o = torch.stack(outs)
    rms = float(o.pow(2).mean().sqrt())
    return 0.0 if rms == 0.0 else 100.0 * float(o.std(0, correction=0).pow(2).mean().sqrt()) / rms


def snr(model: str, target_name: str, k: int, scored: list[tuple[torch.Tensor, ...]],
        ref: list[torch.Tensor]) -> tuple[float, float] | str:
    """Pooled SNR against REF (float_outputs of SCORED) of MODEL lowered for TARGET, calibrated on k inputs, and
    of its quantized PyTorch model; an error line if it does not compile."""
    target = get_target(target_name)
    zm = models.build(model)
    data = samples(zm.inputs, k)
    opts = make_options()
    try:
        if target.flow == "cortex_m":
            from emlkit.lower import cortex_m as flow
        else:
            from emlkit.lower import ethos_u as flow
        with torch.no_grad():
            low = flow.lower(zm.module, zm.inputs, data, target, opts)
            tosa = None
            if target.flow == "ethos_u":
                names = reference.delegate_names(low.edge.exported_program().graph_module)
                tosa = {n: p.tosa for n, p in zip(names, low.extra["vela_partitions"])}
            got, fq = [], []
            for sample in scored:
                # In the layout the program takes (the Cortex-M flow runs channels-last).
                lay = tuple(a.contiguous(memory_format=torch.channels_last)
                            if b.dim() == 4 and b.is_contiguous(memory_format=torch.channels_last)
                            and not b.is_contiguous() else a for a, b in zip(sample, low.inputs))
                got += [t.float().flatten() for t in reference.run_lowered(low.edge, lay, tosa, [])]
                fq += [t.float().flatten() for t in numerics.flatten_outputs(low.quantized(*sample))]
    except AotError as err:
        return f"error: {err}"
    r = torch.cat(ref)
    return numerics.snr_db(r, torch.cat(got)), numerics.snr_db(r, torch.cat(fq))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="all")
    ap.add_argument("--samples", type=int, default=8, help="inputs to calibrate on (default 8)")
    ap.add_argument("--held-out", type=int, default=64, metavar="M",
                    help="score on M fresh inputs calibration did not see (default 64; 0: on the K it did)")
    ap.add_argument("--markdown", action="store_true", help="print a markdown table")
    args = ap.parse_args(argv)
    if args.samples < 1 or args.held_out < 0:
        ap.error("--samples must be at least 1 and --held-out at least 0")
    setup_logging(False)
    warnings.filterwarnings("ignore")
    names = list(models.ZOO) if args.models == "all" else args.models.split(",")
    rows, bad, both = [], 0, 0
    for m in names:
        zm = models.build(m)
        scored = scored_inputs(zm, args.samples, args.held_out)
        ref = float_outputs(zm, scored)  # once per model: the float model does not depend on the target
        got = {t: snr(m, t, args.samples, scored, ref) for t in (CPU, NPU)}
        row: dict[str, object] = {"model": m, "input_dependent_pct": input_dependence(ref)}
        for t, v in got.items():
            row[t], row[f"{t} quantized model"] = (v, None) if isinstance(v, str) else v
        cpu, npu = row[CPU], row[NPU]
        gap = npu - cpu if isinstance(cpu, float) and isinstance(npu, float) else None
        ok = gap is not None and gap <= LIMIT_DB
        bad += not ok
        both += gap is not None and abs(gap) <= LIMIT_DB
        rows.append({**row, "gap_db": gap, "ok": ok})
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    if args.markdown:
        print(f"| model | input-dependent | {CPU} SNR dB | its quantized model | {NPU} SNR dB | its quantized model "
              "| gap dB (NPU - CPU) |")
        print("|---|---|---|---|---|---|---|")
        for r in rows:
            def f(v: object) -> str:
                return "refused" if not isinstance(v, float) else ("inf" if math.isinf(v) else f"{v:.1f}")
            gap = "-" if r["gap_db"] is None else f"{r['gap_db']:+.1f}"
            print(f"| {r['model']} | {r['input_dependent_pct']:.1f} % | {f(r[CPU])} | {f(r[f'{CPU} quantized model'])} | {f(r[NPU])} "
                  f"| {f(r[f'{NPU} quantized model'])} | {gap} |")
    print(f"{len(rows) - bad} of {len(rows)} models: the CPU within {LIMIT_DB} dB of the NPU or above it; "
          f"{both} within {LIMIT_DB} dB both ways", file=sys.stderr)
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
