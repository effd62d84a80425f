"""Model files for tests that compile a model of their own: the file convention of `python -m emlkit compile FILE.py`
(ModelUnderTest, ModelInputs) around the parts a test states (layers, forward, inputs), so each test shows only
its model."""

from __future__ import annotations

import textwrap

_BODY = " " * 8


def module_source(layers: str, forward: str, inputs: str, name: str = "M", seed: int = 0, imports: str = "") -> str:
    """The source of a model file: class `name` makes `layers` in __init__ (after torch.manual_seed(seed), so its
    weights repeat from run to run), `forward(self, x)` runs `forward`, and ModelInputs is (`inputs`,).
    `layers` and `forward` are statement lines, indented or not; `imports` are extra import lines."""
    def body(code: str) -> str:
        return textwrap.indent(textwrap.dedent(code).strip("\n") + "\n", _BODY) if code.strip() else ""

    return (f"import torch\nimport torch.nn as nn\n{imports}torch.manual_seed({seed})\n"
            f"class {name}(nn.Module):\n    def __init__(self):\n{_BODY}super().__init__()\n{body(layers)}"
            f"    def forward(self, x):\n{body(forward)}"
            f"ModelUnderTest = {name}().eval()\nModelInputs = ({inputs},)\n")


def line_of(source: str, text: str) -> int:
    """The 1-based number of the first line of `source` that contains `text` (what an error message names)."""
    return next(i for i, line in enumerate(source.splitlines(), 1) if text in line)
