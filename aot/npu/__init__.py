"""Ethos-U55 functional model: executes Vela command streams on the host, bit-exact with the hardware.

blob.py (delegate blob), commands.py (decoder), weights.py (weight/scale streams), execute.py (the machine,
execute_delegate/run_blob), program.py (whole .pte/.bpte on the host), trace.py (per-command trace vs TOSA).
"""
