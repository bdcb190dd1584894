"""A hostile audit of ``python -m bench``: bad inputs run as a user runs bench, judged against what its docs promise.
A mistake is one stderr line ``bench: error: ...``, exit 2, no traceback, nothing written (working directory, checkout,
$HOME, $TMPDIR, any path named); a legitimate run exits 0 with only ``bench: warning: `` lines on stderr. Output that
is not a terminal is plain lines, and no text of a results file reaches stdout, stderr or a written file with a raw
control character (C0 but \\n and \\t, DEL, C1, bidi overrides) or live markup. Fixtures (valid, hostile and broken
results files, saved traces, FIFOs, a symlink loop, an unreadable directory, a non-UTF-8 name, the user's own files)
are laid out afresh for every case; some cases run in a clone of this checkout.

    python scripts/bad_inputs.py [-k SUBSTRING] [-j WORKERS]    # one line per case, then 'N passed, M failed'
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
try:
    import pyarrow as pa
    import pyarrow.parquet as pq
except ImportError:  # not the checkout's environment: run again under its virtual environment's Python
    if Path(sys.executable) == ROOT / ".venv/bin/python" or not (ROOT / ".venv/bin/python").exists():
        raise
    os.execv(ROOT / ".venv/bin/python", [str(ROOT / ".venv/bin/python"), *sys.argv])
TIMEOUT_S = 60
H = ("ZQX\x1b[31mRED\x1b]8;;https://evil.example\x07OSC\x07\rCR\x9b2J\x7f\u202e[link=https://evil.example]L[/link]"
     "[bold]B[/bold]<script>alert(1)</script>$x^2$ and $\\frac{$ @all **em**")  # a results file's text, hostile
LONG = "n" * 300  # a file name over NAME_MAX
BAD = os.fsdecode(b"bad\xff\xfe.parquet")  # a name that is not UTF-8
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\udc80-\udcff]")
TEXT_SUFFIXES = (".html", ".htm", ".svg", ".json", ".md", ".txt", ".csv")
FREE_TEXT = ("gpu_name", "hostname", "error", "driver_version", "cuda_driver", "cuda_runtime", "python_version",
             "cupy_version", "numba_cuda_version", "numpy_version", "bench_version", "git_commit", "host_cpus",
             "pci_bus_id", "docs", "source", "docs_host", "sync_error", "end_capture_error", "compute_capability")


@dataclass
class Case:
    args: tuple[str, ...]
    expect: tuple[int, ...] = (2,)  # exit statuses that pass
    where: str = "tmp"  # "tmp": the fixtures; "repo": a clone of the checkout
    env: dict = field(default_factory=dict)
    writes: tuple[str, ...] = ()  # paths (from the working directory) an exit-0 run may create or replace
    stdout: str = "pipe"  # "pipe", "full" (/dev/full), "closed", "epipe" (the reader has gone)
    bare: bool = False  # without root's power over permission bits (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH)
    says: str = ""  # a fragment the error line must hold

    def shown(self) -> str:
        words = [f"{a[:10]}...({len(a)} chars)" if len(a) > 60 else shlex.quote(a) for a in self.args]
        extra = [f"{k}={v}" for k, v in self.env.items()] + ([f"stdout={self.stdout}"] if self.stdout != "pipe"
                                                             else []) + (["no root override"] if self.bare else [])
        where = " [checkout]" if self.where == "repo" else ""
        return ascii(" ".join(["bench", *words]) + where + (f" [{', '.join(extra)}]" if extra else ""))[1:-1]


def each(prefix: str, *tails: str, x=(2,), **kw) -> list[Case]:
    """A case per tail, each ``prefix tail`` split as a shell would (``''`` is an empty argument)."""
    expect = (x,) if isinstance(x, int) else tuple(x)
    return [Case(tuple(shlex.split(f"{prefix} {tail}")), expect, **kw) for tail in tails or ("",)]


OK, EITHER, GATE = 0, (0, 2), (0, 1, 2)  # EITHER: bench may show a hostile input (escaped) or refuse it (one line)
T2 = "t0.parquet t1.parquet"  # two ranks' traces that merge
OLD_TRACE = "results/_trace/20261124T004329Z-NVIDIA-H200-62d178ad-readme-step.parquet"  # saved before merges
HOSTILE = {"x": EITHER, "writes": ("figs", "plots", "h.html")}
q = shlex.quote


def cases() -> list[Case]:
    return [
        # bare bench, version, unknown commands and options
        *each("", "", "frobnicate", "--frob", "-x", "''", "SWEEP", "env extra", "report -", "sweep --list --frob"),
        *each("", "--version", "--help", "--version env", x=OK),
        # env
        *each("env", "", x=OK), *each("env", x=OK, env={"BENCH_GIT_COMMIT": "\x1b[31mX\x9b"}),  # the recorded commit
        *each("env --device", "-1", "7", "abc", "''", "99999999999999999999999", "0x1", "0 --device 1"),
        # sweep: without a GPU a sweep is one line; --list needs none and checks as the sweep checks
        *each("sweep", "", "--quick", says="GPU"),
        *each("sweep", "--out README.md", "--out /nonexistent/dir/x.parquet"),
        *each("sweep --list", "", "--full", "--budget 1e9", "--devices all", x=OK),
        *each("sweep --list --budget", "0", "-5", "nan", "inf", "1e400", "1e-9", "''"),
        *each("sweep --list --experiments", "nope", "launch,launch", ",", "' '", "LAUNCH", q("launch\x1b[31m"), "peer"),
        *each("sweep --list --sizes", "0", "-1K", "1K:", ":1K", "1G:1K", "4K,,8K", "1.5K", "2T", "4K:1G:2G", "''",
              "--quick", "99999999999999999999G", "4K --experiments launch",
              "4K --experiments bandwidth --axis bytes=8K"),
        *each("sweep --list --axis", "streams", "=1", "streams=", "nosuch=1", "streams=0", "streams=nan",
              "streams=1,,8", "host_memory=PINNED", "compute_ratio=inf", "streams=1 --axis streams=8"),
        *each("sweep --list", "--quick --full", "--device -1", "--device 0 --devices 0,1", "--devices \"\"",
              "--devices 0,,1", "--devices -1", "--devices 9", "--concurrent", "--one-at-a-time", "--out \"\"",
              "--out README.md", "--out /nonexistent/dir/x.parquet", "extra"),
        *each("sweep --list --resume", "missing.parquet", "README.md", "fifo.parquet", "t0.parquet",
              "meta_devices.parquet", "meta_list.parquet", "meta_v1.parquet", "r.parquet --out new.parquet"),
        # plot
        *each("plot", "", "empty.parquet", "text.parquet", "fifo.parquet", "loop.parquet", "t0.parquet", "data.parquet",
              "r.parquet extra", q("missing\udcff.parquet"), f"{LONG}.parquet", "zero_rows.parquet",
              "badpandas.parquet", "meta_strver.parquet", "meta_v1.parquet", "hostile_keys.parquet"),
        *each("plot", "r.parquet", q(BAD), x=OK, writes=("plots",)),
        *each("plot", "hostile.parquet --out figs", "hostile_all.parquet --out figs", "numbers.parquet --out figs",
              "fifodir", "wrongtype.parquet", "nocols.parquet", "side/r.parquet", **HOSTILE),
        *each("plot", "two --out figs", "r.parquet --out \"[/b]d\"", x=OK, writes=("figs", "[/b]d")),
        *each("plot", "noperm", "noperm/r.parquet", "r.parquet --out noperm", bare=True),
        *each("plot r.parquet --out", "README.md", "results", "a/b/c", "/nonexistent/x", "''", "fifo.parquet",
              "figs_foreign", "figs_link", "figs_fifo"),
        *each("plot r.parquet --out outside_link", x=OK, writes=("../outside",)),
        *each("plot", "runs --out runs/figs", *(f"r.parquet --gpu {g}" for g in ('""', "nosuch", "-1")),
              f"r.parquet --gpu {q(chr(27) + ']8;;http://x' + chr(7))}"),
        # claims
        *each("claims", "", "--format xml", "--format \"\"", "--format JSON", "--measure", "--out X",
              "--measure --out README.md", "r.parquet --device 3", "r.parquet --gpu nosuch", "empty.parquet",
              "fifo.parquet", "runs --strict", "meta_list.parquet", "sub", "meta_v1.parquet"),
        *each("claims", "r.parquet", "big.parquet --format json", x=OK),
        *each("claims", "hostile.parquet", "hostile.parquet --format json", "hostile.parquet --format markdown",
              "hostile_all.parquet", "numbers.parquet --format markdown", "wrongtype.parquet",
              "hostile_keys.parquet --format json", x=EITHER),
        # compare
        *each("compare", "", "r.parquet", "r.parquet big.parquet", "t0.parquet r.parquet", "fifo.parquet r.parquet",
              "loop.parquet r.parquet", "empty.parquet r.parquet", "README.md r.parquet",
              "r.parquet badpandas.parquet", "r.parquet meta_strver.parquet", "r.parquet r.parquet r.parquet",
              "runs r.parquet --strict", "t0.parquet tbroken.parquet", "r.parquet meta_v1.parquet"),
        *each("compare r.parquet r.parquet", "", "--all", x=OK),
        *each("compare r.parquet r.parquet --fail-above", "0", "-1", "nan", "''", "5%"),
        *each("compare r.parquet r.parquet", "--spread-from", "--spread-from missing", "--spread-from text.parquet",
              "--spread-from fifo.parquet", "--gpu \"\"", "--gpu nosuch"),
        *each("compare", "t0.parquet t0.parquet", x=OK),
        *each("compare", "big.parquet hostile.parquet", "big.parquet hostile.parquet --all --format markdown",
              "big.parquet hostile_all.parquet --format json", "big.parquet numbers.parquet --all",
              "t1.parquet th.parquet --all", "t1.parquet th.parquet --format markdown",
              "t1.parquet th.parquet --format json", "t1.parquet tnum.parquet", "fifodir r.parquet",
              "bytesdir r.parquet", "big.parquet hostile_keys.parquet --all", x=GATE),
        *each("compare noperm r.parquet", bare=True),
        # report
        *each("report", "", "fifo.parquet", "loop.parquet", "empty.parquet", "missing.parquet", "t0.parquet",
              "data.parquet", "r.parquet --gpu \"\"", "r.parquet --gpu nosuch", "r.parquet text.parquet",
              "runs --strict", "meta_list.parquet", f"{LONG}.parquet", "meta_v1.parquet"),
        *each("report", "r.parquet", x=OK, writes=("plots",)),
        *each("report --out h.html", "hostile.parquet", "hostile_all.parquet", "numbers.parquet", "two",
              "withtrace", "fifodir", "wrongtype.parquet", "hostile_keys.parquet", "side/r.parquet", **HOSTILE),
        *each("report r.parquet --out", "README.md", "page.html", "notes.json", "r.parquet", "sub", "nodir/x.html",
              "results/x.html", "/nonexistent/dir/x.html", "''", "fifo.html", "link.html", "dangling.html",
              "../outside/user.html", "-x.html", "runs/x.html --out other/x.html"),
        *each("report --out h.html withjunk", x=OK, writes=("h.html",)),  # a junk file is skipped, as in runs/
        *each("report runs --out runs/x.html"), *each("report r.parquet --out noperm/x.html", bare=True),
        *each("report r.parquet --out page.html --force", x=OK, writes=("page.html",)),
        *each("report r.parquet --out runs/x.html", x=OK, writes=("runs/x.html",)),  # runs/ is not read: allowed
        *each("report r.parquet --out x.html --out y.html", x=OK, writes=("y.html",)),
        *each("report r.parquet --out", q("a\nb\x1b[31m.html"), x=OK, writes=("a\nb\x1b[31m.html",)),
        *each("report r.parquet --out '[red]x.html'", x=OK, writes=("[red]x.html",), says="[red]x.html"),
        # probe, syncs, trace: no GPU here, so each is one line before the user's code runs
        *each("probe", "", ":", "x", "mod:", ":f", "mod_raises:f", "os:getcwd", "x:y extra", "script.py",
              *(f"x:y --spin-ms {v}" for v in ("0", "-1", "nan", "inf", '""')), "x:y --stream bogus",
              "x:y --device -1"),
        *each("syncs", "", ":", "missing.py", "sub", "sub/", "script.py --json", "--settle-ms 0 x:y", "x:y extra",
              "fifo.py", "loop.py", f"{LONG}.py", "mod_raises:f", "mod_exit:f", "notcallable:step",
              *(f"--save {v} x:y" for v in ("README.md", "r.parquet", '""', "/nonexistent/a.parquet", "new.txt"))),
        *each("syncs", "noperm/x.py", "--save noperm/x.parquet x:y", bare=True),
        *each("trace", "", ":", "fifo.py", *(f"x:y --runs {v}" for v in ("0", "-3", "1.5", '""')),
              *(f"{o} x:y" for o in ("--plot README.md", "--plot a.txt", "--perfetto README.md",
                                        "--perfetto notes.json", "--results missing", "--plot pic.png"))),
        # trace --merge: needs no GPU
        *each("trace --merge", "", "r.parquet", "t0.parquet t0.parquet", "fifo.parquet", "missing.parquet",
              "t0.parquet x:y", "empty.parquet", "t0.parquet tbroken.parquet", *(f"{T2} {o}" for o in (
                  "--plot pic.png", "--plot README.md", "--perfetto notes.json", "--save r.parquet", "--save README.md",
                  "--plot m.png --perfetto m.png", "--plot m.png --save /nonexistent/m.parquet",
                  "--perfetto ../outside/user.json", "--runs 3", "--results missing", "--device 3"))),
        *each("trace --merge", f"{T2}", x=OK),
        *each("trace --merge t0.parquet", "th.parquet", "th.parquet --json", "tnum.parquet",
              "th.parquet --plot m.svg --perfetto m.json --save m.parquet", x=EITHER,
              writes=("m.svg", "m.json", "m.parquet")),
        # encodings, pipes and widths
        *each("", "env", "sweep --list", "claims r.parquet", "--help", "compare t1.parquet th.parquet",
              "trace --merge t0.parquet th.parquet", "claims hostile.parquet --format markdown",
              x=GATE, env={"PYTHONIOENCODING": "ascii"}),
        *each("report", q("missing\u00e9\u2192.parquet"), env={"PYTHONIOENCODING": "ascii"}),
        *each("", "compare big.parquet hostile.parquet", "claims hostile.parquet", x=GATE,
              env={"PYTHONIOENCODING": "latin-1"}),
        *each("", "env", "sweep --list", "claims r.parquet", "compare r.parquet r.parquet --all", f"trace --merge {T2}",
              "claims r.parquet --format markdown", x=OK, env={"COLUMNS": "40"}),
        *(case for mode in ("epipe", "full", "closed") for case in each(
            "", "sweep --list", "env", "claims r.parquet", "--version", x=(0, 1, 2, 120, 141), stdout=mode)),
        *each("report r.parquet --out x.html", x=(2,), writes=("x.html",), stdout="full"),  # written; "wrote" lost
        # in a clone of the checkout: results/ and tracked files
        *each("", *(f"{a}" for a in (
            "report --out README.md", "report --out results/x.html", "report --out results/_logs/x.html",
            "report --out docs", "plot --out results", "plot --out results/_figs", "report --out pyproject.toml",
            "syncs --save results/x.parquet x:y", "sweep --out results/20261121T222607Z-NVIDIA-H200.parquet",
            f"trace --merge {OLD_TRACE}", f"sweep --list --resume {OLD_TRACE}",
            "trace --merge ../w/t0.parquet ../w/t1.parquet --plot plots/bandwidth.png",
            "trace --merge ../w/t0.parquet ../w/t1.parquet --plot results/_trace/x.svg")), where="repo"),
        *each("trace --merge ../w/t0.parquet ../w/t1.parquet --perfetto results/_trace/x.json", where="repo", x=OK,
              writes=("results/_trace/x.json",)),  # a Perfetto file may lie among results
        *each("", "claims", "sweep --list --resume results/20261122T014724Z-NVIDIA-H200.parquet", where="repo", x=OK),
        *each("", "plot", "report", where="repo", x=OK, writes=("plots/local",)),
        *each("compare", f"{OLD_TRACE} {OLD_TRACE.replace('step', 'pageable_step')}", where="repo", x=GATE),
    ]


# --- fixtures -------------------------------------------------------------------------------------------------------

def hostile_table(table: pa.Table, columns) -> pa.Table:
    """``table`` with H before every value of the string ``columns``; the first row's gpu_name and error long."""
    for name in columns:
        index = table.schema.get_field_index(name)
        if index < 0 or not pa.types.is_string(table.schema.field(index).type):
            continue
        values = [None if v is None else H + v for v in table.column(name).to_pylist()]
        if name in ("gpu_name", "error") and values:
            values[0] = H + ("W" * 3000 if name == "gpu_name" else "E " * 10000)
        table = table.set_column(index, table.schema.field(index), pa.array(values, pa.string()))
    return table


