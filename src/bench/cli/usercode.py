"""``probe``, ``syncs`` and ``trace``: load the user's function or script, run it under the tool on the GPU, and
show (``--json``), save, draw or export what the tool found; ``trace --merge`` reads the traces ranks saved."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import runpy
import sys
from pathlib import Path

from rich.console import Console

from bench.results import writes
from bench.platform.arguments import missing_function, no_target, require_gpu, split_target
from bench.cli.options import RESULTS_DIR, warn
from bench.platform.env import gpu_environment, gpu_name, use_device
from bench.platform.errors import UsageError
from bench.analysis.escape import terminal_lines
from bench.timing import MeasurementFailed, phase
from bench.usercode.activity import TraceUnavailable
from bench.usercode.defaults import DEFAULT_RUNS
from bench.usercode.probe import probe
from bench.usercode.syncs.run import syncs
from bench.usercode.tools import tool
from bench.usercode.trace.run import trace

SYNCS, TRACE = tool("syncs"), tool("trace")
TARGET_IMPORT, WRITING = "your module's import", "drawing and writing files"


def _function(command: str, target: str):
    """The function MODULE:FUNCTION (or FILE.py:FUNCTION) names, imported with the current directory on the path (a
    file with its own directory)."""
    module_name, function_name = split_target(command, target)
    sys.path.insert(0, "")  # the current directory, as `python -m` does for the user's own modules
    try:
        if module_name.endswith(".py"):
            path = Path(module_name)
            if not path.is_file():
                raise UsageError(f"{command}: {path} is not a file")
            sys.path.insert(0, str(path.resolve().parent))
            spec = importlib.util.spec_from_file_location("__bench_target__", path)  # never shadows a real module
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
        if not hasattr(module, function_name):
            raise missing_function(command, module_name, function_name)
        function = getattr(module, function_name)
    except UsageError:
        raise
    except (Exception, SystemExit) as error:  # the user's module failed (or exited) on import: one line
        raise UsageError(f"{command}: cannot load {target}: {type(error).__name__}: {error}") from None
    if not callable(function):
        raise UsageError(f"{command}: {target} is not callable")
    return function


def _script(path: Path, arguments: list[str], command: str = "syncs"):
    """A function that runs the script as ``__main__`` with its arguments, as ``python SCRIPT ARGS`` would."""
    if not path.is_file():
        raise UsageError(f"{command}: {path} is not a file")

    def run() -> None:
        saved = sys.argv[:]
        sys.argv = [str(path), *arguments]
        sys.path.insert(0, str(path.resolve().parent))
        try:
            runpy.run_path(str(path), run_name="__main__")
        except SystemExit as exit:  # sys.exit() ends the script, not bench: 0 is a normal end
            if exit.code not in (None, 0):
                raise UsageError(f"{command}: {path} exited with status {exit.code}") from None
        finally:
            sys.argv = saved
            sys.path.remove(str(path.resolve().parent))

    return run


def probe_command(args: argparse.Namespace, console: Console) -> int:
    split_target("probe", args.target)
    require_gpu("probe")  # before the user's module is imported: importing runs it
    keep_compiled()
    with phase(TARGET_IMPORT):
        function = _function("probe", args.target)
    name = _named(args.device)
    stream = {"all": None, "default": 0, "per-thread": 2}[args.stream]
    try:
        result = probe(function, stream=stream, spin_ms=args.spin_ms)
    except MeasurementFailed as error:
        raise UsageError(f"probe: {error}") from None
    console.print(f"{args.target} on {name}: {result}", highlight=False, soft_wrap=True, markup=False)
    return 0


def keep_compiled() -> None:
    """Before the target's import: what JAX compiles of it kept in bench's cache (XLA's persistent compilation cache,
    whose keys name the computation, the JAX and XLA versions and the device), so the next command on this machine
    compiles nothing; not where the user chose a place for it (``JAX_COMPILATION_CACHE_DIR``), where JAX is loaded
    already, or where bench's cache is off (``BENCH_CACHE_DIR=off``)."""
    from bench.platform import cache
    from bench.platform.libraries import BY_NAME

    where = cache.directory()
    if where is None or "JAX_COMPILATION_CACHE_DIR" in os.environ or "jax" in sys.modules:
        return
    os.environ.update(BY_NAME["jax"].loading.disk_cache_settings(str(where / "xla")))


