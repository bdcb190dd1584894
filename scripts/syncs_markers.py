"""What a case of scripts/syncs_cases.py expects, read from markers in its own code, and how what ``bench.syncs``
found compares, and the case table's columns, files and printed summary (no GPU needed: tests/test_syncs_markers.py).

A marker is a comment on the line of the case's code that waits:

    y = x.sum().item()                                   # wait            (once each time the line runs)
    for _ in range(30): total += x.sum().item()          # wait x30        (30 times)
    t.join()                                             # wait on thread  (the region's line that waits on another
                                                         #                  thread; ``wait on thread x2``: twice)
    x.sum()                                              # no wait         (optional: says so, counts nothing)

A marker starts a comment or a ``#``-part of one (``# noqa: E731  # wait``). The expected lines and waits of a case
are those of the functions it names (the region, and the thread targets or helpers it lists), read with
``inspect.getsourcelines``: a function defined inside another is read with it. A found place matches a marked line by
file and line number.
"""

from __future__ import annotations

import inspect
import io
import json
import os
import re
import tokenize
import traceback
from dataclasses import dataclass
from pathlib import Path

MARKER = re.compile(r"^(?:(?P<no>no\s+wait)|wait(?:\s+x\s*(?P<n1>\d+))?(?P<on>\s+on\s+thread)?"
                    r"(?:\s+x\s*(?P<n2>\d+))?)(?=$|\s*[:;,(\-])", re.IGNORECASE)

TABLE = "syncs-cases"  # the parquet's metadata table name (bench's own "syncs" readers pass it over)


@dataclass(frozen=True)
class Marker:
    """One marked line: where, how many waits it expects each time the region runs."""

    file: str  # resolved path
    line: int
    waits: int  # 0 for "no wait"
    on_thread: bool  # "wait on thread": a region line that waits on another thread
    function: str
    source: str  # the line's code, the comment included

    @property
    def where(self) -> str:
        return f"{os.path.basename(self.file)}:{self.line}"


def parse_comment(comment: str) -> tuple[int, bool] | None:
    """(waits, on_thread) of a comment's marker, or None where it has none: ``# wait`` -> (1, False); ``# wait x30``
    -> (30, False); ``# wait on thread`` -> (1, True); ``# no wait`` -> (0, False). A marker may be followed by a
    note after ':', ';', ',', '(' or '-' (``# wait: the copy``); prose (``# wait for the copy``, ``# waits``) is no
    marker."""
    for part in comment.split("#"):
        found = MARKER.match(part.strip())
        if found is None:
            continue
        if found["no"]:
            return 0, False
        times = found["n1"] or found["n2"]
        return (int(times) if times else 1), bool(found["on"])
    return None


