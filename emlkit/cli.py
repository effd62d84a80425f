"""`emlkit` (or `python -m emlkit`): compile | run | evaluate | debug | export | inspect | flash | models | suite | opsuite. Argument parsing only."""

from __future__ import annotations

import argparse
import logging
import sys
import traceback
import warnings
from typing import Any, Callable

from emlkit.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, AotError, exit_table_text
from emlkit.logsetup import setup_logging

log = logging.getLogger("emlkit")


def _patch_bands(text: str) -> int:
    """--patch-stages: "auto" (PATCH_AUTO), "off" (0) or a band count of at least 2."""
    from emlkit.patch_bands import PATCH_AUTO

    if text == "auto":
        return PATCH_AUTO
    if text == "off":
        return 0
    if text.isdigit() and int(text) >= 2:
        return int(text)
    raise argparse.ArgumentTypeError(f"{text!r} is not auto, off or a band count of 2 or more (e.g. --patch-stages 4)")


def _add_compile_args(p: argparse.ArgumentParser) -> None:
    from emlkit.targets import TARGETS

    p.add_argument("model", help="zoo model name (see `emlkit models`) or path to a .py file "
                                 "defining ModelUnderTest and ModelInputs")
    p.add_argument("--target", required=True, help=f"one of: {', '.join(TARGETS)}")
    p.add_argument("--calibration", metavar="PATH", help="calibration inputs: a .pt file with a list of input tuples, a folder "
                   "of .npy/.pt files (one sample each, by name), or an .npz (one array per input, sample axis first); "
                   "default: ModelInputs")
    p.add_argument("--no-lut-fusion", action="store_true", help="keep pointwise chains as separate ops")
    p.add_argument("--explicit-layout", action="store_true", help="Cortex-M explicit-layout lowering (NHWC variants)")
    p.add_argument("--allow-float", action="store_true",
                   help="run ops that have no int8 kernel in float on the device (between dequantize and quantize) "
                        "instead of refusing the model; the run reports each float op and its share of the count")
    p.add_argument("--per-channel-linear", choices=["auto", "all", "off"], default="all",
                   help="Cortex-M: quantize Linear weights per output channel as 1x1 convs "
                        "(all, the default: every layer, the NPU flow's accuracy; auto: only where it is cheap or "
                        "needed, i.e. >= 4 rows or feeding a matmul/table; off: none)")
    p.add_argument("--streaming-state", action="store_true",
                   help="Cortex-M: each LSTM/GRU layer keeps its h (and c) between executions instead of starting "
                        "from zero (eml_reset_state zeroes it), so one frame per call equals one call over all "
                        "frames; calibration samples run in order as one stream")
    p.add_argument("--memory-planner", default="emlkit",
                   choices=["emlkit", "emlkit-no-in-place", "emlkit-graph-order", "executorch"],
                   help="who places the activations in the arena: emlkit (lifetime-aware best fit, outputs over "
                        "inputs where the firmware allows it, calls reordered where that lowers the arena; the "
                        "default), emlkit-no-in-place, emlkit-graph-order (no reordering) or executorch "
                        "(ExecuTorch's greedy planner, for comparison)")
    p.add_argument("--patch-stages", type=_patch_bands, default="auto", metavar="auto|off|N",
                   help="Cortex-M: run the high-resolution first stages in N row bands (N >= 2), each band's rows "
                        "with the halo its layers need, written into one concat: less peak RAM, some rows "
                        "computed twice (default: auto, the band count 2..8 with the smallest estimated arena "
                        "among those costing <= 10%% more MACs, or off where none lowers the arena)")
    p.add_argument("--io", choices=["float", "int8", "int8-all"], default="float",
                   help="Cortex-M: the program's inputs as int8 codes (int8; their scale and zero point in the report "
                        "and the exported header: the leading quantize and its float input leave the arena), its "
                        "outputs too (int8-all: the trailing dequantize goes), or float (the default)")
    p.add_argument("--board", default=None,
                   help="board to check the program's memory fit against / run on (default: the target's board; "
                        "host runs natively)")
    p.add_argument("--system-config", metavar="NAME", default=None,
                   help="Ethos-U: Vela system config from ExecuTorch's vela.ini (e.g. Ethos_U55_Deep_Embedded, "
                        "Ethos_U85_SYS_Flash_High; default: ExecuTorch's for the NPU)")
    p.add_argument("--memory-mode", metavar="NAME", default=None,
                   help="Ethos-U: Vela memory mode (Sram_Only, Shared_Sram, Dedicated_Sram[_256KB|_384KB|_512KB]; "
                        "default: ExecuTorch's for the NPU)")


