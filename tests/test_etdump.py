"""ETDump: the firmware's profile records in ExecuTorch's flatcc schema, read by ExecuTorch's own Inspector.

The runner writes one when asked (`emlkit run --etdump`: on the host to a file, on a simulated board
through semihosting); the exported firmware prints one on its console (`emlkit inspect --log`)."""

from __future__ import annotations

import base64
import json
import zlib
from pathlib import Path

import pytest

from emlkit.errors import AotError
from emlkit.etdump import etdumps_from_log, inspect_etdump


def _block(data: bytes, crc: int | None = None, length: int | None = None) -> str:
    b64 = base64.b64encode(data).decode()
    body = "\n".join(b64[i:i + 64] for i in range(0, len(b64), 64))
    return (f"ETDUMP BEGIN bytes={len(data) if length is None else length} "
            f"crc32={zlib.crc32(data) if crc is None else crc:08x}\n{body}\nETDUMP END\n")


def test_log_blocks_are_checked() -> None:
    data = bytes(range(200))
    assert etdumps_from_log("boot\n" + _block(data) + "RESULT: PASS\n") == [data]
    assert etdumps_from_log(_block(b"a") + "noise\n" + _block(b"bc")) == [b"a", b"bc"]
    with pytest.raises(AotError, match="damaged"):
        etdumps_from_log(_block(data, crc=zlib.crc32(data) ^ 1))
    with pytest.raises(AotError, match="damaged"):
        etdumps_from_log(_block(data, length=199))
    with pytest.raises(AotError, match="ends inside an ETDump"):
        etdumps_from_log(_block(data).replace("ETDUMP END\n", ""))
    with pytest.raises(AotError, match="no ETDump in the log"):
        etdumps_from_log("RESULT: PASS\n")
    with pytest.raises(AotError, match="not an ETDump"):
        inspect_etdump(b"\0" * 32)


def test_inspect_cli_errors(emlkit_cli, tmp_path: Path) -> None:
    r = emlkit_cli(["inspect", "--etdump", str(tmp_path / "none.etdp")])
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1].startswith("error: ") and "Traceback" not in r.stderr
    r = emlkit_cli(["inspect"])
    assert r.returncode == 2 and "give exactly one of --etdump" in r.stderr


@pytest.mark.slow
def test_inspector_reads_the_host_runner_etdump(tmp_path: Path, compiled) -> None:
    """Per-instruction events of every bundled test case; their totals are the runner's per-operator counts."""
    from emlkit.deploy.sim_host import run_host

    cres = compiled("mlp", "cortex-m55")
    res = run_host(cres.bpte, etdump=tmp_path / "run.etdp")
    assert res.status == "pass"
    data = (tmp_path / "run.etdp").read_bytes()
    assert res.raw["etdump_bytes"] == len(data)
    p = inspect_etdump(data, cres.pte.with_suffix(".etrecord"))
    assert p.unit == "ns" and p.runs == res.raw["cases"]
    per_op: dict[str, float] = {}
    for r in p.rows:
        per_op[r.name.rsplit(".", 1)[0]] = per_op.get(r.name.rsplit(".", 1)[0], 0.0) + r.total
        assert r.nodes, r
    assert per_op == {o.op: float(o.count) for o in res.per_op}
    assert sum(r.calls for r in p.rows) == sum(o.calls for o in res.per_op)


@pytest.mark.slow
def test_delegate_calls_in_the_etdump_of_a_qemu_run(tmp_path: Path, compiled, emlkit_cli) -> None:
    """An Ethos-U program under QEMU (NPU co-simulated): the runner writes the ETDump through semihosting,
    `emlkit run --etdump` hands it over, and the Inspector names the delegate's backend from the ETRecord."""
    cres = compiled("conv_relu", "ethos-u55-128")
    etdump = tmp_path / "u55.etdp"
    r = emlkit_cli(["run", "conv_relu", "--target", "ethos-u55-128", "-o", str(cres.pte.parent), "--etdump", str(etdump)])
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "QEMU instructions" in r.stdout and "NPU cycles (Vela estimate, NPU only)" in r.stdout
    prof = tmp_path / "p.json"
    r = emlkit_cli(["inspect", "--etdump", str(etdump), "--etrecord", str(cres.pte.with_suffix(".etrecord")), "--json",
                    str(prof)])
    assert r.returncode == 0, r.stderr
    (p,) = json.loads(prof.read_text())
    assert p["figure"] == "QEMU instructions"
    delegate = [row for row in p["rows"] if row["name"] == "DELEGATE_CALL"]
    assert len(delegate) == 1 and delegate[0]["backend"] == "EthosUBackend" and delegate[0]["total"] > 0
    assert [row["name"] for row in p["rows"]] == ["cortex_m::quantize_per_tensor.out", "DELEGATE_CALL",
                                                  "cortex_m::dequantize_per_tensor.out"]