def _comments(lines: list[str]) -> list[tuple[int, str]]:
    """(offset of the line in ``lines``, comment text) for every comment token; a line-by-line scan where the source
    does not tokenize (a function's lines cut out of a file)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO("".join(lines)).readline))
        return [(token.start[0] - 1, token.string) for token in tokens if token.type == tokenize.COMMENT]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        found = []
        for offset, line in enumerate(lines):
            at = _comment_start(line)
            if at >= 0:
                found.append((offset, line[at:]))
        return found


def _comment_start(line: str) -> int:
    """Where the comment of one line starts (-1: none), skipping '#' inside simple quotes."""
    quote = ""
    for index, char in enumerate(line):
        if quote:
            if char == quote and line[index - 1] != "\\":
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "#":
            return index
    return -1


def source_file(function) -> str:
    """The resolved path of a function's (or code object's) source file."""
    code = getattr(inspect.unwrap(function), "__code__", function)
    return os.path.realpath(inspect.getsourcefile(code) or code.co_filename)


def markers_of(*functions) -> list[Marker]:
    """Every marked line of ``functions`` (functions or code objects; the functions defined inside them are read
    with them), in file order, each line once."""
    seen: dict[tuple[str, int], Marker] = {}
    for function in functions:
        function = inspect.unwrap(function)
        lines, start = inspect.getsourcelines(function)
        file = source_file(function)
        name = getattr(function, "__name__", None) or function.co_name
        for offset, comment in _comments(lines):
            parsed = parse_comment(comment)
            if parsed is None:
                continue
            waits, on_thread = parsed
            line = start + offset
            seen.setdefault((file, line), Marker(file, line, waits, on_thread, name,
                                                 lines[offset].strip()))
    return sorted(seen.values(), key=lambda marker: (marker.file, marker.line))


def expected_of(markers: list[Marker]) -> tuple[int, int]:
    """(lines expected to wait, waits expected in all)."""
    waiting = [marker for marker in markers if marker.waits]
    return len(waiting), sum(marker.waits for marker in waiting)


@dataclass(frozen=True)
class Match:
    expected_lines: int
    expected_waits: int
    found_lines: int
    found_waits: int
    agrees: bool  # the same lines, each with as many waits as marked
    expected: str  # "file:line xN code" per marked line
    found: str  # "file:line xN [thread] code" per found place
    missed: str  # marked lines not found
    unexpected: str  # found lines not marked (or marked "no wait")
    count_mismatch: str  # lines found with another count than marked
    found_threads: str  # the threads whose lines waited ("" where the region's own)
    on_threads: str  # the threads region lines waited on
    thread_mismatch: str  # a "wait on thread" line found without on_thread, or on_thread on an unmarked one

    def as_row(self) -> dict:
        return dict(self.__dict__)


def _thread(place) -> str:
    return getattr(place, "thread", "") or ""


def _on_thread(place) -> str:
    return getattr(place, "on_thread", "") or ""


def describe_place(place) -> str:
    thread = _thread(place)
    on = _on_thread(place)
    tags = (f" [thread {thread}]" if thread else "") + (f" [on thread {on}]" if on else "")
    return f"{os.path.basename(place.file)}:{place.line} x{place.count}{tags} {place.source}"


def match(markers: list[Marker], places) -> Match:
    """Compare the marked lines with the places ``bench.syncs`` found (``SyncsResult.places``: objects with
    ``file``, ``line``, ``count``, ``source`` and, where the watcher tells, ``thread`` and ``on_thread``)."""
    waiting = {(marker.file, marker.line): marker for marker in markers if marker.waits}
    found = {}
    for place in places:
        key = (os.path.realpath(place.file), place.line)
        if key in found:  # one line, two threads: the counts add up
            first = found[key]
            found[key] = (first[0], first[1] + place.count)
        else:
            found[key] = (place, place.count)
    missed = [marker for key, marker in waiting.items() if key not in found]
    unexpected = [place for key, (place, _) in found.items() if key not in waiting]
    mismatched = [f"{waiting[key].where} marked x{waiting[key].waits}, found x{count}"
                  for key, (_, count) in found.items() if key in waiting and waiting[key].waits != count]
    thread_notes = []
    for key, (place, _) in found.items():
        marker = waiting.get(key)
        if hasattr(place, "on_thread") and marker is not None and marker.on_thread != bool(_on_thread(place)):
            thread_notes.append(f"{marker.where} marked {'on thread' if marker.on_thread else 'own'}, found "
                                f"{'on thread ' + _on_thread(place) if _on_thread(place) else 'no on_thread'}")
    expected_lines, expected_waits = expected_of(markers)
    return Match(
        expected_lines, expected_waits, len(found), sum(count for _, count in found.values()),
        not missed and not unexpected and not mismatched,
        "; ".join(f"{marker.where} x{marker.waits}{' on thread' if marker.on_thread else ''} {marker.source}"
                  for marker in markers if marker.waits),
        "; ".join(describe_place(place) for place in places),
        "; ".join(f"{marker.where} x{marker.waits} {marker.source}" for marker in missed),
        "; ".join(describe_place(place) for place in unexpected),
        "; ".join(mismatched),
        ", ".join(dict.fromkeys(_thread(place) for place in places if _thread(place))),
        ", ".join(dict.fromkeys(_on_thread(place) for place in places if _on_thread(place))),
        "; ".join(thread_notes))


def text_table(rows: list[dict], columns: list[tuple[str, str, int]]) -> str:
    """A plain text table: (title, key, width) per column; a cell longer than its width is cut with '…'."""
    def cell(value, width: int) -> str:
        text = "—" if value is None else ("yes" if value is True else "no" if value is False else
                                          f"{value:.1f}" if isinstance(value, float) else str(value))
        return text if len(text) <= width else text[:width - 1] + "…"

    widths = [max(len(title), min(width, max((len(cell(row.get(key), width)) for row in rows), default=0)))
              for title, key, width in columns]
    lines = ["  ".join(title.ljust(width) for (title, _, _), width in zip(columns, widths))]
    lines.append("  ".join("-" * width for width in widths))
    for row in rows:
        lines.append("  ".join(cell(row.get(key), width).ljust(width)
                               for (_, key, _), width in zip(columns, widths)).rstrip())
    return "\n".join(lines)


def table_columns() -> tuple:
    """The typed columns of a syncs-cases file: one row per case, then the environment."""
    from bench.results.schema import FLAG, FLOAT, INT, TEXT, column, environment_columns

    return (
        column("run_id", TEXT, "the run: its UTC start time"),
        column("case", TEXT, "what the case's region does"),
        column("group", TEXT, "the group of cases (torch, host, cupy, numba, jax, two-gpus, models)"),
        column("library", TEXT, "the library the region uses"),
        column("status", TEXT, "ok, error (error says why) or skipped (error says why)"),
        column("error", TEXT, "why a row is not ok"),
        column("cost_case", FLAG, "a cost case: its bench.syncs wall time is the point"),
        column("expected_lines", INT, "lines marked '# wait' (any count) in the case's code"),
        column("expected_waits", INT, "waits the markers add up to, per run of the region"),
        column("found_lines", INT, "lines bench.syncs named as waiting"),
        column("found_waits", INT, "waits bench.syncs counted at them"),
        column("agrees", FLAG, "the same lines as marked, each with as many waits"),
        column("expected", TEXT, "the marked lines: file:line xN code"),
        column("found", TEXT, "the lines found: file:line xN [thread] code"),
        column("missed", TEXT, "marked lines not found"),
        column("unexpected", TEXT, "lines found that no marker says wait"),
        column("count_mismatch", TEXT, "lines found with another count than marked"),
        column("found_threads", TEXT, "the threads whose lines waited (empty: only the region's own)"),
        column("on_threads", TEXT, "the threads the region's lines waited on"),
        column("thread_mismatch", TEXT, "a 'wait on thread' line found without on_thread, or the reverse"),
        column("own_work", TEXT, "lines that stood as long without the hold (host work, not waits)"),
        column("independent", TEXT, "the independent method's verdict on the region: waits, no waits or unclear"),
        column("independent_method", TEXT, "spin on its stream, or host time"),
        column("independent_agrees", FLAG, "the independent verdict says waits exactly where markers expect some"),
        column("independent_error", TEXT, "why the independent method gave no verdict"),
        column("spin_verdict", TEXT, "bench.probe with a spin on the region's stream: its verdict"),
        column("spin_ms", FLOAT, "that spin's length"),
        column("host_time_waited", FLAG, "host time: the region held the host for most of its GPU time"),
        column("host_ms", FLOAT, "the region's host time, nothing held"),
        column("gpu_done_ms", FLOAT, "ms from the region's start until the GPU was done"),
        column("torch_debug_warned", FLAG, "PyTorch's set_sync_debug_mode('warn') warned during the region"),
        column("syncs_s", FLOAT, "wall seconds of bench.syncs on the case (warm-up, natural and held runs)"),
        column("region_ms", FLOAT, "the region without the hold (bench.syncs)"),
        column("held_region_ms", FLOAT, "the region under the hold (bench.syncs)"),
        column("hold_ms", FLOAT, "how long the GPU stayed held while lines stood still, in all"),
        column("settle_ms", FLOAT, "how long a line stood still under the hold before it counted"),
        *environment_columns(),
    )


def slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text).strip("-")[:60]


def write_outputs(out: Path, stem: str, rows: list[dict], summary: dict, environment,
                  found: list[tuple[str, object]]) -> list[Path]:
    """The table as parquet (typed, through bench.results.store) and JSON, and bench.syncs.save's per-line rows."""
    from bench.results import store, writes

    written = [store.write_declared(out / f"{stem}-syncs-cases.parquet",
                                    [{**environment.as_dict(), **row} for row in rows], table_columns(), TABLE,
                                    new=True)]
    json_path = out / f"{stem}-syncs-cases.json"
    writes.write_bytes(json_path, json.dumps({**summary, "rows": rows}, indent=2, default=str).encode())
    written.append(json_path)
    if found:
        try:
            from bench.syncs import save

            written.append(save(found, environment, out / f"{stem}-syncs.parquet"))
        except Exception:  # the per-line rows are a bonus: the table is written
            traceback.print_exc()
    return written