def with_metadata(table: pa.Table, bench_metadata: bytes) -> pa.Table:
    return table.replace_schema_metadata({**table.schema.metadata, b"bench": bench_metadata})


def build_cache(cache: Path) -> None:
    """The fixtures' files, built once; each case copies them."""
    files = sorted((ROOT / "results").glob("*.parquet"), key=lambda p: p.stat().st_size)
    shutil.copyfile(files[0], cache / "r.parquet")
    big = max(files, key=lambda p: (pq.read_metadata(p).num_rows, p.name))
    shutil.copyfile(big, cache / "big.parquet")
    table = pq.read_table(big)
    metadata = json.loads(table.schema.metadata[b"bench"])
    strings = [f.name for f in table.schema if pa.types.is_string(f.type) and f.name not in ("experiment", "status")]
    bench_md = json.dumps({**metadata, "command": H, "environment": H}).encode()
    pq.write_table(with_metadata(hostile_table(table, FREE_TEXT), bench_md), cache / "hostile.parquet")
    every = hostile_table(table, strings)  # and a source URL that is a script
    every = every.set_column(every.schema.get_field_index("source"), "source",
                             pa.array(["javascript:alert(1)//"] * len(table), pa.string()))
    pq.write_table(with_metadata(every, bench_md), cache / "hostile_all.parquet")
    pq.write_table(hostile_table(table, ("experiment", "status")), cache / "hostile_keys.parquet")
    weird = [float("nan"), float("inf"), float("-inf"), -1.0, 0.0, 1e308]
    numbers = table
    for index, f in enumerate(table.schema):
        if pa.types.is_floating(f.type):
            numbers = numbers.set_column(index, f, pa.array([weird[i % 6] for i in range(len(table))], f.type))
    pq.write_table(numbers, cache / "numbers.parquet")
    index = table.schema.get_field_index("bytes")
    pq.write_table(table.set_column(index, pa.field("bytes", pa.string()),
                                    pa.array(["abc"] * len(table))), cache / "wrongtype.parquet")
    pq.write_table(table.drop_columns(["gpu_uuid", "gpu_name", "hostname", "run_id"]), cache / "nocols.parquet")
    pq.write_table(table.slice(0, 0), cache / "zero_rows.parquet")
    for name, raw in (("meta_list", b"[]"), ("meta_strver", b'{"schema_version": "2"}'),
                      ("meta_devices", json.dumps({**metadata, "devices": "xyz"}).encode()),
                      ("meta_v1", json.dumps({**metadata, "schema_version": 1}).encode())):
        pq.write_table(with_metadata(table, raw), cache / f"{name}.parquet")
    pq.write_table(table.replace_schema_metadata({**table.schema.metadata, b"pandas": b"{not json"}),
                   cache / "badpandas.parquet")
    pq.write_table(pa.table({"a": [1, 2], "b": ["x", "y"]}), cache / "data.parquet")
    build_traces(cache)


