"""The parser of ``python -m bench``: every command and its options; each command's function is named, not
imported, so that ``--help`` and a command's start load only what that command needs."""

from __future__ import annotations

import argparse

from bench.platform import lazy
from bench.platform.arguments import RESULTS_NAME, needs_gpu_words, ordinal
from bench.cli.options import (PLOTS_DIR, Handler, Parser, add_device, add_force, add_format, add_gpu,
                               add_outputs, add_strict, add_summary, add_target, add_verbose, devices, path,
                               positive_int, positive_number)
from bench.usercode.defaults import DEFAULT_RUNS, DEFAULT_SETTLE_MS, DEFAULT_SPIN_MS
from bench.usercode.tools import saved

COMMANDS = "sweep,plot,claims,compare,report,probe,syncs,trace,env"
READING = {"plot": lazy.Name("bench.cli.results", "plot_command"),  # the commands that read results
           "claims": lazy.Name("bench.cli.results", "claims_command"),
           "compare": lazy.Name("bench.cli.results", "compare_command"),
           "report": lazy.Name("bench.cli.reporting", "report_command")}
DESCRIPTION = f"""\
Measures, on your GPU, which CUDA calls block the host and which serialize the GPU, how much copy/compute
overlap you really get, copy bandwidth, and what launches and allocations cost; and answers it for your own
code: does it wait for the GPU, and where? Measuring ({needs_gpu_words()}; claims --measure) needs an NVIDIA
GPU; report, plot, compare and claims read results files anywhere, and env prints what it can."""
EXAMPLES = f"""\
examples:
  python -m bench sweep --quick            a smoke test of every experiment (seconds)
  python -m bench sweep                    the headline answers, into results/{RESULTS_NAME}
  python -m bench report                   every run in results/ as one HTML file, plots/local/report.html
  python -m bench compare OLD NEW          what changed between two results (a driver update, a new GPU)
  python -m bench probe mypkg.train:step   does step() wait for the GPU?
  python -m bench syncs mypkg.train:step   which lines of step() wait for the GPU?
  python -m bench trace mypkg.train:step   how much of step()'s copying hides behind its kernels?
  python -m bench sweep --list             the plan, checked: experiments, their axes and configurations"""


def parser() -> argparse.ArgumentParser:
    built = Parser(prog="python -m bench", description=DESCRIPTION, epilog=EXAMPLES,
                   formatter_class=argparse.RawDescriptionHelpFormatter)
    built.add_argument("--version", action="store_true", help="print the installed version and exit")
    commands = built.add_subparsers(dest="command", metavar=f"{{{COMMANDS}}}")
    _sweep(commands)
    _reading(commands)
    _probe(commands)
    _syncs(commands)
    _trace(commands)
    env = commands.add_parser("env", help="print the GPU, driver, CUDA, PCIe and library environment (without a "
                                          "GPU: the host's, and why there is none)")
    env.add_argument("--device", type=ordinal, help="CUDA device ordinal (default 0; named, it must exist)")
    env.set_defaults(handler=Handler(lazy.Name("bench.cli.measuring", "env_command")))
    return built


def _sweep(commands: argparse._SubParsersAction) -> None:
    sweep = commands.add_parser("sweep", help=f"run the experiments and write results/{RESULTS_NAME}")
    size = sweep.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_const", const="quick", dest="mode",
                      help="a smoke test of every experiment (seconds)")
    size.add_argument("--full", action="store_const", const="full", dest="mode",
                      help="the exhaustive grid (many minutes)")
    sweep.add_argument("--budget", type=positive_number, metavar="SECONDS",
                       help="shrink the stop rules' time caps until the plan fits this many seconds")
    sweep.add_argument("--experiments", help="comma-separated experiment names (default: all)")
    sweep.add_argument("--sizes", help="transfer sizes, e.g. 4K,1M,1G or 4K:1G for every power of two between")
    sweep.add_argument("--axis", action="append", default=[], metavar="NAME=V1,V2",
                       help="replace an axis's values, e.g. --axis host_memory=pinned --axis streams=1,8 (repeatable)")
    sweep.add_argument("--out", type=path,
                       help="results directory (default results/), or a new .parquet file (an existing one is never "
                            "overwritten)")
    sweep.add_argument("--device", type=ordinal, help="CUDA device ordinal (default 0)")
    sweep.add_argument("--devices", type=devices, metavar="all|0,1,...",
                       help="several GPUs of this node into one run: each one-GPU experiment on each, one process per "
                            "GPU; the GPUs' experiments that load or measure the host (copies, host memory) one at a "
                            "time, the others beside them; and the multi-GPU experiments (peer copies, shared host "
                            "links, blocking across GPUs), which need two or more")
    sweep.add_argument("--concurrent", action="store_true",
                       help="with --devices: run every one-GPU experiment on all the GPUs at once, host copies too "
                            "(to expose shared links and hosts)")
    sweep.add_argument("--one-at-a-time", action="store_true",
                       help="with --devices: run every experiment one GPU after another (the baseline that "
                            "running at once is checked against)")
    sweep.add_argument("--resume", type=path, metavar="FILE",
                       help="an interrupted sweep's results file: run what it lacks and add it to the same file")
    sweep.add_argument("--list", action="store_true",
                       help="preview the plan, checked as the sweep checks it: the experiments, what each "
                            "measures, its axes and configurations (with --quick or --full: theirs); measures nothing "
                            "and needs no GPU")
    sweep.set_defaults(handler=Handler(lazy.Name("bench.cli.measuring", "sweep_command")), mode="default")