# Each command: its arguments -> a typed request (emlkit/commands.py resolves the target and board once) -> the
# command, which hands the request to the library.


def _command(name: str) -> Callable[[argparse.Namespace], int]:
    """The command `name`: commands.NAME_request(args) -> commands.NAME_cmd(request)."""
    def cmd(args: argparse.Namespace) -> int:
        from emlkit import commands

        return getattr(commands, f"{name}_cmd")(getattr(commands, f"{name}_request")(args))

    cmd.__name__ = f"cmd_{name}"
    return cmd


cmd_compile, cmd_run, cmd_evaluate, cmd_debug = (_command("compile"), _command("run"), _command("evaluate"),
                                               _command("debug"))
cmd_export, cmd_inspect, cmd_flash, cmd_opsuite = (_command("export"), _command("inspect"), _command("flash"),
                                                   _command("opsuite"))


def cmd_suite(args: argparse.Namespace) -> int:
    from emlkit import commands

    return commands.suite_cmd(list(args.suite_args))


def cmd_models(args: argparse.Namespace) -> int:
    from emlkit import commands

    return commands.models_cmd()


def _add_device_args(p: argparse.ArgumentParser, timeout: float) -> None:
    """What every command that runs on a board takes: the simulator, its timeout, the kernel variant."""
    p.add_argument("--sim", choices=["qemu", "fvp", "auto"], default="auto", help="simulator for Corstone boards")
    p.add_argument("--timeout", type=float, default=timeout, help=f"simulator timeout in seconds (default {timeout:g})")
    p.add_argument("--kernels", choices=["mve", "portable"], default="mve", help="kernel variant for MVE-capable boards")


