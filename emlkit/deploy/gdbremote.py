"""A small client for the GDB remote serial protocol, enough to drive QEMU's gdbstub.

Used by the NPU co-simulation (emlkit/deploy/npu_cosim.py) to halt the guest at the
driver's register accessors, read and write guest memory and registers, and resume.
Only the packets QEMU 7.2 answers for an M-profile CPU are used: ?, g, p, P, m, M, X,
Z0/z0 (breakpoints), c and qSupported/QStartNoAckMode.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass

# Register numbers of QEMU's M-profile target description: r0..r12, sp, lr, pc, then xpsr (25).
SP, LR, PC, XPSR = 13, 14, 15, 25
_MAX_CHUNK = 1024  # bytes per m/X packet: QEMU's packet buffer holds 4 KiB of hex


class GdbError(RuntimeError):
    """The stub refused a request, the connection dropped, or it did not answer in time."""


@dataclass(frozen=True)
class Stop:
    signal: int
    raw: str

    @property
    def exited(self) -> bool:
        return self.raw.startswith(("W", "X"))


class GdbRemote:
    """One connection to a gdbstub (unix socket path or host:port)."""

    def __init__(self, address: str, connect_timeout: float = 10.0) -> None:
        deadline = time.monotonic() + connect_timeout
        last: Exception | None = None
        while True:
            try:
                if ":" in address and not address.startswith("/"):
                    host, port = address.rsplit(":", 1)
                    self.sock = socket.create_connection((host, int(port)), timeout=1.0)
                else:
                    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    s.connect(address)
                    self.sock = s
                break
            except OSError as exc:  # the simulator may still be starting
                last = exc
                if time.monotonic() > deadline:
                    raise GdbError(f"cannot connect to the gdbstub at {address}: {last}") from None
                time.sleep(0.05)
        self.sock.settimeout(None)
        self._buf = b""
        self._ack = True
        self.request("qSupported:swbreak+")
        if self.request("QStartNoAckMode") == "OK":
            self._ack = False
        # QEMU answers single-register packets (p/P) only once the client has read the target description.
        self.target_xml = self._read_xfer("target.xml")

    def _read_xfer(self, annex: str) -> str:
        out, off = "", 0
        while True:
            r = self.request(f"qXfer:features:read:{annex}:{off:x},800")
            if not r or r[0] not in "lm":
                raise GdbError(f"the gdbstub does not describe its registers ({annex}: {r[:40]!r})")
            out += r[1:]
            off += len(r) - 1
            if r[0] == "l":
                return out

    # ---- framing --------------------------------------------------------------------
    def _send(self, payload: str) -> None:
        body = payload.encode("latin-1")
        pkt = b"$" + body + b"#" + f"{sum(body) & 0xFF:02x}".encode()
        try:
            self.sock.sendall(pkt)
        except OSError as exc:
            raise GdbError(f"the gdbstub connection is closed ({exc}): did the simulator exit?") from None
        if self._ack:
            self._expect_ack()

    def _read_some(self, timeout: float | None) -> None:
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            raise GdbError("the gdbstub did not answer in time") from None
        except OSError as exc:
            raise GdbError(f"the gdbstub connection failed: {exc}") from None
        finally:
            self.sock.settimeout(None)
        if not data:
            raise GdbError("the gdbstub closed the connection (did the simulator exit?)")
        self._buf += data

    def _expect_ack(self) -> None:
        while not self._buf:
            self._read_some(10.0)
        if self._buf[:1] == b"+":
            self._buf = self._buf[1:]
        elif self._buf[:1] == b"-":
            raise GdbError("the gdbstub rejected a packet (checksum)")

    def _recv(self, timeout: float | None = 30.0) -> str:
        while True:
            start = self._buf.find(b"$")
            end = self._buf.find(b"#", start + 1) if start >= 0 else -1
            if start >= 0 and end >= 0 and len(self._buf) >= end + 3:
                body = self._buf[start + 1:end]
                self._buf = self._buf[end + 3:]
                if self._ack:
                    try:
                        self.sock.sendall(b"+")
                    except OSError:
                        pass  # the stub may close right after its last reply (the guest exited)
                return _unescape(body).decode("latin-1")
            self._read_some(timeout)

    def request(self, payload: str, timeout: float | None = 30.0) -> str:
        self._send(payload)
        return self._recv(timeout)

    def _ok(self, payload: str) -> None:
        r = self.request(payload)
        if r != "OK":
            raise GdbError(f"gdbstub refused '{payload[:40]}': {r or 'not supported'}")

    # ---- registers ------------------------------------------------------------------
    def reg(self, n: int) -> int:
        r = self.request(f"p{n:x}")
        if not r or r.startswith("E"):
            raise GdbError(f"cannot read register {n}: {r}")
        return int.from_bytes(bytes.fromhex(r), "little")

    def set_reg(self, n: int, value: int, size: int = 4) -> None:
        self._ok(f"P{n:x}={(value & ((1 << (8 * size)) - 1)).to_bytes(size, 'little').hex()}")

    def core_regs(self) -> list[int]:
        r = self.request("g")
        raw = bytes.fromhex(r)
        return [int.from_bytes(raw[4 * i:4 * i + 4], "little") for i in range(16)]

    # ---- memory ---------------------------------------------------------------------
    def read(self, addr: int, n: int) -> bytes:
        out = bytearray()
        while n > 0:
            k = min(n, _MAX_CHUNK)
            r = self.request(f"m{addr:x},{k:x}")
            if not r or r.startswith("E"):
                raise GdbError(f"cannot read {k} bytes at {addr:#x}: {r}")
            out += bytes.fromhex(r)
            addr += k
            n -= k
        return bytes(out)

    def write(self, addr: int, data: bytes) -> None:
        pos = 0
        while pos < len(data):
            chunk = data[pos:pos + _MAX_CHUNK]
            self._ok(f"M{addr + pos:x},{len(chunk):x}:{chunk.hex()}")
            pos += len(chunk)

    # ---- execution ------------------------------------------------------------------
    def set_breakpoint(self, addr: int) -> None:
        self._ok(f"Z0,{addr:x},2")

    def clear_breakpoint(self, addr: int) -> None:
        self._ok(f"z0,{addr:x},2")

    def cont(self, timeout: float | None = None) -> Stop:
        """Resume and wait for the next stop (breakpoint, exit). QEMU stops again at once on a
        breakpoint at the current PC: use step_over() first when resuming from one."""
        return _stop(self.request("c", timeout))

    def step(self, timeout: float | None = 30.0) -> Stop:
        """Execute one instruction."""
        return _stop(self.request("s", timeout))

    def step_over(self, addr: int) -> Stop:
        """Resume from the breakpoint at `addr`: lift it, execute one instruction, set it again."""
        self.clear_breakpoint(addr)
        try:
            return self.step()
        finally:
            self.set_breakpoint(addr)

    def halt_reason(self) -> Stop:
        return _stop(self.request("?"))

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def _stop(r: str) -> Stop:
    if not r or r[0] not in "STWX":
        raise GdbError(f"unexpected stop reply '{r[:40]}'")
    return Stop(int(r[1:3], 16) if len(r) >= 3 else 0, r)


def _unescape(body: bytes) -> bytes:
    if b"}" not in body and b"*" not in body:
        return body
    out = bytearray()
    i = 0
    while i < len(body):
        c = body[i]
        if c == 0x7D:  # escape: next byte xor 0x20
            out.append(body[i + 1] ^ 0x20)
            i += 2
        elif c == 0x2A and out:  # run-length: previous byte repeated (n - 29) more times
            out += bytes([out[-1]]) * (body[i + 1] - 29)
            i += 2
        else:
            out.append(c)
            i += 1
    return bytes(out)