def _target(command: str, args: argparse.Namespace):
    """Check the target and --save before anything runs; the function to run (a script's as ``__main__``)."""
    if args.target is None:
        raise no_target(command)
    script = args.target.endswith(".py")
    if not script and args.script_args:
        raise UsageError(f"{command}: {' '.join(args.script_args)}: options go before the target (arguments follow "
                         "only a script)")
    if not script and ":" not in args.target:
        raise UsageError(f"{command}: {args.target!r} is not MODULE:FUNCTION, FILE.py:FUNCTION or SCRIPT.py")
    if script and not Path(args.target).is_file():
        raise UsageError(f"{command}: {args.target} is not a file")
    _outputs(args)
    require_gpu(command)
    keep_compiled()
    if script:
        return _script(Path(args.target), args.script_args, command)
    with phase(TARGET_IMPORT):
        return _function(command, args.target)


def _named(device: int) -> str:
    """The GPU's name, ``device`` made current (the CUDA context made where the target has not); its whole
    environment (git, NVML, versions) is read only for --save."""
    with phase("CUDA start"):
        name = gpu_name(device)
        use_device(device, load_numba=False)
    return name


def _environment(device: int):
    with phase("the GPU's environment, for --save"):
        return gpu_environment(device)


def _outputs(args: argparse.Namespace) -> None:
    """Check --save, --plot and --perfetto before anything runs or is read."""
    named = {option: path for option in ("--save", "--plot", "--perfetto")
             if (path := getattr(args, option[2:], None)) is not None}
    for option, path in named.items():
        writes.claim(path, writes.writer(args.command, option), getattr(args, "force", False))
    if len({path.resolve() for path in named.values()}) < len(named):
        raise UsageError("--save, --plot and --perfetto name the same file; name one file each")


def syncs_command(args: argparse.Namespace, console: Console) -> int:
    kept = _baseline_given(args)
    function = _target("syncs", args)
    name = _named(args.device)
    try:
        found = syncs(function, settle_ms=args.settle_ms, cuda_calls=not args.no_cuda_calls)
    except MeasurementFailed as error:  # the hold could not fill this GPU (shared, MPS): one line
        raise UsageError(f"syncs: {error}") from None
    if args.save is not None:
        environment = _environment(args.device)
        with phase(WRITING):
            SYNCS.save([(args.target, found)], environment, args.save)
    if args.save_baseline is not None:
        from bench.usercode.syncs import baseline

        with phase(WRITING):
            writes.write_bytes(args.save_baseline, baseline.to_json(map(baseline.kept, found.places),
                                                                    args.target).encode())
    if kept is None:
        _show(args, console, found, f"{args.target} on {name}: ")
        return 0
    from bench.usercode.syncs.baseline import compare
    from bench.usercode.syncs.gate import WRITE, Format

    comparison = compare(kept, found.places, str(args.baseline))
    if args.format == Format.TEXT:
        _show(args, console, found, f"{args.target} on {name}: ")
    return _gate_said(args, WRITE[Format(args.format)](comparison, args.target),
                      WRITE[Format.MARKDOWN](comparison, args.target), comparison.failed)


def _gate_given(args: argparse.Namespace, command: str, baseline: str) -> None:
    """What shows a gate (``--format`` but text, ``--summary``) checked against ``--baseline`` (``baseline``: the
    file it takes), and ``--summary``'s file: a regular one (or a new one) in a directory that exists."""
    if args.format != "text" and args.baseline is None:
        raise UsageError(f"{command}: --format {args.format} shows a gate: give --baseline {baseline}")
    if args.summary is not None:
        if args.baseline is None:
            raise UsageError(f"{command}: --summary appends the gate's summary: give --baseline")
        writes.write_target(args.summary, "--summary")
        if not args.summary.parent.is_dir():
            raise UsageError(f"--summary: {args.summary.parent}/ does not exist")
    if args.json and args.baseline is not None:
        raise UsageError(f"{command}: --json and --baseline both write stdout; choose one")


