"""The field slots and union tags in firmware/runtime/schema_ids.h (and the
dtype values in et_types.h) must match the schemas of the installed
ExecuTorch wheel: a moved field would otherwise read the wrong bytes."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

executorch = pytest.importorskip("executorch")

ET_DIR = Path(list(executorch.__path__)[0])  # a namespace package: no __file__
PROGRAM_FBS = ET_DIR / "exir" / "_serialize" / "program.fbs"
SCALAR_FBS = ET_DIR / "exir" / "_serialize" / "scalar_type.fbs"
BUNDLED_FBS = ET_DIR / "devtools" / "bundled_program" / "schema" / "bundled_program_schema.fbs"
ETDUMP_FBS = ET_DIR / "devtools" / "etdump" / "etdump_schema_flatcc.fbs"
REPO = Path(__file__).resolve().parents[1]
HEADER = REPO / "firmware" / "runtime" / "schema_ids.h"
ET_TYPES = REPO / "firmware" / "runtime" / "et_types.h"


@dataclass
class Schema:
    tables: dict[str, dict[str, int]] = field(default_factory=dict)  # table -> field -> slot
    unions: dict[str, list[str]] = field(default_factory=dict)
    enums: dict[str, dict[str, int]] = field(default_factory=dict)
    identifier: str | None = None


def parse_fbs(text: str) -> Schema:
    """Enough of the flatbuffers IDL for these schemas: tables, unions, enums."""
    text = re.sub(r"//[^\n]*", "", text)
    s = Schema()
    m = re.search(r'file_identifier\s+"([^"]+)"', text)
    s.identifier = m.group(1) if m else None
    for m in re.finditer(r"\bunion\s+(\w+)\s*\{([^}]*)\}", text):
        s.unions[m.group(1)] = [x.strip() for x in m.group(2).split(",") if x.strip()]
    for m in re.finditer(r"\benum\s+(\w+)\s*:\s*\w+\s*\{([^}]*)\}", text):
        vals, nxt = {}, 0
        for item in (x.strip() for x in m.group(2).split(",")):
            if not item:
                continue
            name, _, val = (p.strip() for p in item.partition("="))
            nxt = int(val) if val else nxt
            vals[name] = nxt
            nxt += 1
        s.enums[m.group(1)] = vals
    for m in re.finditer(r"\btable\s+(\w+)\s*\{([^}]*)\}", text):
        slots, slot = {}, 0
        for decl in (d.strip() for d in m.group(2).split(";")):
            if not decl:
                continue
            fm = re.match(r"(\w+)\s*:\s*([\w.\[\]]+)", decl)
            assert fm, f"cannot parse field {decl!r} in table {m.group(1)}"
            idm = re.search(r"\bid\s*:\s*(\d+)", decl)
            assert not idm, "explicit field ids are not handled by this parser"
            slots[fm.group(1)] = slot
            # a union field takes two slots: <name>_type then <name>
            slot += 2 if fm.group(2).split(".")[-1] in s.unions else 1
        s.tables[m.group(1)] = slots
    return s


def parse_header(text: str) -> dict[str, str]:
    return dict(re.findall(r"^#define\s+(FB\w+)\s+(\S+)", text, re.M))


def check(defines: dict[str, str], prefix: str, schema: Schema) -> list[str]:
    """All mismatches between the header's `prefix` macros and the schema."""
    errors = []
    for name, val in defines.items():
        m = re.fullmatch(rf"{prefix}(U|E)?_(\w+?)__(\w+)", name)
        if not m:
            continue
        kind, owner, member = m.groups()
        num = int(val)
        if kind == "U":
            members = schema.unions.get(owner)
            got = members.index(member) + 1 if members and member in members else None
        elif kind == "E":
            got = schema.enums.get(owner, {}).get(member)
        else:
            got = schema.tables.get(owner, {}).get(member)
        if got != num:
            errors.append(f"{name} = {num}, schema says {got}")
    return errors


@pytest.fixture(scope="module")
def defines() -> dict[str, str]:
    return parse_header(HEADER.read_text())


def test_program_field_slots(defines: dict[str, str]) -> None:
    schema = parse_fbs(PROGRAM_FBS.read_text())
    assert sum(k.startswith("FBP_") and "__" in k for k in defines) > 50
    assert check(defines, "FBP", schema) == []


def test_bundled_field_slots(defines: dict[str, str]) -> None:
    schema = parse_fbs(BUNDLED_FBS.read_text())
    assert sum(k.startswith("FBB") and "__" in k for k in defines) > 15
    assert check(defines, "FBB", schema) == []


def test_etdump_field_slots(defines: dict[str, str]) -> None:
    """The slots firmware/runtime/etdump.c writes, against the ETDump schema the Inspector reads."""
    schema = parse_fbs(ETDUMP_FBS.read_text())
    assert sum(k.startswith("FBD_") and "__" in k for k in defines) >= 10
    assert check(defines, "FBD", schema) == []
    assert defines["FBD_FILE_IDENTIFIER"].strip('"') == schema.identifier


def test_identifiers_and_versions(defines: dict[str, str]) -> None:
    from executorch.devtools.bundled_program.version import BUNDLED_PROGRAM_SCHEMA_VERSION
    from executorch.exir.version import EXECUTORCH_SCHEMA_VERSION

    assert defines["FBP_FILE_IDENTIFIER"].strip('"') == parse_fbs(PROGRAM_FBS.read_text()).identifier
    assert defines["FBB_FILE_IDENTIFIER"].strip('"') == parse_fbs(BUNDLED_FBS.read_text()).identifier
    assert int(defines["FBP_SCHEMA_VERSION"].rstrip("u")) == EXECUTORCH_SCHEMA_VERSION
    assert int(defines["FBB_SCHEMA_VERSION"].rstrip("u")) == BUNDLED_PROGRAM_SCHEMA_VERSION


def test_dtype_values_match_scalar_type() -> None:
    enum = parse_fbs(SCALAR_FBS.read_text()).enums["ScalarType"]
    ours = dict(re.findall(r"ET_DT_(\w+)\s*=\s*(\d+)", ET_TYPES.read_text()))
    assert len(ours) >= 9
    for name, val in ours.items():
        assert enum[name] == int(val), f"ET_DT_{name}"


def test_checker_catches_a_moved_field(defines: dict[str, str]) -> None:
    # The check itself must be able to fail: shift one slot and one union tag.
    schema = parse_fbs(PROGRAM_FBS.read_text())
    bad = dict(defines)
    bad["FBP_Tensor__sizes"] = str(int(bad["FBP_Tensor__sizes"]) + 1)
    bad["FBPU_KernelTypes__Tensor"] = "4"
    assert len(check(bad, "FBP", schema)) == 2
    # and union fields really take two slots
    assert schema.tables["Instruction"]["instr_args"] == 0
    assert schema.tables["EValue"]["val"] == 0
