"""``bench trace --from``: a PyTorch profiler's trace (Kineto's Chrome JSON) read as bench's records without a GPU,
built here event by event as Kineto writes them: the figures, the lines from its Python stacks, what a trace that
lacks a field leaves out, and one line for a file that is not a trace."""

import gzip
import json

import pytest

from bench.platform.errors import ResultsError
from bench.usercode.activity import Op
from bench.usercode.trace.kineto import read

PID, TID = 4242, 4242


def _event(cat, name, ts, dur, pid=PID, tid=TID, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _trace(stacks=True, runtime=True, properties=True, byte_counts=True):
    """A step: an H2D copy from pageable memory hidden behind a kernel, a D2H copy into pinned memory after it, a
    synchronize the host waits in until the copy is done, and a kernel launched 100 µs after it returns (an idle gap
    of 300 µs after a wait)."""
    copy_bytes = {"bytes": 1 << 20} if byte_counts else {}
    events = [
        _event("kernel", "gemm", 1000.0, 300.0, pid=0, tid=7, device=0, stream=7, correlation=1),
        _event("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 1100.0, 100.0, pid=0, tid=8, device=0, stream=8,
               correlation=2, **copy_bytes),
        _event("gpu_memcpy", "Memcpy DtoH (Device -> Pinned)", 1300.0, 150.0, pid=0, tid=7, device=0, stream=7,
               correlation=3, **copy_bytes),
        _event("kernel", "relu", 1750.0, 50.0, pid=0, tid=7, device=0, stream=7, correlation=5),
    ]
    if runtime:
        events += [
            _event("cuda_runtime", "cudaLaunchKernel", 990.0, 5.0, cbid=211, correlation=1),
            _event("cuda_runtime", "cudaMemcpyAsync", 996.0, 204.0, cbid=41, correlation=2),
            _event("cuda_runtime", "cudaMemcpyAsync", 1201.0, 4.0, cbid=41, correlation=3),
            _event("cuda_runtime", "cudaStreamSynchronize", 1206.0, 444.0, cbid=131, correlation=4),
            _event("cuda_runtime", "cudaLaunchKernel", 1745.0, 4.0, cbid=211, correlation=5),
        ]
    if stacks:
        events += [
            _event("python_function", "train.py(30): <module>", 900.0, 1000.0, **{"Python id": 1}),
            _event("python_function", "train.py(12): step", 980.0, 800.0, **{"Python id": 2}),
            _event("python_function", "<built-in method item of Tensor object at 0x7f00>", 1205.0, 446.0),
            _event("python_function", "torch/nn/modules/module.py(1501): _call_impl", 985.0, 12.0),
        ]
    document = {"schemaVersion": 1, "traceEvents": events, "displayTimeUnit": "ms",
                "baseTimeNanoseconds": 1700000000000000000, "distributedInfo": {"backend": "nccl", "rank": 1}}
    if properties:
        document["deviceProperties"] = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85000000000}]
    return document


@pytest.fixture
def write(tmp_path):
    def written(document, name="step.pt.trace.json", packed=False):
        path = tmp_path / name
        data = json.dumps(document).encode()
        path.write_bytes(gzip.compress(data) if packed else data)
        return path

    return written


def test_the_records_their_gpu_stream_memory_and_the_calls_lines(write):
    for packed in (False, True):
        found = read(write(_trace(), "step.json.gz" if packed else "step.json", packed=packed))
        ops = [(a.op, a.stream, a.host_memory, a.bytes, a.start_ns, a.end_ns) for a in found.recording.activities]
        assert ops == [(Op.KERNEL, 7, "", 0, 1_000_000, 1_300_000),
                       (Op.H2D, 8, "pageable", 1 << 20, 1_100_000, 1_200_000),
                       (Op.D2H, 7, "pinned", 1 << 20, 1_300_000, 1_450_000), (Op.KERNEL, 7, "", 0, 1_750_000, 1_800_000)]
        assert found.rank == 1 and found.gpu_names == {0: "NVIDIA H100 80GB HBM3"}
        assert found.missing == ["the profiler records which function made a call, not the line in it: a wait or a "
                                 "copy is named at its function's first line (file:line of its def)"]
        calls = {(call.call, call.correlation): call for call in found.recording.calls}
        assert set(calls) == {("cudaMemcpyAsync", 2), ("cudaMemcpyAsync", 3), ("cudaStreamSynchronize", 4)}
        wait = calls[("cudaStreamSynchronize", 4)]
        assert [(frame.file, frame.line, frame.library) for frame in wait.frames] == [
            ("train.py", 30, ""), ("train.py", 12, "")]  # the C function's event names no file: not a frame
        # a frame that ended before the call is not around it
        assert [frame.function for frame in calls[("cudaMemcpyAsync", 2)].frames] == ["<module>", "step"]


