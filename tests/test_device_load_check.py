"""The compile-time check that the device will accept a program is the firmware's own load, run on the host
(emlkit.hostfw.load_check, emlkit.verify.check_device_load): programs made out of range the way a broken
lowering would make them are refused with the adapter's message, the node that produced the call and the
documented exit status; a good program loads; compile writes nothing when the load is refused."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any, Callable

import pytest
import torch
from executorch.exir import ExecutorchBackendConfig

from emlkit import emit, hostfw, verify
from emlkit.compile import make_options
from emlkit.errors import EXIT_INTERNAL, EXIT_UNSUPPORTED, AotError
from emlkit.lower import cortex_m
from emlkit.targets import get_target

pytestmark = pytest.mark.skipif(hostfw.cmake_binary() is None, reason="needs cmake and a host C compiler")


def _lowered(model: torch.nn.Module, x: tuple[torch.Tensor, ...], opts: Any = None) -> tuple[Any, list[torch.Tensor]]:
    torch.manual_seed(0)
    low = cortex_m.lower(model.eval(), x, [x], get_target("cortex-m55"), opts or make_options())
    out = low.edge.exported_program().module()(*x)
    return low, list(out) if isinstance(out, (tuple, list)) else [out]


def _load(low: Any, x: tuple[torch.Tensor, ...], expected: list[torch.Tensor],
          tamper: Callable[[Any], None] | None = None) -> None:
    """Emit, bundle and load with the firmware; `tamper` may damage the emitted program first."""
    program = low.edge.to_executorch(config=ExecutorchBackendConfig(extract_delegate_segments=False))
    bundled = emit.bundle(program, [(x, expected)])
    if tamper is not None:  # the manager keeps its serialised bytes: serialise the damaged program anew
        from executorch.devtools.bundled_program.core import BundledProgram
        from executorch.exir._serialize._program import PTEFile, serialize_pte_binary

        tamper(program.executorch_program)
        with tempfile.TemporaryDirectory() as d:
            pte = Path(d) / "damaged.pte"
            pte.write_bytes(bytes(serialize_pte_binary(PTEFile(program.executorch_program, None, None))))
            data = emit.bpte_bytes(BundledProgram(None, bundled.method_test_suites, pte_file_path=str(pte)))
    else:
        data = emit.bpte_bytes(bundled)
    verify.check_device_load(program, data, "cortex-m55")


def _node(low: Any, pred: Callable[[str], bool]) -> torch.fx.Node:
    ep = low.edge.exported_program()
    return next(n for n in ep.graph.nodes if n.op == "call_function" and pred(str(n.target)))


def _constant(low: Any, node_arg: torch.fx.Node) -> torch.Tensor:
    ep = low.edge.exported_program()
    spec = next(s for s in ep.graph_signature.input_specs if s.arg.name == node_arg.name)
    return ep.constants[spec.target] if spec.target in ep.constants else ep.state_dict[spec.target]


class ConvSoftmax(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.conv(x).flatten(1), dim=-1)


def _cortex_m_softmax_program() -> tuple[Any, tuple[torch.Tensor, ...], list[torch.Tensor]]:
    # ExecuTorch's own softmax (cortex_m::softmax, output zero point fixed at -128): without the passes that
    # give softmax its own output qparams and lower it to emlkit::softmax.
    opts = make_options()
    opts.quantizer_hooks = [p for p in opts.quantizer_hooks if type(p).__name__ != "OwnOutputQparams"]
    opts.pre_edge_passes = [p for p in opts.pre_edge_passes if type(p).__name__ not in ("EmlkitSoftmax", "EmlkitAvgPool")]
    x = (torch.randn(1, 3, 6, 6),)
    low, out = _lowered(ConvSoftmax(), x, opts)
    return low, x, out


def test_a_good_program_loads() -> None:
    low, x, out = _cortex_m_softmax_program()
    _load(low, x, out)


def test_adapter_refusals_name_the_node_and_the_reason() -> None:
    low, x, out = _cortex_m_softmax_program()
    sm = _node(low, lambda t: "softmax" in t)
    sm.update_arg(3, -127)
    with pytest.raises(AotError) as err:
        _load(low, x, out)
    assert err.value.exit_code == EXIT_UNSUPPORTED
    msg = str(err.value)
    assert msg.startswith(f"the firmware would refuse the program for cortex-m55 at load: node {sm.name} at "), msg
    assert "cortex_m::softmax: output_zero_point must be -128 (output scale 1/256), got -127" in msg
    assert "instruction " not in msg       # the node replaces the chain position

    low, x, out = _cortex_m_softmax_program()     # a program is emitted once: lower it again
    conv = _node(low, lambda t: "quantized_conv2d" in t)
    shifts = _constant(low, conv.args[9])
    assert shifts.dtype == torch.int32
    shifts[0] = 40
    with pytest.raises(AotError, match=re.escape("cortex_m::quantized_conv2d: per-channel multiplier ")):
        _load(low, x, out)


def test_emlkit_op_refusals() -> None:
    x = (torch.randn(1, 8),)
    low, out = _lowered(torch.nn.Sequential(torch.nn.Linear(8, 10), torch.nn.Softmax(dim=-1)), x)
    sm = _node(low, lambda t: "emlkit" in t and "softmax" in t)
    sm.update_arg(5, 63)
    with pytest.raises(AotError, match=re.escape("emlkit::softmax: shift = 63 is outside the supported range [1, 62]")):
        _load(low, x, out)
    low, out = _lowered(torch.nn.Sequential(torch.nn.Linear(8, 10), torch.nn.Softmax(dim=-1)), x)
    sm = _node(low, lambda t: "emlkit" in t and "softmax" in t)
    _constant(low, sm.args[1])[3] = -1
    with pytest.raises(AotError, match=re.escape("emlkit::softmax: ")) as err:
        _load(low, x, out)
    assert err.value.exit_code == EXIT_UNSUPPORTED


def test_log_softmax_refusals() -> None:
    """emlkit::log_softmax's prepare: exp_table[0] must be exactly 2^22 (the log's offset) and the input step in
    log2 units within [1, 2^23] (the int64 bound of its requantization)."""
    x = (torch.randn(1, 8),)
    model = torch.nn.Sequential(torch.nn.Linear(8, 10), torch.nn.LogSoftmax(dim=-1))
    low, out = _lowered(model, x)
    _constant(low, _node(low, lambda t: "emlkit" in t and "log_softmax" in t).args[1])[0] = (1 << 22) - 1
    with pytest.raises(AotError, match=re.escape("emlkit::log_softmax: exp_table[0] = 4194303 must be 2^22")):
        _load(low, x, out)
    low, out = _lowered(model, x)
    _node(low, lambda t: "emlkit" in t and "log_softmax" in t).update_arg(3, (1 << 23) + 1)
    with pytest.raises(AotError, match=re.escape("emlkit::log_softmax: input_log2_scale = 8388609 is outside")):
        _load(low, x, out)


class _Masked(torch.nn.Module):
    """An attention over 4 tokens whose key padding mask comes from the input (emlkit::masked_softmax)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.att = torch.nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.att(x, x, x, key_padding_mask=x[..., -1] > 0.5, need_weights=False)[0]