def _gate_said(args: argparse.Namespace, said: str, summary: str, worse: bool) -> int:
    """The gate's output printed, its summary appended to ``--summary``'s file; its exit status (1: worse)."""
    print(said)
    _append_summary(args.summary, summary)
    return 1 if worse else 0


def _append_summary(path: Path | None, summary: str) -> None:
    """The gate's Markdown summary appended to ``path`` (a job's summary file, which others append to as well)."""
    if path is None:
        return
    writes.write_target(path, "--summary")
    with open(path, "a", encoding="utf-8") as file:
        file.write(summary + "\n")


def _baseline_given(args: argparse.Namespace):
    """The places of ``--baseline`` (None without it), and ``--save-baseline`` checked, before anything runs."""
    _gate_given(args, "syncs", "FILE.json")
    if args.save_baseline is not None:
        writes.claim(args.save_baseline, writes.writer("syncs", "--save-baseline"), args.force)
        if args.baseline is not None and args.save_baseline.resolve() == args.baseline.resolve():
            raise UsageError("syncs: --save-baseline and --baseline name the same file; gate first, then save")
    if args.baseline is None:
        return None
    from bench.usercode.syncs.baseline import read

    return read(args.baseline)


def trace_command(args: argparse.Namespace, console: Console) -> int:
    if args.merge:
        return _merge_traces(args, console)
    if args.from_file is not None:
        return _profiler_trace(args, console)
    results = _results_reader(args)
    earlier = _trace_baseline(args)
    function = _target("trace", args)
    device = args.device or 0
    name = _named(device)
    try:
        found = trace(function, runs=args.runs or DEFAULT_RUNS, results=results, target=args.target,
                      lines=not args.no_lines)
    except (TraceUnavailable, MeasurementFailed) as error:  # CUPTI missing or taken; a reference copy failed
        raise UsageError(f"trace: {error}") from None
    environment = _environment(device) if args.save is not None or earlier is not None else None
    _trace_outputs(args, found, args.target, f"{args.target} on {name}", environment)
    if earlier is None or args.format == "text":
        _show(args, console, found, f"{args.target} on {name}:\n")
    if earlier is None:
        return 0
    from bench.usercode.trace.gate import WRITE, regressions_of

    worse = regressions_of(earlier, args.target, found, environment)
    return _gate_said(args, WRITE[args.format](worse, args.target, str(args.baseline)),
                      WRITE["markdown"](worse, args.target, str(args.baseline)), bool(worse))


def _trace_baseline(args: argparse.Namespace):
    """The rows of --baseline's trace of the target (None without it), checked before anything runs."""
    _gate_given(args, "trace", "FILE.parquet")
    if args.baseline is None:
        return None
    from bench.platform.errors import ResultsError
    from bench.usercode.trace.compare import read

    try:
        rows = read(args.baseline)
    except ResultsError as error:
        raise UsageError(f"--baseline: {error}") from None
    targets = sorted(set(rows["target"].astype(str)))
    if args.target is not None and args.target not in targets:
        raise UsageError(f"--baseline: {args.baseline} holds no trace of {args.target} (it holds "
                         f"{', '.join(targets[:5])}{', ...' if len(targets) > 5 else ''})")
    return rows


def _reading_only(args: argparse.Namespace, option: str, what: str, allowed: tuple[str, ...] = ()) -> None:
    """Refuse a target and the options of tracing for ``trace --merge`` or ``--from`` (``what``: what it reads);
    check their outputs."""
    if args.target is not None:
        raise UsageError(f"trace {option} takes no target: it reads {what}")
    given = {"--runs": args.runs, "--results": args.results, "--device": args.device,
             "--no-lines": args.no_lines or None, "--baseline": args.baseline,
             "--format": None if args.format == "text" else args.format, "--summary": args.summary,
             "--merge": args.merge if option != "--merge" else None,
             "--from": args.from_file if option != "--from" else None}
    for name, value in given.items():
        if value is not None and name not in allowed:
            raise UsageError(f"trace {option} takes no {name}: it traces nothing, it reads {what}")
    _outputs(args)


