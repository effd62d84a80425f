"""Host execution of a lowered program: what the device must reproduce exactly.

Non-delegated ops run through their registered implementations (for cortex_m::
ops these are ExecuTorch's Python references, which mirror CMSIS-NN's integer
arithmetic). Ethos-U delegates run as TOSA graphs on `tosa_reference_model`,
which Vela-compiled command streams should match bit for bit (emlkit/npu/compile_check.py checks that).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch

import emlkit.emlkit_ops  # noqa: F401  (registers emlkit:: ops, which lowered programs may call)
from emlkit.errors import EXIT_INTERNAL, EXIT_UNSUPPORTED, AotError
from emlkit import exact_int_conv
from emlkit.native_output import stdout_to_log

log = logging.getLogger(__name__)


def _dim_order(t: torch.Tensor) -> tuple[int, ...]:
    try:
        return tuple(t.dim_order())
    except Exception:  # ambiguous strides (size-1 dims): contiguous is as good as any
        return tuple(range(t.dim()))


def tensor_to_numpy(t: torch.Tensor) -> np.ndarray:
    """Tensor -> numpy array laid out in the tensor's dim order (how TOSA sees it)."""
    return t.permute(_dim_order(t)).contiguous().numpy()


def numpy_to_tensor(a: np.ndarray, like: torch.Tensor) -> torch.Tensor:
    order = _dim_order(like)
    t = torch.from_numpy(np.ascontiguousarray(a)).reshape([like.shape[d] for d in order])
    inverse = [order.index(i) for i in range(len(order))]
    return t.permute(inverse).to(like.dtype)


