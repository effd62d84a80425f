"""Ethos-U functional model: executes Vela command streams on the host, bit-exact with the hardware.

blob.py (delegate blob), commands.py (decoder; regs_u85.py is the U85 register map), weights.py and
weights_u85.py (weight/scale streams), execute.py (the U55/U65 machine), run.py (execute_delegate/run_blob),
execute_u85.py (the U85 machine), program.py (whole .pte/.bpte on the host), trace.py (per-command trace vs TOSA).
"""
