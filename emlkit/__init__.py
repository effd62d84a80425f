"""Host side of the toolkit: PyTorch model -> quantized ExecuTorch program -> board run."""

import os as _os
from pathlib import Path as _Path

__version__ = "0.2.0"

# torch creates its inductor cache under the temp directory on import; keep it in a cache of ours so a run
# leaves the temp directory as it found it (every file of our own there is removed after use).
_os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(_Path.home() / ".cache" / "emlkit" / "torchinductor"))