def run_tosa(tosa: bytes, inputs: Sequence[torch.Tensor], like_outputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    import tosa_reference_model as ref  # type: ignore[import-not-found]

    with stdout_to_log(log, "tosa_reference_model"):
        try:
            outs, status = ref.run(tosa, [tensor_to_numpy(t) for t in inputs], verbosity="NONE",
                                   initialize_variable_tensor_from_numpy=True)
        except ValueError as exc:  # its inputs do not match the graph's (seen: a lone fill with no input)
            raise AotError(f"an NPU partition's TOSA graph does not take the {len(inputs)} input(s) its delegate call "
                           f"passes ({exc}): ExecuTorch 1.5.1 partitioned an op group the NPU cannot be called with; "
                           "compile for a cortex-m target", EXIT_UNSUPPORTED) from exc
    if status != ref.GraphStatus.TOSA_VALID:
        raise AotError(f"tosa_reference_model rejected a delegated TOSA graph (status {status})", EXIT_INTERNAL)
    return [numpy_to_tensor(o, l) for o, l in zip(outs, like_outputs)]


@dataclass
class DelegateIO:
    """One delegate call of a reference run: its name, the tensors it was given and TOSA's outputs."""

    name: str
    inputs: list[torch.Tensor]
    outputs: list[torch.Tensor]


# Ops that only pick or order elements, which torch's CPU kernels refuse on small integer types
# (max_pool2d_with_indices on int8 codes: "input_depth * input_height * input_width <= max of integer_t").
ORDER_OPS_ON_CODES = frozenset({"aten::max_pool2d_with_indices", "aten::adaptive_max_pool2d"})


def _on_codes(target: Any, args: Any, kwargs: Any) -> Any:
    """Run an element-picking op on integer codes in float32, which holds every int8/int16 code exactly."""
    x = args[0]
    if not isinstance(x, torch.Tensor) or x.dtype.is_floating_point:
        return target(*args, **kwargs)
    out = target(x.to(torch.float32), *args[1:], **kwargs)
    if isinstance(out, tuple):
        return (out[0].to(x.dtype), *out[1:])
    return out.to(x.dtype)


StreamState = dict[str, list[torch.Tensor]]


def _streaming_rnn(target: Any, args: Any, kwargs: Any, key: str, stream: StreamState) -> Any:
    """emlkit::lstm / gru with state_bytes set, as the firmware runs it (emlkit_lstm_ops.c): from the state the
    call's previous execution left in STREAM[KEY] (none: zero), which it replaces; None for any other call."""
    from emlkit import emlkit_ops as eo

    name = str(getattr(getattr(target, "_schema", None), "name", ""))
    if name not in ("emlkit::lstm", "emlkit::gru") or kwargs or len(args) < (13 if name == "emlkit::lstm" else 14):
        return None
    gru = name == "emlkit::gru"
    if not args[13 if gru else 12]:        # state_bytes (a given h0/c0 follows it, never with it)
        return None
    x, batch_first = args[0], args[6]
    prev = stream.get(key)
    if gru:
        y = eo.gru_reference(*args, h0=prev[0] if prev else None)
        out: Any = y
        kept = []
    else:
        y, c = eo.lstm_reference(*args, h0=prev[0] if prev else None, c0=prev[1] if prev else None)
        out, kept = (y, c), [c]
    if x.shape[1 if batch_first else 0] > 0:
        last = y[:, -1] if batch_first else y[-1]
        stream[key] = [last.contiguous(), *kept]
    return out


class _Interpreter(torch.fx.Interpreter):
    def __init__(self, gm: torch.fx.GraphModule, tosa_graphs: dict[str, bytes],
                 capture: dict[str, Any] | None = None, stream: StreamState | None = None) -> None:
        super().__init__(gm)
        self.tosa_graphs = tosa_graphs
        self.delegate_io: list[DelegateIO] = []
        self.capture = capture
        self.stream = stream

    def call_function(self, target: Any, args: Any, kwargs: Any) -> Any:
        if target is torch.ops.higher_order.executorch_call_delegate:
            lowered, *operands = args
            name = next(k for k, v in self.module.named_children() if v is lowered)
            if name not in self.tosa_graphs:
                raise AotError(f"no TOSA graph recorded for delegate {name}", EXIT_INTERNAL)
            node = self._current
            vals = node.meta.get("val")
            like = list(vals) if isinstance(vals, (tuple, list)) else [vals]
            outs = run_tosa(self.tosa_graphs[name], operands, like)
            self.delegate_io.append(DelegateIO(name, list(operands), outs))
            return tuple(outs)
        if self.stream is not None:
            kept = _streaming_rnn(target, args, kwargs, self._current.name, self.stream)
            if kept is not None:
                return kept
        # What torch.fx.Interpreter.call_function does, with dilated integer convolutions made computable.
        if str(getattr(getattr(target, "_schema", None), "name", "")) in ORDER_OPS_ON_CODES:
            return _on_codes(target, args, kwargs)
        return exact_int_conv.call(target, args, kwargs)

    def run_node(self, n: torch.fx.Node) -> Any:
        self._current = n
        try:
            out = super().run_node(n)
        except ValueError as exc:
            # an emlkit:: op refusing the program's input values (its definition in emlkit/emlkit_ops.py): the
            # device refuses them too; one line naming the op, where the model made it and why
            name = str(getattr(getattr(n.target, "_schema", None), "name", ""))
            if not name.startswith("emlkit::"):
                raise
            from emlkit.verify import source_line

            raise AotError(f"{name} at {source_line(n)} cannot run on these inputs: "
                           f"{str(exc).removeprefix(name + ': ')}", EXIT_UNSUPPORTED) from exc
        if self.capture is not None and n.op == "call_function":
            self.capture[n.name] = out
        return out


def delegate_names(gm: torch.fx.GraphModule) -> list[str]:
    return [n.target for n in gm.graph.nodes if n.op == "get_attr" and str(n.target).startswith("lowered_module")]


def run_graph(gm: torch.fx.GraphModule, inputs: tuple[torch.Tensor, ...]) -> Any:
    """GM (a graph without delegates, e.g. the quantized model after our passes) run as the host reference runs
    a program's ops: element-picking ops on int8 codes included, which torch's own call refuses."""
    return _Interpreter(gm, {}).run(*inputs)


def run_lowered(edge: Any, inputs: tuple[torch.Tensor, ...], tosa_by_delegate: dict[str, bytes] | None = None,
                delegate_io: list[DelegateIO] | None = None,
                capture: dict[str, Any] | None = None, stream: StreamState | None = None) -> list[torch.Tensor]:
    """Execute the edge program on the host; returns its outputs as a flat list.

    With delegate_io, every delegate call (run on tosa_reference_model) is appended to it; with capture, every
    operator node's output, by node name. With stream (a dict, empty for a freshly loaded program), the state each
    streaming LSTM/GRU keeps (--streaming-state) is read from it and left in it: calls of run_lowered with the same
    dict are the device's executions in sequence without a reset; without it every execution starts from zero."""
    ep = edge.exported_program()
    interp = _Interpreter(ep.graph_module, tosa_by_delegate or {}, capture, stream)
    # Lifted constants/params are placeholders of the graph module: feed them in signature order.
    state = {**ep.state_dict, **ep.constants}
    args: list[Any] = []
    user = iter(inputs)
    for spec in ep.graph_signature.input_specs:
        args.append(state[spec.target] if spec.target is not None and spec.kind.name != "USER_INPUT" else next(user))
    try:
        out = interp.run(*args)
    except AotError as exc:  # torch.fx appended the node and its traceback to the one line
        raise AotError(str(exc).splitlines()[0], exc.exit_code) from exc
    if delegate_io is not None:
        delegate_io.extend(interp.delegate_io)
    if isinstance(out, torch.Tensor):
        return [out]
    return [o for o in out]
