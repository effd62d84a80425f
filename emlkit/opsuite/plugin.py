"""pytest plugin for `emlkit opsuite` capture, loaded with `-p emlkit.opsuite.plugin` on ExecuTorch's operator
suite (run with --noconftest, so the suite's own conftest and its fixed flow list stay out).

It gives the suite's tests their `test_runner` fixture, parametrized over one emlkit TestFlow per target. The
runner hands every case to the suite's own `runner.run_test`, so the suite's eager check (a case PyTorch itself
cannot run is skipped there) applies; our flow's `tester_factory` then records the model and inputs by raising
`Captured`, which ends that case inside run_test. Nothing of the suite is patched.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch

FLOW_PREFIX = "emlkit_"


class Captured(Exception):
    """Raised by our tester_factory: the case's model and inputs, caught by run_test as the case's error."""

    def __init__(self, model: torch.nn.Module, inputs: Any) -> None:
        super().__init__("captured by emlkit opsuite")
        self.model, self.inputs = model, inputs


def _capture_factory(model: torch.nn.Module, inputs: Any, **_: Any) -> Any:
    raise Captured(model, inputs)


def flow_name(target: str) -> str:
    return FLOW_PREFIX + target.replace("-", "_")


def make_flow(target: str) -> Any:
    from executorch.backends.test.suite.flow import TestFlow

    return TestFlow(flow_name(target), backend="emlkit", tester_factory=_capture_factory)


@dataclass
class Record:
    """One call of lower_and_run_model: a case (model + inputs) or why the suite's eager check refused it."""

    file: str            # operator file, e.g. test_relu.py
    test: str            # test name without the flow, e.g. test_relu_dtype[float32]
    subtest: int
    flow: str
    model: torch.nn.Module | None = None
    inputs: tuple[Any, ...] = ()
    invalid: str = ""    # the eager run's error: the suite case itself is broken

    @property
    def case_id(self) -> str:
        return f"{self.file}::{self.test}" + (f"#{self.subtest}" if self.subtest else "")


@dataclass
class Sink:
    """What a capture run collected (set as SINK before pytest.main)."""

    targets: list[str]
    records: list[Record] = field(default_factory=list)
    outcomes: dict[str, str] = field(default_factory=dict)   # nodeid -> passed / failed: <line> / skipped: <line>
    errors: list[str] = field(default_factory=list)          # collection errors


SINK: Sink | None = None


def _sink() -> Sink:
    if SINK is None:
        raise RuntimeError("emlkit.opsuite.plugin loaded without a capture sink (use emlkit.opsuite.capture)")
    return SINK


def _first_line(err: BaseException | None) -> str:
    if err is None:
        return "no error recorded"
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")


def seed_for(key: str) -> int:
    """A stable per-test seed (Python's hash is salted per process), so every flow, shard and machine sees the
    same weights and inputs for a case."""
    return int.from_bytes(hashlib.md5(key.encode()).digest()[:4], "little")


class CaptureRunner:
    """What the suite's tests call as `test_runner` (they read `_flow`, as with the suite's own TestRunner)."""

    def __init__(self, flow: Any, file: str, test: str, base_name: str) -> None:
        self._flow = flow
        self._file, self._test, self._base_name = file, test, base_name
        self._subtest = 0

    def lower_and_run_model(self, model: torch.nn.Module, inputs: Any, generate_random_test_inputs: bool = True,
                            dynamic_shapes: Any = None) -> None:
        from executorch.backends.test.suite.runner import run_test

        summary = run_test(model, inputs, self._flow, f"{self._file}::{self._test}", self._base_name, self._subtest,
                           None, dynamic_shapes=dynamic_shapes,
                           generate_random_test_inputs=generate_random_test_inputs)
        rec = Record(self._file, self._test, self._subtest, self._flow.name)
        if isinstance(summary.error, Captured):
            rec.model, rec.inputs = summary.error.model, tuple(summary.error.inputs)
        else:  # the suite's eager check: PyTorch cannot run the case as written
            rec.invalid = _first_line(summary.error)
        _sink().records.append(rec)
        self._subtest += 1


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "test_runner" in metafunc.fixturenames:
        flows = [make_flow(t) for t in _sink().targets]
        metafunc.parametrize("test_runner", flows, indirect=True, ids=str)


def _test_name(node: Any, flow: str) -> str:
    """The node's name with the flow's id taken out of its parameter id: the same case for every flow."""
    name = node.name
    if "[" not in name:
        return name
    base, params = name[:-1].split("[", 1)
    rest = [p for p in params.split("-") if p != flow]
    return f"{base}[{'-'.join(rest)}]" if rest else base


@pytest.fixture
def test_runner(request: pytest.FixtureRequest) -> CaptureRunner:
    flow = request.param
    file = request.node.path.name
    test = _test_name(request.node, flow.name)
    seed = seed_for(f"{file}::{test}")
    torch.manual_seed(seed)
    random.seed(seed)  # run_test draws its per-test seed from `random` when no suite session is active
    return CaptureRunner(flow, file, test, request.node.originalname)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    sink = _sink()
    if report.when == "call" or report.outcome != "passed":
        line = ""
        if isinstance(report.longrepr, tuple):  # a skip: (path, line, "Skipped: reason")
            line = ": " + str(report.longrepr[2]).removeprefix("Skipped: ")
        elif report.outcome != "passed":
            text = report.longreprtext.strip().splitlines()
            line = ": " + (text[-1] if text else "")
        sink.outcomes[report.nodeid] = report.outcome + line


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:
        text = report.longreprtext.strip().splitlines()
        _sink().errors.append(f"{report.nodeid}: {text[-1] if text else 'collection failed'}")
