"""Host side of the toolkit: PyTorch model -> quantized ExecuTorch program -> board run."""

__version__ = "0.1.0"