def build_traces(cache: Path) -> None:
    """Two ranks' saved traces (t0, t1) and a rank-1 trace whose names, file and host words are hostile (th)."""
    sys.path.insert(0, str(ROOT / "src"))
    from bench.platform.env import Environment
    from bench.trace import result_of, save
    from bench.usercode.activity import Activity, HostCall, Op, Recording
    from bench.usercode.stacks import Frame

    origin, us = 5 * 10**12, 1000

    def traced(rank: int, word: str):
        acts = [Activity(Op.KERNEL, 7, origin, origin + 100 * us, name="gemm" + word, correlation=1, device=rank),
                Activity(Op.H2D, 8, origin + 80 * us, origin + 140 * us, bytes=1 << 20, host_memory="pageable",
                         correlation=5, device=rank)]
        calls = [HostCall("cuMemcpyHtoDAsync" + word, origin + 70 * us, origin + 75 * us, 5,
                          (Frame(f"/u/x{word}.py", 5, "step" + word, ""),))]
        runs = [Recording(acts, calls)] * 3
        return result_of(runs, copy_bound=lambda h, d: (0.05, 2), pinned=lambda op, b: (0.01, "measured"),
                         target="ddp:step" + word, rank=rank)

    def environment(rank: int, word: str):
        values = {f.name: 1 if f.type == "int" else "x" for f in Environment.fields()}
        return Environment.of(**{**values, "gpu_name": "G" + word, "hostname": "h", "gpu_index": rank,
                                 "gpu_uuid": f"GPU-{rank}{word}"})

    for name, rank, word in (("t0", 0, ""), ("t1", 1, ""), ("th", 1, H)):
        save([("ddp:step" + word, traced(rank, word))], environment(rank, word), cache / f"{name}.parquet")
    trace = pq.read_table(cache / "t1.parquet")  # one trace without columns it needs, one of odd numbers
    pq.write_table(trace.drop_columns(["origin_ns", "start_ms", "device"]), cache / "tbroken.parquet")
    for index, f in enumerate(trace.schema):
        if pa.types.is_floating(f.type):
            trace = trace.set_column(index, f, pa.array([float(("nan", "inf", "-1")[i % 3]) for i in range(len(trace))],
                                                        f.type))
    pq.write_table(trace, cache / "tnum.parquet")


