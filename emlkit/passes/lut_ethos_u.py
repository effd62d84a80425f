"""Ethos-U lowering of fused LUT regions: `aot::table` before partitioning, TOSA TABLE inside the delegate.

Matches: the regions `emlkit.passes.lut_fusion` finds (backend-independent search).
Emits, in two steps:

1. On the converted pt2e graph (before to_edge), the region becomes
   `aot::table(x_q, T)` with T a constant buffer: int8 -> 256 int8 entries
   indexed by code + 128; int16 -> 513 int16 entries (TOSA's interpolated
   table). The op is registered as TOSA-supported, so the Arm partitioner
   puts it in the delegate like any quantized op.
2. Inside the Arm TOSA pipeline, a pass registered for every Arm pipeline with
   `register_pass_insertions_after(InsertTableOpsPass, ...)` turns each
   `aot::table` into `tosa.TABLE(x, T)`; for int16 also the RESCALE by 2**-7
   that takes TABLE's 23-bit output (16 integer + 7 fraction bits) back to int16.
   After, not before, InsertTableOpsPass: a region may read the output of an
   unfused sigmoid/tanh, whose traced dtype is float until that pass makes it a
   TABLE, and tosa.TABLE rejects a float input.

Table entries use the Arm backend's own arithmetic (quantized_decomposed
dequantize/quantize in float32: `(q - zp) * s`, `round_half_even(y * (1/s)) + zp`,
clamp), so a one-op int8 chain gives exactly the table Arm's InsertTableOpsPass
builds for that op. int16 entry i is the chain at the virtual code
-32768 + 128*i (i = 0..512; entry 512 is the right end point 32768 that TOSA
interpolates towards for codes 32640..32767).

int16: Vela 5.1's TOSA constraint list says TABLE is int8 only, but its
TOSA front end does compile int16 TABLE + RESCALE into one 16-bit LUT
(interpolating) activation, for Arm's own int16 tables and for ours alike, so
int16 regions are fused by default (target ethos-u55-128-a16w8). `EthosULut(int16=False)`
leaves them alone and lists them as skipped with the reason (for a backend that cannot take them).
tosa_reference_model runs our int16 TABLE + RESCALE exactly as `int16_table_lookup` says
(tests/passes/test_lut_ethos_u.py, all 65536 codes).

Not fused on Ethos-U (listed as skipped, with the reason): a lone scalar
add/sub/mul/div, neg or clamp/relu (one elementwise NPU op or a fused activation
already, so a table removes nothing), and int16 regions whose interpolated table
is more than one step off the exact chain on some code (kinks: clamp, relu...).
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from torch.library import Library, impl, register_fake

from emlkit.passes.lut_fusion import Region, emit_table_op, evaluate_chain, fill_undefined

log = logging.getLogger(__name__)

INT16_ENTRIES = 513
INT16_FRAC_BITS = 7          # TOSA TABLE int16: index = (x + 32768) >> 7, 7 fraction bits

_lib = Library("aot", "DEF")
_lib.define("table(Tensor x, Tensor table) -> Tensor")


def int16_table_lookup(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """TOSA TABLE int16 followed by RESCALE(2**-7, SINGLE_ROUND): what the delegate computes.

    TABLE: v = (T[i] << 7) + (T[i+1] - T[i]) * frac with i = (x + 32768) >> 7, frac = (x + 32768) & 127.
    RESCALE by 2**-7 (multiplier 2**30, shift 37, single rounding) = floor((v + 64) / 128).
    """
    u = x.to(torch.int64) + 32768
    idx, frac = u >> INT16_FRAC_BITS, u & ((1 << INT16_FRAC_BITS) - 1)
    t = table.to(torch.int64)
    base, nxt = t[idx], t[torch.clamp(idx + 1, max=INT16_ENTRIES - 1)]
    v = (base << INT16_FRAC_BITS) + (nxt - base) * frac
    return ((v + (1 << (INT16_FRAC_BITS - 1))) >> INT16_FRAC_BITS).to(torch.int16)


@impl(_lib, "table", "CompositeExplicitAutograd")  # type: ignore[misc]
def _table_impl(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    if x.dtype == torch.int8 and table.numel() == 256:
        return table.flatten()[x.to(torch.int64) + 128]
    if x.dtype == torch.int16 and table.numel() == INT16_ENTRIES:
        return int16_table_lookup(x, table.flatten())
    raise ValueError(f"aot::table takes int8 codes with 256 entries or int16 codes with {INT16_ENTRIES} entries, "
                     f"got {x.dtype} codes and {table.numel()} entries")


@register_fake("aot::table")  # type: ignore[misc]
def _table_fake(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


# ---------------------------------------------------------------- table construction

def dequantize(codes: torch.Tensor, scale: float, zp: int) -> torch.Tensor:
    # quantized_decomposed.dequantize_per_tensor's arithmetic, on int64 codes (32768 does not fit int16).
    return (codes.to(torch.float32) - zp) * scale


def quantize(y: torch.Tensor, scale: float, zp: int, qmin: int, qmax: int) -> torch.Tensor:
    """quantized_decomposed.quantize_per_tensor's arithmetic; undefined (NaN) entries continue the nearest defined one."""
    inv = 1.0 / scale
    out = torch.clamp(torch.round(y.to(torch.float32) * inv) + zp, qmin, qmax)
    fill_undefined(out, torch.isnan(out))
    return out.to(torch.int64)


