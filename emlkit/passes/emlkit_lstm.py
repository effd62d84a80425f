"""Lowering (Cortex-M and int8 Ethos-U, converted pt2e graph): a quantized LSTM layer -> `emlkit::lstm` (int8, int16 cell state), a
quantized GRU layer -> `emlkit::gru`.

Matches `dequantize(x_q, s_x, zp_x) -> aten.lstm.input -> getitem 0 -> quantize(s_h, zp_h)`, int8 per-tensor, the
forms lstm_output_qparams.py annotates (graph.lstm_layer: one unidirectional layer, batch_first either way, any
sequence length, zero initial state or a given one, the sequence output and for an LSTM c_n read; lstm_as_layers.py
has split stacked and bidirectional layers, each reading its slice of a given state and giving its share of c_n,
turned cells into one-step layers and expressed h_n through the sequence output).

Emits `emlkit::lstm(x_q, w_ih, w_hh, bias, requant, tables, batch_first, zp_x, zp_h, K, M, T)` (semantics in
emlkit/emlkit_ops.py) and reads its first output. At compile time: W_ih and W_hh quantized to int8 per gate row
(symmetric, scale max|row| / 127), the gate requantization (M, T) per row for s_x * s_w * 2^12 and s_h * s_w * 2^12
(pre-activations in Q3.12), b_ih + b_hh in Q3.12, the 513-entry sigmoid/tanh tables, and h's requantization from
the Q0.30 product o * tanh(c) to s_h (the sequence output's qparams: h is fed back in those codes).

Cell state: int16 with K = 15 - B fraction bits, B = min(ceil(log2 T), 4). |c_t| < t + 1 for any weights (c_t =
f c_{t-1} + i g with f, i, |g| < 1 and c_{-1} = 0), so up to T = 16 steps the cell can never saturate; longer
sequences keep 4 integer bits (|c| < 16, where tanh(c) is 1 to within 2^-45) and saturate beyond. A fixed rule,
not a calibrated range, so the program does not depend on the calibration set reaching the largest cell values.
A read c_n is that cell, the op's second output, dequantized at scale 2^-K (int16, zero point 0) and unsqueezed to
nn.LSTM's [1, B, H]: 41.0-43.8 dB SNR against the float model in the tests.
c_n read alone (no sequence output, no h_n): convert drops the unread sequence output's quantize, so nothing
observes h; the op is placed where c_n is read, its h codes fixed at graph.H_ALONE_QPARAMS (scale 1/128, zero point
0: h = o * tanh(c) is in (-1, 1)) and a given h0 quantized to them (lstm_output_qparams.py).

Given state: an LSTM's (h0, c0) and a GRU's h0 that are the model's inputs, constants (rnn_state_constants.py folds
fills and arithmetic on buffers into them) or computed from the inputs, or slices and views of those ([1, B, H]
each: a stacked layer's slice, a cell's unsqueezed state) become the op's h0 (and c0): h0 the int8 codes of the
dequantize lstm_output_qparams.py put on its edge (h's qparams, which the sequence output shares; a constant h0's
codes are folded at compile time), c0 quantized to the int16 cell at 2^-K in the program (float up to there from an
input or a constant; a computed c0 arrives as int8 codes first), and K = 11 (a given c0 bounds no cell value, so the
long-sequence rule). y 35.6-41.3 dB, c_n 40.3-45.3 dB and h_n 32.6-40.3 dB SNR against the float model in the tests
with h0 in (-1, 1), stacked, bidirectional and cells included. A state computed on the device from constants alone
(without rnn_state_constants.py) stays float; --streaming-state refuses a given state (a stream starts from its kept
state) with one line.

Accuracy (random weights, tests/passes/test_emlkit_lstm.py): the sequence output is 38.4-43.0 dB SNR against the
float model over five shapes (1 to 40 steps), within 2.6 dB of the program where the LSTM ran in float between
quantize and dequantize; the test holds it above 35 dB and within 3 dB. Bit-exact on the device
(tests/test_lstm_on_qemu.py).

GRU: `dequantize -> aten.gru.input -> getitem 0 -> quantize` (one unidirectional layer, zero or given initial state,
the sequence output read) becomes `emlkit::gru(x_q, w_ih, w_hh, bias, requant, tables, batch_first, zp_x, zp_h, Mq,
Tq, M, T)` the same way: r and z from both biases, n's hidden part with b_hn scaled by r, h_{t-1} to Q0.15 by (Mq,
Tq), h = (1 - z) n + z h_{t-1} in Q0.30 requantized to s_h (37.8-41.0 dB SNR against the float model in the tests,
within 2.2 dB of the program with the GRU in float).

Streaming (--streaming-state, LowerOptions.streaming_state): each op gets state_bytes = lstm_state_bytes(B, H)
(gru_state_bytes): the firmware keeps its last h codes and c in that much per-call runtime memory across executions
and starts the next from them (eml_reset_state zeroes them), and the cell format is K = 11 whatever T, the
long-sequence rule, since a stream has no length: a program over one frame then computes, call after call, exactly
what the same model over N frames computes in one call (same qparams: calibration runs the samples as one stream,
emlkit/lower/export.py). An LSTM or GRU this pass cannot lower is refused then (in float it would not keep state).

Why: ExecuTorch 1.5.1's Cortex-M flow has no LSTM or GRU: they ran in float, unrolled into 30-40 float ops a step.
On Ethos-U, Arm's quantizer unrolled them into some 56 NPU ops a step, which ExecuTorch's passes then took minutes
to lower (issue 30: an LSTM(16, 32) over 10 steps, 560 delegated ops, 233 s to compile; Vela's estimate 113,288
cycles); on the CPU it compiles in 3.1 s and runs in 162,650 M55 instructions, in a program of 14,980 bytes instead
of 57,776 (lstm_output_qparams.py keeps the layer whole through Arm's transform; the report's layer_placement says
where each layer runs).
"""