FOREIGN = {"README.md": b"# mine\n", "notes.json": b'{"mine": 1}\n', "page.html": b"<html>mine</html>\n",
           "pic.png": b"\x89PNG\r\n\x1a\n" + b"\0" * 32, "text.parquet": b"not a parquet file\n", "empty.parquet": b"",
           "script.py": b"print('hi')\n", "mod_raises.py": b"raise RuntimeError('boom\\x1b[31m\\r')\n",
           "mod_exit.py": b"import sys\nsys.exit(3)\n", "notcallable.py": b"step = 1\n",
           "noperm/x.py": b"def f(): pass\n", "runs/broken.parquet": b"broken\n", "side/_timeline/r.parquet": b"junk\n",
           "withjunk/_syncs/junk.parquet": b"junk\n",
           "figs_foreign/hostlinks.png": b"\x89PNG\r\n\x1a\n" + b"\0" * 32, "[/.keep": b"", "sub/.keep": b"",
           "../outside/user.html": b"<html>mine</html>\n", "../outside/user.json": b"{}\n"}  # files the user owns
COPIES = {"fifodir/r.parquet": "r.parquet", "runs/r.parquet": "r.parquet", "runs/hostile.parquet": "hostile.parquet",
          "two/big.parquet": "big.parquet", "two/hostile.parquet": "hostile.parquet",  # two GPUs: a folder each
          "side/r.parquet": "r.parquet", "withjunk/r.parquet": "r.parquet", "withtrace/r.parquet": "r.parquet",
          "withtrace/_trace/th.parquet": "th.parquet", "withtrace/_trace/tbroken.parquet": "tbroken.parquet",
          "withtrace/_trace/tnum.parquet": "tnum.parquet", "noperm/r.parquet": "r.parquet", BAD: "r.parquet",
          f"bytesdir/{BAD}": "r.parquet"}
