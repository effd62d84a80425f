"""`emlkit flash`: the MPS3 SD-card files and the pyOCD command, tested without a board.

What a board would do with them (the MCC loading the images, pyOCD programming flash) is not tested here:
no board is connected. The exported image booting from the same raw binaries under QEMU is in
tests/test_export.py."""

from __future__ import annotations

import shutil
import struct
import sys
from pathlib import Path

import pytest

from emlkit.deploy.boards import load_board
from emlkit.deploy.flash import (Segment, find_pyocd, images_txt, load_segments, mps3_images, pyocd_command,
                              write_mps3)
from emlkit.errors import AotError

REPO = Path(__file__).resolve().parents[1]


def elf32(segments: list[tuple[int, int, bytes]], machine: int = 40) -> bytes:
    """A minimal little-endian ELF32 with PT_LOAD program headers (vaddr, paddr, data)."""
    phoff, phsize = 52, 32
    data_off = phoff + phsize * len(segments)
    header = b"\x7fELF" + bytes([1, 1, 1]) + bytes(9)
    header += struct.pack("<HHIIIIIHHHHHH", 2, machine, 1, 0x10000000, phoff, 0, 0, 52, phsize, len(segments), 40, 0, 0)
    phdrs, blobs, off = b"", b"", data_off
    for vaddr, paddr, blob in segments:
        phdrs += struct.pack("<IIIIIIII", 1, off, vaddr, paddr, len(blob), len(blob) + 16, 5, 4)
        blobs += blob
        off += len(blob)
    return header + phdrs + blobs


@pytest.fixture
def c300():
    return load_board("corstone-300")


def test_segments_go_to_one_image_per_memory_at_the_mcc_address(tmp_path: Path, c300) -> None:
    # .text at ITCM, .data's load image right after it (LMA in ITCM, VMA in DTCM), the model in DDR.
    elf = tmp_path / "app.elf"
    elf.write_bytes(elf32([(0x10000000, 0x10000000, b"\x01" * 64), (0x30000000, 0x10000050, b"\x02" * 8),
                           (0x70000000, 0x70000000, b"\x03" * 32)]))
    segs = load_segments(elf)
    assert [s.address for s in segs] == [0x10000000, 0x10000050, 0x70000000]
    images = mps3_images(segs, c300)
    assert [(i.memory, i.cpu_address, i.mcc_address, i.file) for i in images] == [
        ("itcm", 0x10000000, 0x00000000, "itcm.bin"), ("ddr", 0x70000000, 0x0C000000, "ddr.bin")]
    # the gap between .text and .data's load image is zero-filled, .data lands at its load address
    assert images[0].data == b"\x01" * 64 + bytes(16) + b"\x02" * 8
    txt = images_txt(images, elf, c300)
    assert "TOTALIMAGES: 2" in txt and "\r\n" in txt
    assert "IMAGE0ADDRESS: 0x00000000" in txt and "IMAGE0FILE: \\SOFTWARE\\itcm.bin" in txt
    assert "IMAGE1ADDRESS: 0x0c000000" in txt and "IMAGE1FILE: \\SOFTWARE\\ddr.bin" in txt
    assert all(len(Path(i.file).stem) <= 8 for i in images)  # the MCC takes 8.3 names


def test_bytes_the_mcc_cannot_load_are_refused(tmp_path: Path, c300) -> None:
    with pytest.raises(AotError, match="dtcm"):  # DTCM has no MCC address on the AN547
        mps3_images([Segment(0x30000000, b"\0" * 4)], c300)
    with pytest.raises(AotError, match="outside every memory"):
        mps3_images([Segment(0x90000000, b"\0" * 4)], c300)
    with pytest.raises(AotError, match="not an MPS3 board"):
        mps3_images([Segment(0x12000000, b"\0" * 4)], load_board("corstone-320"))
    bad = tmp_path / "x.elf"
    bad.write_bytes(elf32([(0, 0, b"\0")], machine=62))
    with pytest.raises(AotError, match="not Arm"):
        load_segments(bad)
    bad.write_bytes(b"hello")
    with pytest.raises(AotError, match="not an ELF"):
        load_segments(bad)


