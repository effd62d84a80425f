"""How each backend evaluates and carries a fused lookup table (used by lut_fusion.py).

A backend decides three things: which regions it can take (dtype, table size),
how a table entry is computed from an input code (the backend's own
dequantize, float precision, rounding and clamping, so a one-op chain gives
exactly the table the backend would have built for that op), and which op
carries the table in the graph.

- Cortex-M: `cortex_m::quantized_activation(x_int8, lut_int8[256])`, entries as
  ExecuTorch's `build_activation_lut` computes them (double precision, round
  half away from zero, NaN entries continue the nearest defined entry).
  int16 is not supported by that kernel, so int16 regions are left alone.
- Ethos-U: `aot::table` before partitioning, TOSA TABLE in the delegate
  (`emlkit.passes.lut_ethos_u`); int8 256 entries, int16 513 interpolated entries
  plus a RESCALE (int16 regions appear with the A16W8 targets, e.g. ethos-u55-128-a16w8).
"""

from __future__ import annotations

from typing import Any

import torch

# Registers torch.ops.cortex_m; the passes package must load first (ops.operators alone is a circular import).
import executorch.backends.cortex_m.passes  # noqa: F401
from emlkit.passes import lut_fusion
from emlkit.passes.lut_fusion import Region, emit_table_op, evaluate_chain, fill_undefined
from emlkit.passes.manager import declare


def all_codes(dtype: torch.dtype) -> torch.Tensor:
    info = torch.iinfo(dtype)
    return torch.arange(info.min, info.max + 1, dtype=torch.int64)


def round_half_away(x: torch.Tensor) -> torch.Tensor:
    return torch.sign(x) * torch.floor(x.abs() + 0.5)


class CortexMLut:
    """cortex_m::quantized_activation: 256-entry int8 table indexed by code + 128."""

    name = "cortex_m"
    op_name = "cortex_m::quantized_activation"

    def cannot_fuse(self, region: Region) -> str | None:
        din, dout = region.in_qparams[4], region.out_qparams[4]
        if din != torch.int8 or dout != torch.int8:
            return (f"cortex_m::quantized_activation takes int8 only (region is {din}->{dout}); "
                    "int16 tables are not supported on Cortex-M, region left as it is")
        return None

    def table_entries(self, region: Region) -> int:
        return 256

    @staticmethod
    def codes(region: Region) -> torch.Tensor:
        return all_codes(torch.int8)

    @staticmethod
    def dequantize(codes: torch.Tensor, scale: float, zp: int) -> torch.Tensor:
        # Python-float arithmetic of build_activation_lut, element by element: (q - zp) * scale in double.
        return (codes.to(torch.float64) - zp) * scale

    @staticmethod
    def quantize(y: torch.Tensor, scale: float, zp: int, qmin: int, qmax: int) -> torch.Tensor:
        scaled = y / scale + zp
        out = round_half_away(torch.nan_to_num(scaled, nan=0.0, posinf=qmax, neginf=qmin)).clamp(qmin, qmax)
        out = out.to(torch.int64)
        fill_undefined(out, torch.isnan(scaled))
        return out

    def table(self, region: Region) -> torch.Tensor:
        s_in, zp_in, _, _, _ = region.in_qparams
        s_out, zp_out, qmin, qmax, _ = region.out_qparams
        x = self.dequantize(self.codes(region), s_in, zp_in)
        y = evaluate_chain(region.ops, x)
        return self.quantize(y, s_out, zp_out, qmin, qmax).to(torch.int8)

    def emit(self, gm: torch.fx.GraphModule, region: Region, table: torch.Tensor) -> torch.fx.Node:
        return emit_table_op(gm, region, table, torch.ops.cortex_m.quantized_activation.default)


class Unsupported:
    """A flow with no table lowering yet: every region is left as it is and listed as skipped."""

    op_name = "-"

    def __init__(self, why: str) -> None:
        self.why = why

    def cannot_fuse(self, region: Region) -> str | None:
        return self.why


def backend_for(target: Any, options: Any) -> Any:
    if target.flow == "cortex_m":
        return CortexMLut()
    if target.flow == "ethos_u":
        from emlkit.passes.lut_ethos_u import EthosULut
        return EthosULut()
    return Unsupported(f"LUT fusion has no table lowering for {target.flow} yet; region left to the backend")


@declare("pre_edge", ("quantized_decomposed.dequantize_per_tensor", "aten pointwise ops",
                      "quantized_decomposed.quantize_per_tensor"), order=190, options={"lut_fusion": True})
class LutFusion(lut_fusion.LutFusion):
    """LUT fusion as the manager runs it: lut_fusion.LutFusion with this module's backend per target."""

    @classmethod
    def create(cls, opts: Any, allow_float: bool) -> "LutFusion":
        return cls(choose_backend=backend_for)