def test_the_figures_the_lines_and_what_no_reference_leaves_out(write, no_gpu):
    from bench.usercode.trace.profiler import described_trace

    result, notes = described_trace(write(_trace()), None)
    assert result.makespan_ms == pytest.approx(0.8) and result.whole.copy_ms == pytest.approx(0.25)
    assert result.whole.hidden_ms == pytest.approx(0.1)  # the H2D copy ran under gemm; the D2H copy after it
    assert result.bound_ms is None and result.efficiency is None  # no pinned reference: no bound
    [gap] = [gap for gap in result.gaps if gap.wait]
    assert gap.ms == pytest.approx(0.3) and gap.wait.call == "cudaStreamSynchronize"
    [group] = result.pageable
    assert (group.op, group.bytes, group.line) == (Op.H2D, 1 << 20, "train.py:12")
    text = str(result)
    assert "1 pageable copy (no pinned reference: their cost against pinned memory is left out):" in text
    assert "nan" not in text and "at train.py:12" in text
    assert len(notes) == 2 and "function's first line" in notes[0] and no_gpu in notes[1]


@pytest.mark.parametrize("lacking, said", [
    ({"stacks": False}, "no Python stacks"),
    ({"runtime": False}, "no CUDA runtime calls"),
    ({"byte_counts": False}, "does not say its bytes"),
])
def test_a_trace_that_lacks_a_field_says_what_it_leaves_out(write, lacking, said):
    found = read(write(_trace(**lacking)))
    assert any(said in note for note in found.missing), found.missing
    if "stacks" in lacking:
        assert all(not call.frames for call in found.recording.calls)


def test_a_trace_without_its_gpus_name_gets_no_bound(write):
    from bench.usercode.trace.profiler import described_trace

    result, notes = described_trace(write(_trace(properties=False)), None)
    assert result.bound_ms is None and any("does not name its GPU" in note for note in notes)


@pytest.mark.parametrize("content", [
    b"", b"not json", b"[1, 2", json.dumps({"events": []}).encode(), json.dumps([1, 2]).encode(),
    json.dumps({"traceEvents": [_event("kernel", "k", "soon", 1.0, device=0, stream=7)]}).encode(),
    json.dumps({"traceEvents": [_event("kernel", "k", 1.0, -1.0, device=0, stream=7)]}).encode(),
    json.dumps({"traceEvents": [_event("kernel", "k", 1.0, 1.0, device="0", stream=7)]}).encode(),
    json.dumps({"traceEvents": [_event("gpu_memcpy", "Memcpy sideways", 1.0, 1.0, device=0, stream=7)]}).encode(),
    json.dumps({"traceEvents": [_event("kernel", "k", 1e400, 1.0, device=0, stream=7)]}).encode().replace(
        b"Infinity", b"1e400"),
    gzip.compress(b"{", mtime=0),
    b"\x1f\x8b\x08broken",
    gzip.compress(b'{"traceEvents": []}', mtime=0)[:12] + b"\xff" * 40,  # a gzip header, then a corrupt deflate stream
    b'{"traceEvents": [], "n": ' + b"9" * 5000 + b"}",  # an integer longer than Python reads
    json.dumps({"traceEvents": [_event("kernel", "k", 1.0, 1.0, device=0, stream=1 << 64)]}).encode(),
    json.dumps({"traceEvents": [_event("kernel", "k", 1e17, 1.0, device=0, stream=7)]}).encode(),
    json.dumps({"traceEvents": [_event("gpu_memset", "Memset (Device)", 1.0, 1.0, device=0, stream=7,
                                       bytes=-4)]}).encode(),
], ids=lambda content: f"{len(content)}-bytes")
def test_a_file_that_is_not_a_trace_is_one_line(tmp_path, content):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    if content == json.dumps([1, 2]).encode():  # events that are not objects are passed over: an empty trace
        assert read(path).recording.activities == []
        return
    with pytest.raises(ResultsError) as caught:
        read(path)
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)