from __future__ import annotations

import logging
import math
import operator
from typing import Any

import torch

import emlkit.emlkit_ops as eo
from emlkit.errors import EXIT_UNSUPPORTED, AotError
from emlkit.passes.graph import (DQ_TARGETS, GRU_OPS, H_ALONE_QPARAMS, LSTM_OPS, Q_TARGETS, add_parameter, copy_meta,
                                 get_attrs, lstm_layer, per_tensor_qparams, qparams, shape_of)
from emlkit.passes.manager import Pass, declare
from emlkit.verify import source_line

log = logging.getLogger(__name__)
MAX_CELL_INT_BITS = 4


def cell_frac_bits(steps: int) -> int:
    """K for a sequence of STEPS: 15 - min(ceil(log2 steps), 4)."""
    bits = min(max(math.ceil(math.log2(steps)), 0), MAX_CELL_INT_BITS) if steps > 1 else 0
    return 15 - bits


def quantize_rows(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(int8 codes, float64 per-row scales): symmetric per row, an all-zero row at scale 1."""
    amax = w.abs().amax(dim=1)
    scale = torch.where(amax > 0, amax / 127.0, torch.ones_like(amax))
    return torch.round(w / scale.unsqueeze(1)).clamp(-127, 127).to(torch.int8), scale


def _int8_q(node: Any) -> bool:
    return (isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target in Q_TARGETS
            and per_tensor_qparams(node) and qparams(node)[4] == torch.int8 and qparams(node)[2:4] == (-128, 127))


def lstm_constants(w_ih: torch.Tensor, w_hh: torch.Tensor, bias: torch.Tensor | None, s_x: float,
                   s_h: float) -> dict[str, Any] | None:
    """The op's constant operands for float64 weights and the input/output scales; None if a factor is out of the
    requantization's range."""
    qi, si = quantize_rows(w_ih)
    qh, sh = quantize_rows(w_hh)
    rows = []
    try:
        for r in range(w_ih.shape[0]):
            mx, tx = eo.multiplier_shift(s_x * float(si[r]) * (1 << eo.LSTM_GATE_FRAC))
            mh, th = eo.multiplier_shift(s_h * float(sh[r]) * (1 << eo.LSTM_GATE_FRAC))
            rows.append((mx, tx, mh, th))
        mult, shift = eo.multiplier_shift(2.0 ** -30 / s_h)
    except ValueError:
        return None
    if not all(1 <= t <= 62 for r in rows for t in (r[1], r[3])) or not 1 <= shift <= 62:
        return None
    b = bias if bias is not None else torch.zeros(w_ih.shape[0], dtype=torch.float64)
    return {"w_ih": qi, "w_hh": qh, "bias": _q12(b), "requant": torch.tensor(rows, dtype=torch.int32),
            "tables": eo.lstm_tables(), "mult": mult, "shift": shift}


def _q12(b: torch.Tensor) -> torch.Tensor:
    return torch.round(b * (1 << eo.LSTM_GATE_FRAC)).clamp(-eo.LSTM_MAX_BIAS, eo.LSTM_MAX_BIAS).to(torch.int32)


def gru_constants(w_ih: torch.Tensor, w_hh: torch.Tensor, bias: torch.Tensor | None, s_x: float,
                  s_h: float) -> dict[str, Any] | None:
    """emlkit::gru's constant operands (bias: [b_ih; b_hh] as [2, 3H] or None); None if a factor is out of range."""
    c = lstm_constants(w_ih, w_hh, None, s_x, s_h)
    try:
        hm, hs = eo.multiplier_shift(s_h * (1 << 15))
    except ValueError:
        return None
    if c is None or not 1 <= hs <= 62:
        return None
    hid = w_hh.shape[1]
    b = bias if bias is not None else torch.zeros(2, 3 * hid, dtype=torch.float64)
    # r and z add both biases before the gate; n adds b_hn to the hidden part, which r scales
    x_side = torch.cat([b[0, :2 * hid] + b[1, :2 * hid], b[0, 2 * hid:]])
    c["bias"] = _q12(torch.cat([x_side, b[1, 2 * hid:]]))
    c["h_mult"], c["h_shift"] = hm, hs
    return c


@declare("pre_edge", ("aten.lstm", "aten.gru"), runs_after=("LutFusion",), order=213, bits=("int8",))
class EmlkitLstm(Pass):
    """Pre-edge pass (LowerOptions.pre_edge_passes), int8 targets (Cortex-M, and Ethos-U's CPU side)."""

    def __init__(self, streaming: bool = False) -> None:
        self.lowered: list[dict[str, Any]] = []
        self.streaming = streaming

    @classmethod
    def create(cls, opts: Any, allow_float: bool) -> "EmlkitLstm":
        return cls(streaming=bool(getattr(opts, "streaming_state", False)))

    def report(self) -> dict[str, Any]:
        return {"lowered": list(self.lowered)}

    def reset(self) -> None:
        self.lowered = []

    def work(self, gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
        for n in [n for n in gm.graph.nodes if n.op == "call_function" and n.target in (LSTM_OPS | GRU_OPS)]:
            entry = self._lower(gm, n)
            if entry is not None:
                self.lowered.append(entry)
            elif self.streaming:
                kind = "GRU" if n.target in GRU_OPS else "LSTM"
                layer = lstm_layer(gm, n)
                if layer is not None and layer.state is not None:
                    raise AotError(f"--streaming-state: the {kind} {n.name} ({source_line(n)}) is given an initial "
                                   f"state, but a streaming program starts each call from the state the previous "
                                   f"call left: drop the initial state or compile without --streaming-state",
                                   EXIT_UNSUPPORTED)
                raise AotError(f"--streaming-state: the {kind} {n.name} ({source_line(n)}) has no int8 kernel here "
                               f"(run -v for why: e.g. a projection (proj_size), or its input or output not "
                               f"int8), and in float it would not "
                               f"keep its state: make it a plain nn.{kind} whose output is quantized, or compile "
                               f"without --streaming-state", EXIT_UNSUPPORTED)
        if self.lowered:
            gm.graph.eliminate_dead_code()
            gm.graph.lint()
            gm.recompile()
        return gm

    def _lower(self, gm: torch.fx.GraphModule, n: torch.fx.Node) -> dict[str, Any] | None:
        layer = lstm_layer(gm, n)
        if layer is None:
            return None
        dq, out = layer.x, layer.output
        q = (next(iter(out.users)) if len(out.users) == 1 else None) if out is not None else None
        if not (dq.op == "call_function" and dq.target in DQ_TARGETS and per_tensor_qparams(dq)
                and qparams(dq)[4] == torch.int8 and (out is None or _int8_q(q))):
            log.debug("LSTM %s left in float: its input or output is not int8 per-tensor quantized", n.name)
            return None
        # c_n read alone: the new op goes where c_n is read, h's codes are fixed (graph.H_ALONE_QPARAMS)
        at = q if q is not None else layer.cell_out
        assert at is not None
        s_x, zp_x = qparams(dq)[:2]
        s_h, zp_h = qparams(q)[:2] if q is not None else H_ALONE_QPARAMS
        xs = shape_of(dq.args[0]) or shape_of(dq)
        if xs is None or len(xs) != 3:
            return None
        steps = int(xs[1] if layer.batch_first else xs[0])
        if max(layer.w_ih.shape[1], layer.w_hh.shape[1]) > eo.LSTM_MAX_FEATURES or steps < 1:
            log.info("LSTM %s left in float: sizes over %d or an empty sequence", n.name, eo.LSTM_MAX_FEATURES)
            return None
        consts = (gru_constants if layer.gru else lstm_constants)(layer.w_ih, layer.w_hh, layer.bias, s_x, s_h)
        if consts is None:
            log.info("LSTM %s left in float: a weight or output scale is outside the requantization's range", n.name)
            return None
        cell_out = layer.cell_out
        if cell_out is not None and q is not None and _used_before(cell_out, q):
            log.info("LSTM %s left in float: its c_n is read before its sequence output is quantized", n.name)
            return None
        state: tuple[Any, ...] = ()
        if layer.state is not None and (self.streaming or not _in_codes(layer.state[0], s_h, zp_h)):
            log.info("%s %s left in float: its given h0 is not in its output's int8 codes (or the program "
                     "streams its state)", "GRU" if layer.gru else "LSTM", n.name)
            return None
        # a given c0 bounds no cell value: the long-sequence format (4 integer bits) whatever T
        k = 15 - MAX_CELL_INT_BITS if self.streaming or layer.state is not None else cell_frac_bits(steps)
        batch = int(xs[0] if layer.batch_first else xs[1])
        hid = int(layer.w_hh.shape[1])
        state_bytes = ((eo.gru_state_bytes if layer.gru else eo.lstm_state_bytes)(batch, hid) if self.streaming
                       else 0)
        names = [add_parameter(gm, f"{n.name}_{key}", consts[key])
                 for key in ("w_ih", "w_hh", "bias", "requant", "tables")]
        g = gm.graph
        y_val = out.meta.get("val") if out is not None else n.meta.get("val", (None,))[0]
        consts_nodes = get_attrs(gm, at, names, getattr(y_val, "fake_mode", None))
        with g.inserting_before(at):
            if layer.state is not None:          # h0 as its int8 codes; an LSTM's c0 quantized to the cell format
                state = (layer.state[0].args[0],) + tuple(
                    g.call_function(torch.ops.quantized_decomposed.quantize_per_tensor.default,
                                    (c0, 2.0 ** -k, 0, -32768, 32767, torch.int16)) for c0 in layer.state[1:])
            if layer.gru:
                new = y = g.call_function(torch.ops.emlkit.gru.default,
                                          (dq.args[0], *consts_nodes, int(layer.batch_first), zp_x, zp_h,
                                           consts["h_mult"], consts["h_shift"], consts["mult"], consts["shift"],
                                           state_bytes, *state))
            else:
                new = g.call_function(torch.ops.emlkit.lstm.default,
                                      (dq.args[0], *consts_nodes, int(layer.batch_first), zp_x, zp_h, k,
                                       consts["mult"], consts["shift"], state_bytes, *state))
                y = g.call_function(operator.getitem, (new, 0))
            cell_nodes = _cell_output(g, new, k) if cell_out is not None else []
        copy_meta(n, ([new, y] if new is not y else [new]) + cell_nodes + list(state[1:]))
        _set_values(y_val, batch, hid, new, y, state, cell_nodes)
        if q is not None:
            q.replace_all_uses_with(y)
        if cell_out is not None:
            cell_out.replace_all_uses_with(cell_nodes[-1])
        _erase_replaced(g, (*[d for d in (q, out) if d is not None], *list(n.users), n, dq,
                            *(layer.state or ())[:1]))
        return {"node": n.name, "kind": "gru" if layer.gru else "lstm", "steps": steps,
                "hidden": int(layer.w_hh.shape[1]), "batch_first": layer.batch_first,
                "cell_frac_bits": None if layer.gru else k, "in_scale": s_x, "out_scale": s_h,
                "state_bytes": state_bytes, "cell_out": cell_out is not None, "given_state": bool(state)}


def _in_codes(h0: torch.fx.Node, scale: float, zero_point: int) -> bool:
    """Whether the given h0 is a dequantize of int8 codes with the output's scale and zero point."""
    return (h0.op == "call_function" and h0.target in DQ_TARGETS and per_tensor_qparams(h0)
            and qparams(h0)[:2] == (scale, zero_point) and qparams(h0)[4] == torch.int8)


def _erase_replaced(g: torch.fx.Graph, nodes: tuple[torch.fx.Node, ...]) -> None:
    """The replaced nodes, in order (users before what they read), those no longer read."""
    for dead in nodes:
        if not dead.users and dead in g.nodes:
            g.erase_node(dead)


def _set_values(ov: Any, batch: int, hid: int, new: torch.fx.Node, y: torch.fx.Node,
                state: tuple[Any, ...], cell_nodes: list[torch.fx.Node]) -> None:
    """Value meta for the new nodes. convert_pt2e's quantize nodes carry none: the LSTM's own output value OV gives
    y's shape, so a later layer reading y sees its shape (graph.shape_of)."""
    fake = getattr(ov, "fake_mode", None)
    if fake is None or not isinstance(ov, torch.Tensor):
        return
    with fake:
        cell = torch.empty((batch, hid), dtype=torch.int16)
        y.meta["val"] = torch.empty_like(ov, dtype=torch.int8)
        if new is not y:
            new.meta["val"] = (y.meta["val"], cell)
        if len(state) > 1:
            state[1].meta["val"] = torch.empty((1, *cell.shape), dtype=torch.int16)
        if cell_nodes:
            cell_nodes[0].meta["val"] = cell
            cell_nodes[1].meta["val"] = torch.empty(cell.shape, dtype=torch.float32)
            cell_nodes[2].meta["val"] = torch.empty((1, *cell.shape), dtype=torch.float32)


def _used_before(node: torch.fx.Node, q: torch.fx.Node) -> bool:
    """Whether a user of NODE comes before Q in the graph (the cell output is built where Q is)."""
    order = {m: i for i, m in enumerate(node.graph.nodes)}
    return any(order[u] < order[q] for u in node.users)


def _cell_output(g: torch.fx.Graph, new: torch.fx.Node, k: int) -> list[torch.fx.Node]:
    """c_n as nn.LSTM returns it, float [1, B, H], from the op's int16 cell (real c * 2^-K): getitem, dequantize,
    unsqueeze."""
    cell = g.call_function(operator.getitem, (new, 1))
    real = g.call_function(torch.ops.quantized_decomposed.dequantize_per_tensor.default,
                           (cell, 2.0 ** -k, 0, -32768, 32767, torch.int16))
    return [cell, real, g.call_function(torch.ops.aten.unsqueeze.default, (real, 0))]