FIFOS = ("fifo.parquet", "fifo.py", "fifo.html", "fifodir/x.parquet", "side/r.timeline.parquet",
         "figs_fifo/hostlinks.svg")
LINKS = {"loop.parquet": "loop.parquet", "loop.py": "loop.py", "link.html": "README.md",
         "dangling.html": "nowhere/x.html", "outside_link": "../outside", "figs_link/hostlinks.svg": "../README.md"}


def lay_out(root: Path, cache: Path, where: str, repo: Path | None) -> Path:
    """A case's directory: root/w (the fixtures) or root/repo (the checkout's clone), root/outside, home, tmp."""
    w = root / "w"
    for name in ("w", "outside", "home", "tmp"):
        (root / name).mkdir(parents=True)
    for item in cache.iterdir():
        shutil.copyfile(item, w / item.name)
    for name, content in FOREIGN.items():
        (w / name).parent.mkdir(parents=True, exist_ok=True)
        (w / name).write_bytes(content)
    for name, source in COPIES.items():
        (w / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(cache / source, w / name)
    for name in FIFOS:
        (w / name).parent.mkdir(exist_ok=True)
        os.mkfifo(w / name)
    for name, target in LINKS.items():
        (w / name).parent.mkdir(exist_ok=True)
        os.symlink(target, w / name)
    os.chmod(w / "noperm", 0)
    if where == "repo":
        subprocess.run(["git", "clone", "-q", "--local", str(repo), str(root / "repo")], check=True)
        return root / "repo"
    return w


def snapshot(root: Path) -> dict:
    """Every path under ``root`` (not .git's insides) with its kind, size, mtime and inode; and git's status."""
    seen = {}
    for directory, names, files in os.walk(os.fsencode(root)):
        names[:] = [n for n in names if n != b".git"]
        for name in names + files:
            path = os.path.join(directory, name)
            st = os.lstat(path)  # a directory's own mtime and size follow its entries, which are compared anyway
            seen[os.fsdecode(os.path.relpath(path, os.fsencode(root)))] = (st.st_mode, st.st_ino) if name in names \
                else (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ino)
    if (root / "repo" / ".git").exists():  # tracked files changed, untracked or ignored ones new
        status = subprocess.run(["git", "status", "--porcelain", "--ignored", "-z"], cwd=root / "repo",
                                capture_output=True).stdout
        for entry in filter(None, os.fsdecode(status).split("\0")):
            seen[f"git:{os.path.normpath(os.path.join('repo', entry[3:]))}"] = entry[:2]
    return seen


# --- running and judging ----------------------------------------------------------------------------------------------

WRAPPERS = {"pipe": 'exec "$@" 0<&-', "full": 'exec "$@" 0<&- 1>/dev/full', "closed": 'exec "$@" 0<&- 1>&-',
            "epipe": '"$@" 0<&- | true; exit "${PIPESTATUS[0]}"'}


def run(case: Case, root: Path, cwd: Path, mpl: Path, env_extra: dict | None = None):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(root / "home"), "TMPDIR": str(root / "tmp"),
           "PYTHONPATH": str(ROOT / "src"), "MPLCONFIGDIR": str(mpl), "LANG": "C.UTF-8",
           **(case.env if env_extra is None else env_extra)}
    demote = drop_override if case.bare and os.geteuid() == 0 else None
    command = ["bash", "-c", WRAPPERS[case.stdout], "bash", sys.executable, "-m", "bench", *case.args]
    try:
        return subprocess.run(command, cwd=cwd, env=env, capture_output=True, timeout=TIMEOUT_S, preexec_fn=demote)
    except subprocess.TimeoutExpired:
        return None