@pytest.mark.parametrize("tamper, message", [
    (lambda low, n: n.update_arg(6, 63), "emlkit::masked_softmax: shift = 63 is outside the supported range [1, 62]"),
    (lambda low, n: _constant(low, n.args[2]).__setitem__(7, -1),
     "emlkit::masked_softmax: exp_table[7] = -1 must be in [0, 2^22]"),
])
def test_masked_softmax_refusals(tamper: Callable[[Any, torch.fx.Node], None], message: str) -> None:
    """emlkit::masked_softmax's prepare refuses arguments out of the kernel's range with one line naming them."""
    x = torch.randn(1, 4, 8)
    x[..., -1] = 0.0
    x[:, -1:, -1] = 1.0
    low, out = _lowered(_Masked(), (x,))
    node = _node(low, lambda t: "emlkit.masked_softmax" in t)
    tamper(low, node)
    with pytest.raises(AotError, match=re.escape(message)) as err:
        _load(low, (x,), out)
    assert err.value.exit_code == EXIT_UNSUPPORTED


class _Rnns(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm, self.gru = torch.nn.LSTM(4, 6, batch_first=True), torch.nn.GRU(4, 5, batch_first=True)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.lstm(x)[0], self.gru(x)[0]


@pytest.mark.parametrize("op, tamper, message", [
    ("lstm", lambda low, n: n.update_arg(9, 16), "emlkit::lstm: cell_frac_bits = 16 is outside the supported range "
     "[11, 15]"),
    ("lstm", lambda low, n: _constant(low, n.args[4]).__setitem__((0, 1), 0),
     "emlkit::lstm: requant multipliers must be in [2^30, 2^31) and shifts in [1, 62]"),
    ("lstm", lambda low, n: setattr(n, "args", (*n.args[:12], 0, None, n.args[0])),
     "emlkit::lstm: h0 and c0 must be given together, and not with state_bytes"),
    ("gru", lambda low, n: _constant(low, n.args[3]).__setitem__(2, 1 << 25),
     "emlkit::gru: bias must be int32 [4H] within +-2^24"),
    ("gru", lambda low, n: setattr(n, "args", (*n.args[:13], 8 + 5, n.args[0])),
     "emlkit::gru: h0 must not be given with state_bytes"),
    ("gru", lambda low, n: setattr(n, "args", (*n.args[:13], 0, n.args[0])),
     "emlkit::gru: h0 must be int8 with B * H elements"),
])
def test_recurrent_op_refusals(op: str, tamper: Callable[[Any, torch.fx.Node], None], message: str) -> None:
    """emlkit::lstm / emlkit::gru arguments out of the kernels' range are refused at compile time with the adapter's
    message, the one the Python reference raises for the same arguments."""
    x = (torch.randn(1, 5, 4),)
    torch.manual_seed(0)
    low, out = _lowered(_Rnns(), x)
    node = _node(low, lambda t: f"emlkit.{op}" in t)
    tamper(low, node)
    with pytest.raises(AotError, match=re.escape(message)) as err:
        _load(low, x, out)
    assert err.value.exit_code == EXIT_UNSUPPORTED
    if "cell_frac_bits" not in message and "h0" not in message:   # the reference's own check, same constants
        args = [_constant(low, a) if isinstance(a, torch.fx.Node) and a.op == "placeholder" and a is not node.args[0]
                else a for a in node.args]
        with pytest.raises(ValueError, match=re.escape(message)):
            getattr(torch.ops.emlkit, op)(torch.zeros(1, 5, 4, dtype=torch.int8), *args[1:])


def test_an_output_planned_over_its_input_is_an_internal_error() -> None:
    x = (torch.randn(1, 3, 8, 8),)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Conv2d(4, 4, 1))
    low, out = _lowered(model, x)
    _load(low, x, out)
    low, out = _lowered(model, x)

    def overlap(prog: Any) -> None:
        plan = prog.execution_plan[0]
        calls = [ins.instr_args.args for c in plan.chains for ins in c.instructions
                 if type(ins.instr_args).__name__ == "KernelCall" and "conv" in plan.operators[ins.instr_args.op_index].name]
        args = calls[-1]
        out_t, in_t = plan.values[args[-1]].val, plan.values[args[0]].val
        out_t.allocation_info = in_t.allocation_info

    with pytest.raises(AotError) as err:
        _load(low, x, out, overlap)
    assert err.value.exit_code == EXIT_INTERNAL
    assert "at load: corrupt program: instruction " in str(err.value)