def _reading(commands: argparse._SubParsersAction) -> None:
    """plot, claims, compare and report: they read results files."""
    plot = commands.add_parser("plot", help="turn results into figures under plots/local/ (one set per GPU)")
    plot.add_argument("results", nargs="?", type=path,
                      help="results file or directory of them (default: the newest file in results/)")
    plot.add_argument("--out", type=path, default=PLOTS_DIR, help="directory for the figures (default plots/local/)")
    add_gpu(plot)
    add_force(plot)

    claims = commands.add_parser("claims", help="CUDA folklore against measurement (--measure: runs what the "
                                                "results lack)")
    claims.add_argument("results", nargs="?", type=path,
                        help="results file or directory (default: the newest file in results/ holding each needed "
                             "experiment)")
    claims.add_argument("--measure", action="store_true",
                        help="measure what the results lack on this machine's GPU first (default: judge what they "
                             "hold; claims without data show as not measured)")
    claims.add_argument("--out", type=path,
                        help="with --measure: where to write what it measures (default results/)")
    claims.add_argument("--device", type=ordinal, help="with --measure: CUDA device ordinal (default 0)")
    add_gpu(claims)
    add_format(claims)

    compare = commands.add_parser("compare", help="what changed between two results: every experiment, per GPU; or "
                                                  "between two traces (bench trace --save files)")
    compare.add_argument("old", type=path, help="results file or directory, or a trace file: the baseline")
    compare.add_argument("new", type=path, help="results file or directory, or a trace file: the candidate")
    compare.add_argument("--fail-above", type=positive_number, metavar="PERCENT",
                         help="exit 1 when a configuration is slower by more than PERCENT, or a trace's number worse "
                              "beyond its runs' spread (a share: by more than PERCENT points) (a CI gate)")
    add_gpu(compare)
    compare.add_argument("--all", action="store_true", help="list every configuration, the same ones too")
    compare.add_argument("--spread-from", nargs="+", type=path, metavar="RESULTS",
                         help="comparing two machines of one kind: results files or directories whose other machines "
                              "of that kind give the machine-to-machine spread, with the two compared (default: "
                              "results/ where it exists)")
    add_format(compare)

    report = commands.add_parser("report", help="one self-contained HTML report (figures embedded)")
    report.add_argument("results", nargs="*", type=path,
                        help="results files or directories (default: results/): the results files under a "
                             "directory, leaving out subdirectories whose names start with _ or ., with their side "
                             f"tables and the rows {_listed([f'{tool.name} --save' for tool in saved()])} keep in "
                             f"{_listed([f'_{tool.table}/' for tool in saved()])}; of several measurements of a "
                             "configuration on one GPU, the newest is shown")
    report.add_argument("--out", type=path, default=PLOTS_DIR / "report.html",
                        help="the HTML file to write (default plots/local/report.html)")
    add_gpu(report)
    add_force(report)
    for command in (plot, report):
        add_verbose(command)
    for name, reading in (("plot", plot), ("claims", claims), ("compare", compare), ("report", report)):
        add_strict(reading)
        reading.set_defaults(handler=Handler(READING[name]))


def _listed(words: list[str]) -> str:
    """'a, b and c'."""
    return " and ".join([", ".join(words[:-1]), words[-1]] if len(words) > 1 else words)