def drop_override() -> None:
    """In the child, before exec: root keeps its uid but loses the capabilities that ignore permission bits."""
    import ctypes

    for capability in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH; PR_CAPBSET_DROP is 24
        if ctypes.CDLL(None, use_errno=True).prctl(24, capability, 0, 0, 0) != 0:
            os._exit(99)


def controls(data: bytes, encoding: str) -> str:
    """The raw control characters in ``data`` (bytes that are not ``encoding`` count too), as escapes."""
    found = sorted(set(CONTROL.findall(data.decode(encoding, "surrogateescape"))))
    return ", ".join(ascii(ch)[1:-1] for ch in found[:5])


def judge(case: Case, done, before: dict, after: dict, root: Path, cwd: Path, named: dict, rerun_wide) -> list[str]:
    """What is wrong with how bench answered ``case`` (nothing: it kept every promise)."""
    if done is None:
        return [f"hung: no exit within {TIMEOUT_S} s"]
    rc, out, err, why = done.returncode, done.stdout, done.stderr, []
    encoding = case.env.get("PYTHONIOENCODING", "utf-8")
    said = {name: data.decode(encoding, "replace") for name, data in (("stdout", out), ("stderr", err))}
    lines = said["stderr"].splitlines()
    if rc not in case.expect:
        why.append(f"exit {rc}, expected {'/'.join(map(str, case.expect))}")
    if "Traceback" in said["stdout"] + said["stderr"]:
        why.append("a traceback")
    for name, data in (("stdout", out), ("stderr", err)):
        if controls(data, encoding):
            why.append(f"raw control characters on {name} ({controls(data, encoding)})")
        if encoding == "ascii" and any(byte > 127 for byte in data):
            why.append(f"non-ASCII bytes on {name} under PYTHONIOENCODING=ascii")
        if any("ZQX" in line and "<script>" in line and "[link=" not in line for line in said[name].splitlines()):
            why.append(f"rich markup of a results file rendered on {name}")
        if "markdown" in case.args and "<script>alert" in said[name]:
            why.append(f"a results file's raw HTML in Markdown on {name}")
    if rc == 2:
        if case.stdout != "pipe":  # the output failed after the command's warnings: those stand before its error
            lines = [line for line in lines if not line.startswith("bench: warning: ")]
        if len(lines) != 1 or not lines[0].startswith("bench: error: "):
            why.append(f"stderr is {len(lines)} lines, not one 'bench: error:' line: {ascii(said['stderr'][:160])}")
        elif case.says and case.says not in lines[0]:
            why.append(f"the error does not say {case.says!r}")
        if out.strip():
            why.append(f"stdout on a mistake: {ascii(said['stdout'][:80])}")
    elif [line for line in lines if not line.startswith(("bench: warning: ", "bench: error: "))]:
        stray = next(line for line in lines if not line.startswith(("bench: warning: ", "bench: error: ")))
        why.append(f"stderr line not a bench warning: {ascii(stray[:120])}")
    if rc == 0 and case.stdout == "pipe":
        if case.says and case.says not in said["stdout"]:
            why.append(f"stdout does not say {case.says!r}")
        if {"json", "--json"} & set(case.args):
            try:
                json.loads(out)
            except ValueError as error:
                why.append(f"--json/--format json output is not JSON ({error})")
        if any(line != line.rstrip() for line in said["stdout"].splitlines()):
            why.append("trailing spaces on piped stdout")
        if "COLUMNS" in case.env and getattr(rerun_wide(), "stdout", out) != out:
            why.append("stdout changes with COLUMNS=40 (wrapped or cut)")
    allowed = [os.path.normpath(os.path.relpath(cwd / w, root)) for w in case.writes] \
        if rc == 0 or case.stdout != "pipe" else []  # a write is allowed where the run is not a mistake
    changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p) and not any(
        p.removeprefix("git:") == a or p.removeprefix("git:").startswith(a + os.sep) for a in allowed))
    if changed:
        why.append(f"wrote or changed {len(changed)} path(s): {ascii(', '.join(changed[:3]))[1:-1][:200]}")
    why += [f"created {path}" for path, existed in named.items() if os.path.lexists(path) != existed]
    for path in sorted(p for p in after if not p.startswith("git:") and before.get(p) != after.get(p)):
        if path.lower().endswith(TEXT_SUFFIXES) and (root / path).is_file():
            data = (root / path).read_bytes()
            if controls(data, "utf-8"):
                why.append(f"raw control characters in written {ascii(path)} ({controls(data, 'utf-8')})")
            if path.lower().endswith((".html", ".htm", ".svg")) and b"<script>alert(1)" in data:
                why.append(f"a results file's <script> live in written {ascii(path)}")
            if re.search(rb"href=['\"]?\s*javascript:", data, re.IGNORECASE):
                why.append(f"a javascript: link in written {ascii(path)}")
    return why