def table_codes(dtype: torch.dtype, qmin: int, qmax: int) -> torch.Tensor:
    """Input codes the table entries are computed at."""
    if dtype == torch.int8:
        # Codes outside [qmin, qmax] never occur; clamping keeps their entries defined (as Arm does).
        return torch.arange(-128, 128, dtype=torch.int64).clamp(qmin, qmax)
    return torch.arange(INT16_ENTRIES, dtype=torch.int64) * (1 << INT16_FRAC_BITS) - 32768


# Single ops the Arm backend lowers without a table, at least as cheaply: fusing them alone gains nothing.
_aten = torch.ops.aten
NATIVE_ALONE = {
    _aten.add.Tensor, _aten.add.Scalar, _aten.sub.Tensor, _aten.sub.Scalar, _aten.rsub.Scalar, _aten.mul.Tensor,
    _aten.mul.Scalar, _aten.div.Tensor, _aten.div.Scalar, _aten.neg.default, _aten.relu.default, _aten.relu6.default,
    _aten.hardtanh.default, _aten.clamp.default, _aten.clamp_min.default, _aten.clamp_max.default,
}
# An int16 table is accepted when interpolation keeps every code within this many steps of the exact chain.
INT16_MAX_STEPS = 1


def int16_interpolation_error(region: Region) -> int:
    """Largest |interpolated table - quantize(chain(dequantize(code)))| over every valid int16 input code, in steps."""
    s_in, zp_in, qmin_in, qmax_in, _ = region.in_qparams
    s_out, zp_out, qmin, qmax, _ = region.out_qparams
    codes = torch.arange(qmin_in, qmax_in + 1, dtype=torch.int64)
    exact = quantize(evaluate_chain(region.ops, dequantize(codes, s_in, zp_in)), s_out, zp_out, qmin, qmax)
    got = int16_table_lookup(codes, build_table(region)).to(torch.int64)
    return int((got - exact).abs().max())


def build_table(region: Region) -> torch.Tensor:
    s_in, zp_in, qmin_in, qmax_in, dtype = region.in_qparams
    s_out, zp_out, qmin, qmax, _ = region.out_qparams
    x = dequantize(table_codes(dtype, qmin_in, qmax_in), s_in, zp_in)
    y = evaluate_chain(region.ops, x)
    return quantize(y, s_out, zp_out, qmin, qmax).to(dtype)


