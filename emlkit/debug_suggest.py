"""`debug --suggest`: remedies for the layer that loses the most accuracy, each one measured.

Each remedy compiles the model again with one change and runs the result on the host reference with the same
input; the figure is the output's SNR against the float model. `emlkit debug` has just shown the device equal to
the host reference at every layer, which is what makes the reference's SNR the device's; a remedy's program is
not run on the device here (run it with `emlkit run` and the option named). Remedies:
- per-channel weights: Linear layers as per-output-channel 1x1 convs (`--per-channel-linear all`) where the
  options had them per tensor; convolutions are per channel in every flow already;
- more calibration data: the calibration set plus synthetic samples drawn per input from a normal distribution
  with that input's mean and spread (a stand-in: real samples, given with --calibration, are better);
- int16 activations (a16w8): the whole model on the target's a16w8 variant where one exists, and on Ethos-U the
  worst layer's module alone (the Arm quantizer's per-module configuration: int16 activations there, int8
  elsewhere; Vela rescales between them). Cortex-M kernels are int8, so there is no per-layer int16 on the CPU;
- the layer in float: the worst layer's module left unquantized (its ops run in float on the CPU between a
  dequantize and a quantize, `--allow-float`). Where ExecuTorch 1.5.1's Cortex-M lowering cannot lower a float
  conv between quantized ones, the gain is measured on the quantize-dequantize models (PT2E's conversion with
  our passes, which compute what the programs would, in float) of the layer quantized and not, and said so.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from emlkit.errors import AotError
from emlkit.load import LoadedModel
from emlkit.targets import TARGETS, Target

log = logging.getLogger(__name__)

SYNTHETIC_SAMPLES = 31
_FUSED_ACTIVATIONS = ("relu", "hardtanh", "clamp", "relu6")


@dataclass
class Remedy:
    name: str
    change: str                    # what was compiled differently
    output_snr_db: float | None    # measured on the host reference; None: not tried or failed
    gain_db: float | None = None   # against the program as compiled
    note: str = ""                 # why it was not tried, or its error line


def output_snr(model: LoadedModel, target: Target, options: Any, calibration: list[tuple[torch.Tensor, ...]],
               sample: tuple[torch.Tensor, ...], work: Path) -> float:
    """The lowest SNR over the outputs of MODEL compiled this way, on the host reference, for SAMPLE."""
    from emlkit import reference
    from emlkit.compile import lower_model
    from emlkit.numerics import compare, flatten_outputs

    lowered, tosa = lower_model(model, target, options, calibration, work)
    with torch.no_grad():
        got = reference.run_lowered(lowered.edge, sample, tosa)
        want = flatten_outputs(model.module(*sample))
    return min(c["snr_db"] for c in compare(want, got))


def simulated_snr(model: LoadedModel, target: Target, options: Any, calibration: list[tuple[torch.Tensor, ...]],
                  sample: tuple[torch.Tensor, ...]) -> float:
    """The lowest output SNR of the quantize-dequantize model (what the program computes, in float arithmetic)."""
    from emlkit.compile import flow_for
    from emlkit.numerics import compare, flatten_outputs

    with torch.no_grad():
        sim = flow_for(target).simulate(model.module, model.inputs, calibration, target, options)
        got = flatten_outputs(sim(*sample))
        want = flatten_outputs(model.module(*sample))
    return min(c["snr_db"] for c in compare(want, got))


def module_path(n: torch.fx.Node) -> str:
    """The model submodule a graph node came from ("features.0"), "" for the top level."""
    stack = n.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    path = list(stack.values())[-1]
    return str(path[0]) if isinstance(path, tuple) else str(path)


def keep_module_float(path: str, record: list[str]) -> Callable[[Any, Any, Any], Any]:
    """A quantizer hook that removes the annotations of every node of module PATH after the quantizer ran, so
    PT2E leaves those ops in float between a dequantize and a quantize."""
    from emlkit.lower.quantizer_steps import WithSteps

    def strip(model: torch.fx.GraphModule) -> None:
        todo = [n for n in model.graph.nodes if n.op == "call_function" and module_path(n) == path]
        while todo:
            n = todo.pop(0)
            if n.meta.pop("quantization_annotation", None) is None:
                continue
            record.append(n.name)
            # an activation the quantizer annotated as one pattern with this op goes with it
            todo += [u for u in n.users if any(a in str(u.target) for a in _FUSED_ACTIVATIONS)]

    def hook(quantizer: Any, target: Any, options: Any) -> Any:
        return WithSteps(quantizer, after=strip)

    return hook


def module_in_a16w8(path: str, record: list[str]) -> Callable[[Any, Any, Any], Any]:
    """A quantizer hook giving module PATH int16 activations and int8 weights (Ethos-U's Arm quantizer); RECORD
    gets the nodes that were annotated int16, so a module name that matched nothing is seen, not ignored."""
    from executorch.backends.arm.quantizer import get_symmetric_a16w8_quantization_config

    from emlkit.lower.quantizer_steps import WithSteps, innermost

    def check(model: torch.fx.GraphModule) -> None:
        for n in model.graph.nodes:
            ann = n.meta.get("quantization_annotation")
            spec = getattr(ann, "output_qspec", None)
            if n.op == "call_function" and module_path(n) == path and getattr(spec, "dtype", None) == torch.int16:
                record.append(n.name)

    def hook(quantizer: Any, target: Any, options: Any) -> Any:
        innermost(quantizer).set_module_name(path, get_symmetric_a16w8_quantization_config(is_per_channel=True))
        return WithSteps(quantizer, after=check)

    return hook


def synthetic_calibration(calibration: list[tuple[torch.Tensor, ...]], n: int,
                          seed: int = 0) -> list[tuple[torch.Tensor, ...]]:
    """CALIBRATION plus N samples per input from a normal distribution with that input's mean and spread over
    the given samples (integer inputs are repeated as given)."""
    g = torch.Generator().manual_seed(seed)
    extra = []
    for _ in range(n):
        sample = []
        for i, t in enumerate(calibration[0]):
            if not t.dtype.is_floating_point:
                sample.append(t.clone())
                continue
            vals = torch.stack([s[i].float() for s in calibration])
            mean, std = float(vals.mean()), float(vals.std()) if vals.numel() > 1 else 1.0
            sample.append((torch.randn(t.shape, generator=g) * (std or 1.0) + mean).to(t.dtype))
        extra.append(tuple(sample))
    return [*calibration, *extra]


def rebuilt_options(opts: Any, allow_float: bool | None = None) -> Any:
    """OPTS' choices configured afresh (for a target of its own, or with hooks added), --allow-float as given."""
    from emlkit.compile import options_like

    return options_like(opts, **({} if allow_float is None else {"allow_float": allow_float}))


def _try(name: str, change: str, measure: Callable[[], float], base: float) -> Remedy:
    try:
        snr = measure()
    except AotError as err:
        return Remedy(name, change, None, note=f"does not compile: {str(err).splitlines()[0]}")
    return Remedy(name, change, snr, snr - base)


def suggest(model: LoadedModel, target: Target, options: Any, calibration: list[tuple[torch.Tensor, ...]],
            sample: tuple[torch.Tensor, ...], module: str, work: Path,
            as_compiled_db: float | None = None) -> tuple[float, list[Remedy]]:
    """The output SNR as compiled (AS_COMPILED_DB when the caller has just measured it), and each remedy for the
    layer of MODULE ("" when the worst layer has none)."""
    from emlkit.compile import make_options

    opts = options if options is not None else make_options()
    base = as_compiled_db if as_compiled_db is not None else output_snr(model, target, opts, calibration, sample,
                                                                        work / "base")
    out: list[Remedy] = []

    if target.flow == "cortex_m" and opts.linear_mode != "all":
        per = copy.copy(opts)
        per.linear_mode = "all"
        out.append(_try("per-channel weights", "Linear layers per output channel (--per-channel-linear all)",
                        lambda: output_snr(model, target, per, calibration, sample, work / "per_channel"), base))
    else:
        out.append(Remedy("per-channel weights", "-", None, note="already per channel: convolutions in every flow, "
                          "Linear layers as per-channel 1x1 convs (--per-channel-linear all)"
                          if target.flow == "cortex_m" else "already per channel (the Arm quantizer's weights)"))

    more = synthetic_calibration(calibration, SYNTHETIC_SAMPLES)
    out.append(_try("more calibration data", f"{len(more)} samples: the {len(calibration)} given + "
                    f"{SYNTHETIC_SAMPLES} synthetic (normal, each input's mean and spread)",
                    lambda: output_snr(model, target, opts, more, sample, work / "calibration"), base))

    wide = TARGETS.get(f"{target.name}-a16w8")
    if wide is not None:
        out.append(_try("int16 activations (a16w8)", f"the whole model on {wide.name}",
                        lambda: output_snr(model, wide, rebuilt_options(opts), calibration, sample, work / "a16w8"),
                        base))
    else:
        out.append(Remedy("int16 activations (a16w8)", "-", None,
                          note=f"{target.name} has no a16w8 variant" + (
                              " (int16 activations run on ethos-u55-128-a16w8)" if target.flow == "ethos_u" else
                              " (Cortex-M kernels are int8)")))

    out.append(_layer_a16w8(model, target, opts, calibration, sample, module, work, base))

    if module:
        record: list[str] = []
        flt = rebuilt_options(opts, allow_float=True)
        flt.quantizer_hooks.append(keep_module_float(module, record))
        rem = _try("the layer in float", f"module {module} unquantized (--allow-float)",
                   lambda: output_snr(model, target, flt, calibration, sample, work / "float_layer"), base)
        if rem.output_snr_db is None:
            rem = _simulated_float_layer(rem, model, target, opts, flt, calibration, sample)
        if not record:
            rem = Remedy(rem.name, rem.change, None, note=f"no node of module {module} reached the quantizer")
        out.append(rem)
    else:
        out.append(Remedy("the layer in float", "-", None, note="the worst layer belongs to no submodule"))
    return base, out


def _layer_a16w8(model: LoadedModel, target: Target, opts: Any, calibration: list[tuple[torch.Tensor, ...]],
                 sample: tuple[torch.Tensor, ...], module: str, work: Path, base: float) -> Remedy:
    name = "the layer in int16 (a16w8)"
    if target.flow != "ethos_u":
        return Remedy(name, "-", None, note="Cortex-M kernels are int8: no per-layer int16 on the CPU")
    if not module:
        return Remedy(name, "-", None, note="the worst layer belongs to no submodule")
    record: list[str] = []
    wide = rebuilt_options(opts)
    wide.quantizer_hooks.append(module_in_a16w8(module, record))
    rem = _try(name, f"module {module} with int16 activations, the rest int8",
               lambda: output_snr(model, target, wide, calibration, sample, work / "layer_a16w8"), base)
    if not record:
        return Remedy(name, rem.change, None, note=f"the quantizer gave no node of module {module} int16 outputs")
    return rem


def _simulated_float_layer(failed: Remedy, model: LoadedModel, target: Target, opts: Any, flt: Any,
                           calibration: list[tuple[torch.Tensor, ...]], sample: tuple[torch.Tensor, ...]) -> Remedy:
    """When the program with the layer in float does not compile: the gain measured on the quantize-dequantize
    models of both (the same arithmetic as the programs, in float), said as such."""
    try:
        base = simulated_snr(model, target, opts, calibration, sample)
        snr = simulated_snr(model, target, flt, calibration, sample)
    except Exception as exc:  # the simulation goes through the same quantizer: it may fail the same way
        return Remedy(failed.name, failed.change, None, note=f"{failed.note}; no simulation either: "
                      f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    return Remedy(failed.name, failed.change, snr, snr - base,
                  note=f"measured on the quantize-dequantize model (as compiled there: {base:.1f} dB): the program "
                       f"{failed.note}")


def print_remedies(base: float, remedies: list[Remedy], layer: str) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"remedies for {layer}: output SNR against the float model, measured on the host reference "
                    f"(as compiled: {base:.1f} dB)")
    for col in ("remedy", "what changed", "output SNR dB", "gain dB", "note"):
        t.add_column(col, justify="right" if "dB" in col else "left")
    for r in remedies:
        t.add_row(r.name, r.change, "-" if r.output_snr_db is None else f"{r.output_snr_db:.1f}",
                  "-" if r.gain_db is None else f"{r.gain_db:+.1f}", r.note)
    Console(width=max(Console().width, 150)).print(t)