def test_compile_writes_nothing_when_the_load_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A refused load leaves an earlier compile's files as they were (the check runs before anything is written)."""
    from emlkit.compile import compile_model

    res = compile_model("conv_relu", "cortex-m55", tmp_path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    monkeypatch.setattr(hostfw, "load_check", lambda bpte: hostfw.LoadRefusal(
        "INVALID_ARGUMENT", "instruction 0 (cortex_m::quantized_conv2d.out): refused for the test", 0))
    with pytest.raises(AotError, match="refused for the test"):
        compile_model("conv_relu", "cortex-m55", tmp_path, reuse_cache=False)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before
    assert res.bpte.is_file()


def test_no_host_firmware_is_one_line_and_exit_5(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Without a host C compiler (the host build fails) compile says so in one line, exit 5, no traceback."""
    from emlkit.errors import EXIT_SKIP

    def fail(*args: Any, **kwargs: Any) -> Path:
        raise hostfw.HostBuildError("cmake configure failed (cmake -S firmware):\nno C compiler found")

    monkeypatch.setattr(hostfw, "build_host_runner", fail)
    for call in (verify.firmware_ops, lambda: verify.check_device_load(None, b"", "cortex-m55")):
        with pytest.raises(AotError) as err:
            call()
        assert err.value.exit_code == EXIT_SKIP
        msg = str(err.value)
        assert "\n" not in msg and msg.startswith("cannot ") and "cmake configure failed (cmake -S firmware);" in msg
        assert msg.endswith("install a host C compiler and cmake (./scripts/setup.sh does)")