SUMMARY_COLUMNS = [("case", "case", 52), ("lib", "library", 10), ("exp L/W", "expected_lw", 9),
                   ("found L/W", "found_lw", 9), ("agrees", "agrees", 6), ("independent", "independent_text", 20),
                   ("syncs s", "syncs_s", 7), ("status", "status", 7)]
NOTES = ("error", "missed", "unexpected", "count_mismatch", "thread_mismatch", "independent_error")


def _pair(lines, waits) -> str:
    return "—" if lines is None else f"{lines}/{waits}"


def summary_table(rows: list[dict]) -> str:
    """The short text table the GPU call's output tail shows: a row per case (expected and found lines/waits,
    whether they agree, the independent verdict and its method, bench.syncs' seconds), a count, and what went wrong
    in each case that does not agree."""
    shown = []
    for row in rows:
        verdict, method = row.get("independent"), row.get("independent_method") or ""
        shown.append({**row, "expected_lw": _pair(row.get("expected_lines"), row.get("expected_waits")),
                      "found_lw": _pair(row.get("found_lines"), row.get("found_waits")),
                      "independent_text": f"{verdict} ({'spin' if 'spin' in method else 'host'})" if verdict else None})
    text = text_table(shown, SUMMARY_COLUMNS)
    done = [row for row in rows if row.get("status") == "ok"]
    text += (f"\n{sum(bool(row.get('agrees')) for row in done)} of {len(done)} cases agree with their markers; "
             f"the independent method agrees on {sum(bool(row.get('independent_agrees')) for row in done)}; "
             f"{len(rows) - len(done)} not ok")
    for row in rows:
        notes = [f"{key}: {row[key]}" for key in NOTES if row.get(key)]
        if notes and not (row.get("status") == "ok" and row.get("agrees") and not row.get("independent_error")):
            text += f"\n- {row['case']}: " + " | ".join(notes)[:400]
    return text