def _add_evaluate(sub: Any) -> None:
    v = sub.add_parser("evaluate", help="accuracy on a data set (.npz): float model, quantized host reference and "
                                        "device, all samples in one firmware run",
                       epilog=exit_table_text(), formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_compile_args(v)
    v.add_argument("--data", required=True, metavar="FILE.npz",
                   help="inputs as array x (sample axis first), labels as y (or --labels KEY)")
    v.add_argument("--labels", metavar="KEY", help="name of the labels array (default: y when present); integer "
                                                   "labels: top-1 accuracy, float labels: MSE")
    v.add_argument("--limit", type=int, metavar="N", help="evaluate the first N samples only")
    _add_device_args(v, 600.0)
    v.add_argument("-o", "--output", default="out", help="folder for the evaluation program (default: out)")
    v.set_defaults(func=cmd_evaluate)


def _add_debug(sub: Any) -> None:
    d = sub.add_parser("debug", help="every layer's output on the device vs the host reference (steps) and the float "
                                     "model (SNR): where accuracy goes, with a plot",
                       epilog=exit_table_text(), formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_compile_args(d)
    d.add_argument("--inputs", metavar="FILE", help="the input to trace: a .pt of an input tuple, an .npz (one "
                                                    "array per input; first sample) or a folder of samples "
                                                    "(default: the model's example inputs)")
    d.add_argument("--suggest", action="store_true", help="for the layer that loses the most SNR, compile and measure "
                                                          "remedies: per-channel weights, more calibration data, "
                                                          "int16 activations, the layer in float")
    _add_device_args(d, 600.0)
    d.add_argument("-o", "--output", default="out", help="folder for the debug program, ETDump, table and plot "
                                                        "(default: out)")
    d.set_defaults(func=cmd_debug)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="emlkit", description="PyTorch -> quantized ExecuTorch programs for Cortex-M and Ethos-U",
                                 epilog=exit_table_text(), formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-v", "--verbose", action="store_true", help="debug logging and full tracebacks")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compile", help="quantize and lower a model; write .pte, .bpte and a .json report")
    _add_compile_args(c)
    c.add_argument("-o", "--output", default="out", help="output folder (default: out)")
    c.set_defaults(func=cmd_compile)
    r = sub.add_parser("run", help="compile, build the firmware, run on a board/simulator and check outputs",
                       description="MODEL may also be a bundled program (.bpte) compiled earlier for --target.",
                       epilog=exit_table_text(), formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_compile_args(r)
    _add_device_args(r, 120.0)
    r.add_argument("--save-outputs", metavar="DIR", help="write each output as the device produced it to DIR/output_<i>.npy")
    r.add_argument("-o", "--output", default="out", help="folder for the compiled program (default: out)")
    r.add_argument("--npu-trace", action="store_true", help="per-command trace of the Ethos-U functional model")
    r.add_argument("--etdump", metavar="FILE", help="write the firmware's ETDump of the measured runs to FILE "
                                                     "(read it with emlkit inspect)")
    r.add_argument("--cycles", action="store_true",
                   help="QEMU targets: run once more with QEMU's exec log and print 'cycles (model)' per operator next to "
                        "the instruction counts (a timing model from Arm's published tables, not a measurement; slower)")
    r.set_defaults(func=cmd_run)
    _add_evaluate(sub)
    _add_debug(sub)
    e = sub.add_parser("export", help="write a self-contained CMake firmware project: runtime, this model's kernels, "
                                      "board start-up, link script, toolchain file, the program in flash")
    _add_compile_args(e)
    e.add_argument("-o", "--output", required=True, help="project folder to write")
    e.add_argument("--force", action="store_true", help="replace a non-empty output folder (only once the new "
                                                        "project is complete)")
    e.add_argument("--kernels", choices=["mve", "portable"], default="mve", help="kernel variant (CPU flags)")
    e.set_defaults(func=cmd_export)
    i = sub.add_parser("inspect", help="per-operator profile from an ETDump, read by ExecuTorch's Inspector")
    i.add_argument("--etdump", metavar="FILE", help="an ETDump file (emlkit run --etdump)")
    i.add_argument("--log", metavar="FILE", help="a console log with ETDUMP BEGIN/END blocks (exported firmware)")
    i.add_argument("--etrecord", metavar="FILE", help="the program's ETRecord (emlkit compile writes NAME_TARGET.etrecord)")
    i.add_argument("--sim", choices=["qemu", "fvp", "board"], default=None,
                   help="where the counts come from, to name cycle counts (instructions always mean QEMU)")
    i.add_argument("--json", metavar="FILE", help="also write the table as JSON")
    i.add_argument("--trace", metavar="FILE.json", help="also write one run as a Chrome/Perfetto trace (CPU and NPU tracks)")
    i.add_argument("--trace-run", type=int, default=0, metavar="N", help="which measured run the trace draws (default 0)")
    i.set_defaults(func=cmd_inspect)
    f = sub.add_parser("flash", help="program a board: pyOCD (CMSIS-DAP, ST-Link, J-Link) or an MPS3 SD card")
    f.add_argument("elf", help="the image (build/app.elf of an exported project)")
    how = f.add_mutually_exclusive_group(required=True)
    how.add_argument("--probe", metavar="UID", help="pyOCD probe unique ID, or 'auto' for the only one connected")
    how.add_argument("--mps3", metavar="DRIVE", help="the MPS3's mounted USB drive (V2M-MPS3): update its SD card")
    how.add_argument("--mps3-dir", metavar="DIR", help="write the MPS3 SD-card files into DIR instead")
    f.add_argument("--pyocd-target", metavar="NAME", help="pyOCD target type, e.g. stm32h743zitx (see pyocd list --targets)")
    f.add_argument("--board", default="corstone-300", help="board whose memory map the image uses (for --mps3)")
    f.add_argument("--frequency", type=int, metavar="HZ", help="SWD/JTAG clock for pyOCD")
    f.add_argument("--erase", choices=["auto", "chip", "sector"], default="auto", help="pyOCD erase mode")
    f.add_argument("--dry-run", action="store_true", help="print what would be done (pyOCD command, files) and stop")
    f.set_defaults(func=cmd_flash)
    m = sub.add_parser("models", help="list the model zoo")
    m.set_defaults(func=cmd_models)
    s = sub.add_parser("suite", help="every zoo model x target on the simulators, checked and tabulated "
                                     "(what ./test_cortex_m.sh runs; `emlkit suite --help` for its options)",
                       add_help=False)
    s.add_argument("suite_args", nargs=argparse.REMAINDER)
    s.set_defaults(func=cmd_suite)
    from emlkit.opsuite import add_parser as add_opsuite

    add_opsuite(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["suite"]:  # its own options, --help included, belong to the suite
        return cmd_suite(argparse.Namespace(suite_args=argv[1:]))
    ap = build_parser()
    args = ap.parse_args(argv)
    try:
        from emlkit import commands

        commands.check_arguments(args)  # names and files first: setup_logging imports torch (seconds)
        setup_logging(args.verbose)
        if not args.verbose:
            warnings.filterwarnings("ignore")  # torch/torchao deprecation noise
        # opsuite's parser (emlkit/opsuite) names its own handlers; its requests go through the command layer too.
        func = cmd_opsuite if args.cmd == "opsuite" else args.func
        return int(func(args))
    except AotError as err:
        if args.verbose:
            traceback.print_exc()
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # anything else is a bug of ours: say so in one line, never a bare traceback
        if args.verbose:
            traceback.print_exc()
        print(f"error: internal error (a bug in emlkit): {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
              " (rerun with -v for the traceback and report it)", file=sys.stderr)
        return EXIT_INTERNAL
