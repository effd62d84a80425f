"""The Zephyr module description and west manifest, checked for structure against the rules Zephyr and
west apply. No Zephyr tree is available on these machines (it does not fit the 500 MB the machines may
fetch), so the module and the sample are not built here; see firmware/README.md "Zephyr"."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def test_module_yml_follows_zephyrs_schema() -> None:
    meta = yaml.safe_load((REPO / "zephyr" / "module.yml").read_text())
    # zephyr/scripts/zephyr_module.py: optional name, build.{cmake: folder with CMakeLists.txt, kconfig: file}
    assert set(meta) <= {"name", "build", "samples", "tests", "boards", "security"}
    assert meta["name"] == "emlkit"
    assert (REPO / meta["build"]["cmake"] / "CMakeLists.txt").is_file()
    kconfig = (REPO / meta["build"]["kconfig"]).read_text()
    assert re.search(r"^config EMLKIT$", kconfig, re.M) and re.search(r"^config EMLKIT_ETHOSU$", kconfig, re.M)
    glue = (REPO / "zephyr" / "CMakeLists.txt").read_text()
    assert "if(CONFIG_EMLKIT)" in glue and "${ZEPHYR_CURRENT_MODULE_DIR}/firmware/lib" in glue
    assert (REPO / "firmware" / "lib" / "CMakeLists.txt").is_file()
    # the options the glue sets are the library's
    lib = (REPO / "firmware" / "lib" / "CMakeLists.txt").read_text()
    for opt in re.findall(r"set\((EMLKIT_\w+)", glue):
        assert f"option({opt} " in lib, opt


def test_west_manifest() -> None:
    m = yaml.safe_load((REPO / "west.yml").read_text())["manifest"]
    (zephyr,) = [p for p in m["projects"] if p["name"] == "zephyr"]
    assert zephyr["remote"] in {r["name"] for r in m["remotes"]}
    assert re.fullmatch(r"v\d+\.\d+\.\d+", zephyr["revision"])
    assert "cmsis_6" in zephyr["import"]["name-allowlist"]  # Cortex-M builds need CMSIS_6 from Zephyr 4.x on
    assert m["self"]["path"] == "emlkit"


def test_sample_uses_the_export_and_the_platform_functions_main_calls() -> None:
    sample = REPO / "zephyr" / "samples" / "emlkit_export"
    cm = (sample / "CMakeLists.txt").read_text()
    assert "find_package(Zephyr" in cm and "${EMLKIT_PROJECT}/main.c" in cm
    main = (REPO / "firmware" / "export" / "main.c").read_text()
    # the NPU services are only called for Ethos-U programs, which the sample refuses
    main = re.sub(r"#if EMLKIT_MODEL_USES_NPU.*?#endif", "", main, flags=re.S)
    assert "EMLKIT_MODEL_USES_NPU 1" in cm
    port = (sample / "src" / "platform_zephyr.c").read_text()
    called = set(re.findall(r"\b(plat_\w+)\s*\(", main)) | set(re.findall(r"=\s*(plat_\w+)\b", main))
    called -= {"plat_printf"}  # board/plat_fmt.c, compiled into the sample
    defined = set(re.findall(r"^\w[\w\s\*]*\b(plat_\w+)\s*\(", port, re.M))
    assert called and called <= defined, called - defined
    assert "CONFIG_EMLKIT=y" in (sample / "prj.conf").read_text()