def run_case(case: Case, base: Path, number: int, cache: Path, mpl: Path) -> tuple[Case, list[str]]:
    root = base / f"case{number:03d}"
    cwd = lay_out(root, cache, case.where, ROOT)
    named = {a: os.path.lexists(a) for a in case.args if a.startswith("/") and not a.startswith(str(root))}
    before = snapshot(root)
    done = run(case, root, cwd, mpl)
    after = snapshot(root)

    def rerun_wide():
        again = base / f"case{number:03d}-wide"
        try:
            return run(case, again, lay_out(again, cache, case.where, ROOT), mpl,
                       {k: v for k, v in case.env.items() if k != "COLUMNS"})
        finally:
            shutil.rmtree(again, ignore_errors=True)

    try:
        return case, judge(case, done, before, after, root, cwd, named, rerun_wide)
    finally:
        shutil.rmtree(root, ignore_errors=True)  # root may remove a directory of mode 0


def main() -> int:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("-k", default="", help="only the cases whose command holds this text")
    options.add_argument("-j", type=int, default=max(2, min(4, os.cpu_count() or 2)), help="cases at once")
    chosen = options.parse_args()
    todo = [case for case in cases() if chosen.k in case.shown()]
    base = Path(tempfile.mkdtemp(prefix="bench-bad-inputs-"))
    cache, mpl = base / "cache", base / "mpl"
    cache.mkdir()
    build_cache(cache)
    subprocess.run([sys.executable, "-c", "import matplotlib.pyplot"], env={**os.environ, "MPLCONFIGDIR": str(mpl)},
                   check=True, capture_output=True)  # the font cache, built once, not by a case
    failed = 0
    try:
        with ThreadPoolExecutor(max_workers=chosen.j) as pool:
            futures = [pool.submit(run_case, case, base, number, cache, mpl) for number, case in enumerate(todo)]
            for future in futures:
                case, why = future.result()
                failed += bool(why)
                print(f"{'DEFECT: ' + '; '.join(why) if why else 'ok'}  {case.shown()}", flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"{len(todo) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