def _merge_traces(args: argparse.Namespace, console: Console) -> int:
    """``trace --merge FILE...``: the ranks' saved traces as one."""
    _reading_only(args, "--merge", "the traces the ranks saved")
    from bench.usercode.trace.merge import merged_files

    found = merged_files(args.merge)
    title = f"{found.target}, {len(args.merge)} trace{'s' * (len(args.merge) != 1)} merged"
    _trace_outputs(args, found, found.target, title, None)
    _show(args, console, found, f"{title}:\n")
    return 0


def _profiler_trace(args: argparse.Namespace, console: Console) -> int:
    """``trace --from FILE``: bench's figures of a trace the PyTorch profiler wrote."""
    _reading_only(args, "--from", "a profiler's trace", allowed=("--device", "--results"))
    from bench.platform.errors import ResultsError
    from bench.usercode.trace.profiler import described_trace

    results = _results_reader(args)
    try:
        found, notes = described_trace(Path(args.from_file), args.device, results)
    except (ResultsError, MeasurementFailed) as error:
        raise UsageError(f"trace --from: {error}") from None
    title = f"{Path(args.from_file).name} (the PyTorch profiler's trace)"
    _trace_outputs(args, found, found.target, title, None)
    if args.json:
        from bench.analysis.escape import json_text
        from bench.usercode.trace.outputs import finite

        print(json_text({**finite(found.to_dict()), "notes": notes}, indent=2))  # to_json's, with the notes
        return 0
    text = "\n".join([f"{title}:", str(found), *(f"note: {note}" for note in notes)])
    console.print(terminal_lines(text), highlight=False, soft_wrap=True, markup=False)
    return 0


def _results_reader(args: argparse.Namespace):
    """``--results`` checked; the function that reads its rows (results/ by default), called only where a pageable
    copy needs a pinned reference."""
    if args.results is not None and not Path(args.results).exists():
        raise UsageError(f"--results: {args.results} does not exist")

    def results():
        with phase("reading results/ for pinned references"):
            return _reference_rows(args.results or RESULTS_DIR)

    return results


def _trace_outputs(args: argparse.Namespace, found, target: str, title: str, environment) -> None:
    """Write what --plot, --perfetto and --save ask of a trace (``environment``: the GPU's; None: the ranks')."""
    with phase(WRITING):
        _write_trace(args, found, target, title, environment)


def _write_trace(args: argparse.Namespace, found, target: str, title: str, environment) -> None:
    figure = None
    if args.plot is not None:
        import pandas as pd

        from bench.analysis import plots

        figure = plots.rendered(TRACE.figure(pd.DataFrame(found.table()), title), Path(args.plot).suffix[1:].lower())
    timeline = None
    if args.perfetto is not None:
        from bench.usercode.trace.perfetto import encoded

        timeline = encoded(found)
    if args.save is not None:
        TRACE.save([(target, found)], environment, args.save)
    for path, content in ((args.plot, figure), (args.perfetto, timeline)):
        if content is not None:
            writes.write_bytes(path, content)


def _show(args: argparse.Namespace, console: Console, found, heading: str) -> None:
    """What syncs or trace found: JSON with --json, else the heading and the text (a kernel's or a file's name
    escaped: ``--merge`` reads files that other hosts wrote)."""
    if args.json:
        print(found.to_json())
    else:
        console.print(terminal_lines(f"{heading}{found}"), highlight=False, soft_wrap=True, markup=False)


def _reference_rows(results: Path):
    """The rows of the results under ``results`` (pinned bandwidth rows stand in for reference copies), or None;
    a file bench cannot read is passed over with a warning."""
    if not Path(results).exists():
        return None
    from bench.results import store
    from bench.experiments import registry

    def skipped(error) -> None:
        warn([f"skipped a file: {error}"])

    try:
        return store.read_any(results, store.suite_schema(registry()), skipped)
    except store.ResultsError as error:
        warn([f"--results: {error}; pinned copies are measured"])
        return None