def test_the_command_reads_a_trace_and_refuses_tracing_options(write, tmp_path, capsys, no_gpu):
    from bench import cli

    path = write(_trace())
    assert cli.main(["trace", "--from", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("step.pt.trace.json (the PyTorch profiler's trace):\n") and "note: " in out
    assert cli.main(["trace", "--from", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["notes"]
    for extra in (["--runs", "3"], ["--no-lines"], ["mymodule:step"], ["--merge", str(path)]):
        assert cli.main(["trace", "--from", str(path), *extra]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "takes no" in err[0], err
    assert cli.main(["trace", "--from", str(tmp_path / "missing.json")]) == 2
    assert "no such file" in capsys.readouterr().err
    saved = tmp_path / "step.parquet"
    assert cli.main(["trace", "--from", str(path), "--save", str(saved)]) == 0 and saved.is_file()
    assert cli.main(["trace", "--merge", str(saved)]) == 0  # what it saved reads back as bench's own trace
    assert "makespan 0.800 ms" in capsys.readouterr().out


def test_compare_reads_profiler_traces_and_names_what_got_worse(write, tmp_path, capsys):
    from bench import cli

    old = write(_trace(), "old.json")
    worse = _trace()
    for event in worse["traceEvents"]:  # the input batch now comes from pageable memory; before, it was pinned
        if event["name"] == "Memcpy HtoD (Pageable -> Device)":
            event["name"] = "Memcpy HtoD (Pinned -> Device)"
    before = write(worse, "before.json.gz", packed=True)
    status = cli.main(["compare", str(before), str(old)])
    out = capsys.readouterr().out
    assert status == 0 and "pageable copy: 1 × H2D of 1,048,576 bytes" in out and "(train.py:12)" in out, out
    assert cli.main(["compare", str(old), str(old)]) == 0
    assert "what got worse" not in capsys.readouterr().out


def test_names_from_the_file_cannot_forge_lines_or_break_a_writer(write, tmp_path, capsys, no_gpu):
    from bench import cli

    trace = _trace()
    for event in trace["traceEvents"]:
        if event["name"] == "gemm":
            event["name"] = "gemm\nnote: all good\x1b[2J\ud800"
        if event["name"] == "cudaStreamSynchronize":
            event["name"] = "cudaStreamSynchronize\nhost waits: none"
    trace["deviceProperties"][0]["name"] = "H100\nforged"
    path = write(trace)
    assert cli.main(["trace", "--from", str(path), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert "gemm\\nnote: all good\\x1b[2J\\ud800" in {a["name"] for a in shown["activities"]}
    assert cli.main(["trace", "--from", str(path)]) == 0
    out = capsys.readouterr().out
    assert "\nnote: all good" not in out and "\nhost waits: none" not in out and "\x1b" not in out
    saved = tmp_path / "saved.parquet"
    assert cli.main(["trace", "--from", str(path), "--save", str(saved)]) == 0 and saved.is_file()


def test_the_trace_names_another_machines_files_none_is_read_here(write, tmp_path, monkeypatch, capsys):
    from bench.usercode.trace.profiler import described_trace

    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("\n" * 11 + "SECRET = 'a local line the trace names'\n")
    result, _ = described_trace(write(_trace()), None, references=False)
    assert "SECRET" not in result.to_json() and all(not wait.source for wait in result.waits)


def test_a_copy_of_a_kind_kineto_did_not_know_is_left_out_with_a_note(write):
    trace = _trace()
    trace["traceEvents"].append(_event("gpu_memcpy", "Memcpy <unknown> (Device -> Device)", 2000.0, 1.0, pid=0,
                                       tid=9, device=0, stream=9, correlation=9, bytes=4))
    trace["traceEvents"].append(_event("gpu_memcpy", "Memcpy HtoD (Pagable -> Device)", 2100.0, 1.0, pid=0, tid=9,
                                       device=0, stream=9, correlation=10, bytes=4))  # older Kineto's spelling
    found = read(write(trace))
    assert any("1 copy of a kind the profiler did not know" in note for note in found.missing)
    assert [a.host_memory for a in found.recording.activities if a.correlation == 10] == ["pageable"]


def test_compare_never_opens_a_pipe_and_refuses_an_empty_trace(write, tmp_path, capsys):
    import os

    from bench import cli
    from bench.usercode.trace.kineto import is_profiler_trace

    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    assert not is_profiler_trace(pipe)  # returns at once: a pipe is never opened
    empty = write({"traceEvents": []}, "empty.json")
    assert cli.main(["compare", str(empty), str(write(_trace()))]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds no trace rows" in err[0], err


def test_an_older_kinetos_times_since_1970_are_read(write):
    trace = _trace()
    for event in trace["traceEvents"]:  # PyTorch 2.3 and before: µs since 1970, not since the trace's base time
        event["ts"] += 1712345678901234.0
    found = read(write(trace))
    assert [a.end_ns - a.start_ns for a in found.recording.activities] == [300_000, 100_000, 150_000, 50_000]
