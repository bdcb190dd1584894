"""One self-contained HTML report of results: environment, headline numbers per experiment, every figure (embedded
as PNG), the blocking truth table and the claims. Opens in a browser from the file alone; never imports CUDA
itself (the experiments' headline functions are pandas)."""

from __future__ import annotations

import base64
import html
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

ENVIRONMENT = ("hostname", "gpu_name", "gpu_uuid", "driver_version", "cuda_runtime", "pcie_gen", "pcie_width",
               "cupy_version", "numba_cuda_version", "git_commit")
FIGURES = {  # experiment -> figure file stems, in the order shown
    "bandwidth": ("bandwidth",), "launch": ("launch",),
    "overlap": ("overlap_scaling", "overlap_heatmap", "overlap_timeline"),
    "blocking": ("blocking_truth_table",), "serialization": (), "alloc": ("alloc",), "graphs": (),
}
STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; line-height: 1.4 }
h1 { margin-bottom: 0 } h2 { border-bottom: 2px solid #ddd; padding-bottom: .2em; margin-top: 2em }
.meta { color: #666 } table { border-collapse: collapse; margin: .8em 0; font-size: 90% }
th, td { border: 1px solid #ccc; padding: .25em .6em; text-align: left; vertical-align: top }
th { background: #f3f3f3 } img { max-width: min(100%, 1150px); border: 1px solid #eee; margin: .5em 0 }
.verdict-true { color: #b00; font-weight: bold } .verdict-false { color: #060; font-weight: bold }
.verdict-partly { color: #a60; font-weight: bold }
"""


def _table(frame: pd.DataFrame) -> str:
    return frame.to_html(index=False, border=0, escape=True)


def _environment(rows: pd.DataFrame) -> str:
    """One line per run: where and with what it ran."""
    columns = [column for column in ENVIRONMENT if column in rows]
    runs = rows[columns + ["run_id", "experiment"]].fillna("").astype(str).groupby(["run_id", *columns], sort=True)
    lines = []
    for key, group in runs:
        run = dict(zip(["run_id", *columns], key))
        lines.append({
            "run": run["run_id"], "experiments": ", ".join(sorted(set(group["experiment"]))),
            "host": run.get("hostname", ""), "GPU": f"{run.get('gpu_name', '')} ({run.get('gpu_uuid', '')[:13]}…)",
            "driver / CUDA runtime": f"{run.get('driver_version', '')} / {run.get('cuda_runtime', '')}",
            "PCIe": f"Gen{run.get('pcie_gen', '?')} x{run.get('pcie_width', '?')}",
            "libraries": f"{run.get('cupy_version', '')}, {run.get('numba_cuda_version', '')}",
            "commit": run.get("git_commit", "")[:12],
        })
    return _table(pd.DataFrame(lines))


def _figure(path: Path) -> str:
    encoded = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{html.escape(path.stem)}" src="data:image/png;base64,{encoded}">'


def _claims(rows: pd.DataFrame) -> str:
    from bench import claims

    lines = []
    for _, claim in claims.table(rows).iterrows():
        lines.append(f"<tr><td>{html.escape(claim['claim'])}</td>"
                     f"<td class='verdict-{html.escape(claim['verdict'].split()[0])}'>{html.escape(claim['verdict'])}"
                     f"</td><td>{html.escape(claim['docs say'])} (<a href='{html.escape(claim['source'])}'>docs</a>)"
                     f"</td><td>{html.escape(claim['measured'])}</td></tr>")
    return ("<table><tr><th>claim</th><th>verdict</th><th>the documentation</th><th>measured</th></tr>"
            + "".join(lines) + "</table>")


def render(rows: pd.DataFrame, tables: dict, source: str = "") -> str:
    """The report as an HTML string."""
    from bench import plots
    from bench.experiments import registry

    experiments = registry()
    present = [name for name in experiments if (rows["experiment"] == name).any()]
    parts = [f"<h1>bench report</h1><p class='meta'>{html.escape(source)}: {len(rows)} configurations of "
             f"{', '.join(present)}; generated {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC</p>",
             "<h2>Environment</h2>", _environment(rows)]
    with tempfile.TemporaryDirectory() as scratch:
        written = {path.stem: path for path in plots.plot_results(rows, Path(scratch), tables)
                   if path.suffix == ".png"}
        for name in present:
            mine = rows[rows["experiment"] == name]
            experiment = experiments[name]
            ok = int((mine["status"] == "ok").sum())
            parts.append(f"<h2>{html.escape(name)}</h2><p>{html.escape(experiment.description)}: {ok} of "
                         f"{len(mine)} configurations ok.</p>")
            headline = experiment.headline(mine)
            if len(headline):
                parts.append(_table(headline))
            parts += [_figure(written[stem]) for stem in FIGURES.get(name, ()) if stem in written]
            if name == "blocking":
                parts += ["<h3>Claims</h3>", _claims(rows)]
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>bench report</title>"
            f"<style>{STYLE}</style></head><body>{''.join(parts)}</body></html>")


def write(rows: pd.DataFrame, tables: dict, out: Path, source: str = "") -> Path:
    """Render and write atomically (a reader never sees half a report)."""
    out = Path(out)
    document = render(rows, tables, source)
    out.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as sink:
            sink.write(document)
        os.chmod(temporary, 0o644)
        os.replace(temporary, out)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return out