class EthosULut:
    """Fused regions as `aot::table`, lowered to TOSA TABLE in the Arm pipeline."""

    name = "ethos_u"
    op_name = "tosa::TABLE"

    def __init__(self, int16: bool = True, int16_why_not: str = "", skip_native_alone: bool = True,
                 int16_max_steps: int | None = INT16_MAX_STEPS) -> None:
        self.int16 = int16
        self.skip_native_alone = skip_native_alone      # False/None below: tables for every region (tests)
        self.int16_max_steps = int16_max_steps
        self.int16_why_not = int16_why_not or "this Ethos-U flow takes int8 tables only; int16 region left to the Arm backend"
        install_arm_hooks()

    def cannot_fuse(self, region: Region) -> str | None:
        din, dout = region.in_qparams[4], region.out_qparams[4]
        if din != dout:
            return f"TOSA TABLE maps codes to codes of the same type (region is {din}->{dout}); region left as it is"
        if din == torch.int16 and not self.int16:
            return self.int16_why_not
        if din not in (torch.int8, torch.int16):
            return f"TOSA TABLE takes int8 or int16 codes (region is {din}); region left as it is"
        if self.skip_native_alone and len(region.ops) == 1 and region.ops[0].target in NATIVE_ALONE:
            # Measured (scripts/bench_lut.py): a lone scalar mul or clamp as a LUT pass is no cheaper on Vela.
            return (f"a lone {region.chain_names()[0]} is one elementwise NPU op (or a fused activation) already; "
                    "a table would not remove an op")
        if din == torch.int16 and self.int16_max_steps is not None:
            err = int16_interpolation_error(region)
            if err > self.int16_max_steps:
                return (f"the 513-entry int16 table interpolates linearly over 128 codes and is up to {err} steps "
                        f"off the exact chain here (kinks such as clamp/relu); region left to the Arm backend")
        return None

    def table_entries(self, region: Region) -> int:
        return 256 if region.in_qparams[4] == torch.int8 else INT16_ENTRIES

    def table(self, region: Region) -> torch.Tensor:
        return build_table(region)

    def emit(self, gm: torch.fx.GraphModule, region: Region, table: torch.Tensor) -> torch.fx.Node:
        return emit_table_op(gm, region, table, torch.ops.aot.table.default)


# ---------------------------------------------------------------- Arm backend hooks

_installed = False


def install_arm_hooks() -> None:
    """Make `aot::table` delegable and lowered to TOSA TABLE in every Arm pipeline (idempotent)."""
    global _installed
    if _installed:
        return
    from executorch.backends.arm._passes.arm_pass import ArmPass
    from executorch.backends.arm._passes.arm_pass_manager import register_pass_insertions_after
    from executorch.backends.arm._passes.arm_pass_utils import create_node
    from executorch.backends.arm._passes.insert_table_ops import InsertTableOpsPass
    from executorch.backends.arm.operator_support.tosa_supported_operators import (
        SupportedTOSAOperatorCheck,
        register_tosa_support_check,
    )
    from executorch.backends.arm.tosa import TosaSpecification
    from executorch.exir.dialects._ops import ops as exir_ops
    from executorch.exir.pass_base import PassResult

    edge_table = exir_ops.edge.aot.table.default

    @register_tosa_support_check
    class AotTableSupported(SupportedTOSAOperatorCheck):
        """aot::table is a TOSA TABLE: int8 everywhere, int16 where the spec has the int16 extension."""

        targets = [edge_table]
        tosa_specs = TosaSpecification.all_versions_for_profile("INT")

        def is_node_tosa_supported(self, node: torch.fx.Node, tosa_spec: TosaSpecification) -> bool:
            x = node.args[0]
            dtype = x.meta["val"].dtype if isinstance(x, torch.fx.Node) and "val" in x.meta else None
            if dtype == torch.int8:
                return True
            if dtype == torch.int16 and tosa_spec.support_extension("int16"):
                return True
            self.reporter.report_reject(node, f"aot::table on {dtype} codes needs int8, or int16 with the int16 extension")
            return False

    class AotTableToTosaPass(ArmPass):
        """aot::table(x, T) -> tosa.TABLE(x, T) [-> tosa.RESCALE(2**-7) for int16]."""

        _passes_required_after: set[Any] = set()

        def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
            modified = False
            for node in list(graph_module.graph.nodes):
                if node.op != "call_function" or node.target != edge_table:
                    continue
                x, table = node.args
                with graph_module.graph.inserting_before(node):
                    out = create_node(graph_module.graph, exir_ops.backend.tosa.TABLE.default, args=(x, table),
                                      from_node=node)
                    if table.meta["val"].dtype == torch.int16:   # the table's type says which TABLE it is
                        out = create_node(graph_module.graph, exir_ops.backend.tosa.RESCALE.default,
                                          args=(out, torch.int16, [2.0 ** -INT16_FRAC_BITS], 0, 0), from_node=node)
                node.replace_all_uses_with(out)
                graph_module.graph.erase_node(node)
                modified = True
            if modified:
                # Retrace so the new nodes get their fake tensors (TABLE int16 -> int32).
                graph_module = super().call(graph_module).graph_module
                graph_module.recompile()
            return PassResult(graph_module, modified)

    register_pass_insertions_after(InsertTableOpsPass, [AotTableToTosaPass()])
    _installed = True