def _probe(commands: argparse._SubParsersAction) -> None:
    probe = commands.add_parser("probe", help="does my code block? call MODULE:FUNCTION while the GPU is busy")
    probe.add_argument("target", metavar="MODULE:FUNCTION",
                       help="a function taking no arguments, e.g. mypkg.train:step")
    probe.add_argument("--stream", choices=("all", "default", "per-thread"), default="all",
                       help="what is held: every stream (the device-wide hold; default), or a spin kernel on the "
                            "legacy default stream (CuPy's and PyTorch's default) or the per-thread default stream")
    probe.add_argument("--spin-ms", type=positive_number, default=DEFAULT_SPIN_MS,
                       help=f"hold (spin) length (default {DEFAULT_SPIN_MS:g})")
    add_device(probe)
    add_verbose(probe)
    probe.set_defaults(handler=Handler(lazy.Name("bench.cli.usercode", "probe_command")))


def _syncs(commands: argparse._SubParsersAction) -> None:
    syncs = commands.add_parser("syncs", help="where does my code wait? every line of MODULE:FUNCTION or a script "
                                              "that waited for the GPU")
    add_target(syncs)
    syncs.add_argument("--settle-ms", type=positive_number, default=DEFAULT_SETTLE_MS,
                       help="how long a line stands still under the hold before it counts as waiting "
                            f"(default {DEFAULT_SETTLE_MS:g})")
    add_outputs(syncs, "a table")
    syncs.add_argument("--no-cuda-calls", action="store_true", help="do not name CUDA calls with CUPTI")
    syncs.add_argument("--save-baseline", type=path, metavar="FILE.json",
                       help="also write the waiting places as a baseline (plain JSON, for review and for --baseline)")
    syncs.add_argument("--baseline", type=path, metavar="FILE.json",
                       help="gate against a baseline: exit 1 on a new waiting place or more waits than it allows")
    syncs.add_argument("--format", choices=("text", "github", "markdown"), default="text",
                       help="with --baseline: text (default), github (workflow commands that annotate the lines) or "
                            "markdown (a summary for the job's page)")
    add_summary(syncs)
    add_force(syncs)
    add_device(syncs)
    add_verbose(syncs)
    syncs.set_defaults(handler=Handler(lazy.Name("bench.cli.usercode", "syncs_command")))


def _trace(commands: argparse._SubParsersAction) -> None:
    trace = commands.add_parser("trace", help="how much does my code overlap? the GPU timeline of MODULE:FUNCTION or "
                                              "a script, its copies hidden behind kernels, idle gaps and bound")
    add_target(trace)
    trace.add_argument("--runs", type=positive_int,
                       help="traced runs (and as many untraced, for the overhead); the median one is shown "
                            f"(default {DEFAULT_RUNS})")
    add_outputs(trace, "text")
    trace.add_argument("--plot", type=path, metavar="FILE.png", help="also draw the timeline (PNG or SVG)")
    trace.add_argument("--perfetto", type=path, metavar="FILE.json",
                       help="also write the timeline for Perfetto (ui.perfetto.dev) or chrome://tracing: every record "
                            "on a track per stream, the host's waits, flows from calls to the copies they made")
    add_force(trace)
    trace.add_argument("--results", type=path, metavar="DIR",
                       help="results whose pinned bandwidth rows of this GPU stand in for measuring pinned copies "
                            "(default results/)")
    trace.add_argument("--no-lines", action="store_true",
                       help="leave out the driver-call callbacks: no host waits or lines, less overhead on code whose "
                            "every call blocks (pageable copies)")
    trace.add_argument("--baseline", type=path, metavar="FILE.parquet",
                       help="gate against an earlier trace of the target (bench trace --save): exit 1 where a share "
                            "fell beyond both traces' runs, or a host wait, a pageable copy, an idle gap after a wait "
                            "or two streams that serialize is new")
    trace.add_argument("--format", choices=("text", "github", "markdown"), default="text",
                       help="with --baseline: text (default), github (workflow commands on the lines) or markdown")
    add_summary(trace)
    trace.add_argument("--device", type=ordinal, help="CUDA device ordinal (default 0)")
    trace.add_argument("--merge", nargs="+", type=path, metavar="FILE.parquet",
                       help="instead of tracing, read the traces ranks saved (one per rank, of one host: bench.tracing("
                            "save=..., rank=...) under torchrun) and show, --save, --plot or --perfetto them as one, "
                            "each GPU's numbers and the whole; needs no GPU")
    trace.add_argument("--from", dest="from_file", type=path, metavar="FILE.json",
                       help="instead of tracing, read a trace the PyTorch profiler wrote (Kineto's Chrome JSON, "
                            "gzipped or not) and show, --save, --plot or --perfetto bench's figures of it; needs no GPU "
                            "(the bound and the pageable copies' cost need the trace's GPU here)")
    add_verbose(trace)
    trace.set_defaults(handler=Handler(lazy.Name("bench.cli.usercode", "trace_command")))