def test_sd_card_update_keeps_the_old_images_txt(tmp_path: Path, c300) -> None:
    elf = tmp_path / "app.elf"
    elf.write_bytes(elf32([(0x10000000, 0x10000000, b"\x05" * 16)]))
    images = mps3_images(load_segments(elf), c300)
    card = tmp_path / "V2M-MPS3"
    card.mkdir()
    with pytest.raises(AotError, match="not an MPS3 drive"):
        write_mps3(card, images, elf, c300, card=True)
    (card / "MB").mkdir()
    with pytest.raises(AotError, match="no AN547 FPGA image"):
        write_mps3(card, images, elf, c300, card=True)
    adir = card / "MB" / "HBI0309C" / "AN547"
    adir.mkdir(parents=True)
    (adir / "images.txt").write_text("the board's original\n")
    write_mps3(card, images, elf, c300, card=True)
    assert (adir / "images.bak").read_text() == "the board's original\n"
    assert "IMAGE0FILE: \\SOFTWARE\\itcm.bin" in (adir / "images.txt").read_text()
    assert (card / "SOFTWARE" / "itcm.bin").read_bytes() == b"\x05" * 16
    # a second flash keeps the first backup (the board's own file), and leaves no temporary files
    write_mps3(card, images, elf, c300, card=True)
    assert (adir / "images.bak").read_text() == "the board's original\n"
    assert not list(card.rglob("*.part"))
    # an older board revision: its own folder is used
    old_rev = tmp_path / "rev-b"
    (old_rev / "MB" / "HBI0309B" / "AN547").mkdir(parents=True)
    write_mps3(old_rev, images, elf, c300, card=True)
    assert (old_rev / "MB" / "HBI0309B" / "AN547" / "images.txt").is_file() and not (old_rev / "MB" / "HBI0309C").exists()


def test_pyocd_command_line() -> None:
    cmd = pyocd_command(Path("b/app.elf"), "stm32h743zitx", "stlink:0670FF", 4_000_000, "sector", ["pyocd"])
    assert cmd == ["pyocd", "flash", "--no-wait", "--target", "stm32h743zitx", "--uid", "stlink:0670FF",
                   "--frequency", "4000000", "--erase", "sector", "--format", "elf", "b/app.elf"]
    assert "--uid" not in pyocd_command(Path("a.elf"), "cortex_m", "auto")


def test_cli_errors_and_dry_run(emlkit_cli, tmp_path: Path) -> None:
    elf = tmp_path / "app.elf"
    elf.write_bytes(elf32([(0x10000000, 0x10000000, b"\x05" * 16)]))
    r = emlkit_cli(["flash", str(elf), "--probe", "auto"], tmp_path)
    assert r.returncode == 2 and "error: --probe needs --pyocd-target" in r.stderr and "Traceback" not in r.stderr
    r = emlkit_cli(["flash", str(tmp_path / "none.elf"), "--mps3-dir", "sd"], tmp_path)
    assert r.returncode == 2 and "no such image" in r.stderr
    r = emlkit_cli(["flash", str(elf), "--probe", "auto", "--pyocd-target", "cortex_m", "--dry-run"], tmp_path)
    assert r.returncode == 0 and "flash --no-wait --target cortex_m --erase auto --format elf" in r.stdout
    r = emlkit_cli(["flash", str(elf), "--mps3-dir", "sd"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "sd" / "SOFTWARE" / "itcm.bin").is_file() and (tmp_path / "sd/MB/HBI0309C/AN547/images.txt").is_file()


@pytest.mark.skipif(find_pyocd() is None, reason="pyOCD is not installed (requirements.txt pins pyocd==0.46.0)")
def test_pyocd_accepts_the_command_and_reports_no_probe(emlkit_cli, tmp_path: Path) -> None:
    """pyOCD parses every option we give it and stops at the missing probe (none is connected here)."""
    elf = tmp_path / "app.elf"
    elf.write_bytes(elf32([(0x10000000, 0x10000000, b"\x05" * 16)]))
    r = emlkit_cli(["flash", str(elf), "--probe", "auto", "--pyocd-target", "cortex_m", "--frequency", "1000000"], tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "No connected debug probes" in r.stdout + r.stderr
    assert "error: pyOCD could not flash app.elf" in r.stderr and "usage:" not in r.stdout + r.stderr
    assert shutil.which("pyocd") or (Path(sys.executable).parent / "pyocd").is_file()
