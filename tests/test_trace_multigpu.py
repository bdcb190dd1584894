"""A trace of two GPUs and their collectives, without a GPU: synthetic records on two devices whose NCCL kernels
overlap compute in part, every figure checked against values worked out by hand below; the ranks' traces saved,
read back and merged (in memory, from files, on the command line); the pytest gate on communication hidden."""

import contextlib
from pathlib import Path

import pandas as pd
import pytest

import synthetic
from bench import cli
from bench.analysis import plots
from bench.results import store
from bench.trace import merged, result_of, save
from bench.usercode.activity import Activity, HostCall, Op, Recording
from bench.usercode.stacks import Frame
from bench.usercode.trace.collectives import is_collective
from bench.usercode.trace.load import load
from bench.usercode.trace.merge import merged_files
from bench.usercode.trace.timeline import timeline
from test_trace_perfetto import read_timeline

US = 1_000  # ns
MIB = 1 << 20
ORIGIN = 5 * 10**12  # CUPTI's clock is far from zero
NCCL_NEW = "_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE"  # as CUPTI names it
NCCL_OLD = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"  # NCCL before 2.19, demangled


# --- which kernels are communication ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", [
    NCCL_NEW, NCCL_OLD,
    "_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LLP11ncclDevCommmP8ncclWork",  # NCCL 2.19's arguments, mangled
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)",  # demangled
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "ncclDevKernel_SendRecv",
    "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm *, ncclWorkElem)",
    "ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)",  # RCCL's one kernel
])
def test_nccls_kernels_are_communication(name):
    assert is_collective(name)


@pytest.mark.parametrize("name", [
    "_ZN7cutlass7Kernel2I43cutlass_80_simt_sgemm_256x128_8x4_nn_align1EEvNT_6ParamsE",
    "_ZN2at6native29vectorized_elementwise_kernelILi4EZZZNS0_49_GLOBAL__N__d2ba64fb_16_TensorCompare_cu_71e06f4e19"
    "launch_clamp_scalarERNS_18TensorIteratorBaseEN3c106ScalarES6_NS0_6detail11ClampLimitsEENKUlvE_clEvENKUlvE5_clEv"
    "EUlfE_St5arrayIPcLm2EEEEviT0_T1_",
    "cupy_maximum__float32_float_float32", "void at::native::vectorized_elementwise_kernel<4>", "my_nccl_like_kernel",
    "_Z10gemm_ncclsPf", "",
])
def test_other_kernels_are_compute(name):
    assert not is_collective(name)


# --- two GPUs, by hand -----------------------------------------------------------------------------------------------

def at(file, line):
    return (Frame("/u/main.py", 1, "<module>", ""), Frame(file, line, "step", ""))


def kernel(device, stream, start, end, name="gemm", correlation=0):
    return Activity(Op.KERNEL, stream, ORIGIN + start * US, ORIGIN + end * US, name=name, correlation=correlation,
                    device=device)


# µs. GPU 0: compute 0-100 and 180-260 on stream 7; NCCL 60-160 and 240-300 on stream 20; an H2D copy 80-140 on
# stream 8 (made at x.py:5, correlation 5). GPU 1: compute 20-200 on stream 3; NCCL 150-250 on stream 21; a memset
# 250-270 on stream 3 (made at y.py:9, correlation 5 too: each process numbers its own calls).
GPU0 = [kernel(0, 7, 0, 100, correlation=1), kernel(0, 20, 60, 160, NCCL_NEW, 2), kernel(0, 7, 180, 260, "relu", 3),
        kernel(0, 20, 240, 300, NCCL_NEW, 4),
        Activity(Op.H2D, 8, ORIGIN + 80 * US, ORIGIN + 140 * US, bytes=MIB, host_memory="pinned", correlation=5)]
GPU0_CALLS = [HostCall("cuMemcpyHtoDAsync", ORIGIN + 70 * US, ORIGIN + 75 * US, 5, at("/u/x.py", 5))]
GPU1 = [kernel(1, 3, 20, 200, "gemm", 1), kernel(1, 21, 150, 250, NCCL_OLD, 2),
        Activity(Op.MEMSET, 3, ORIGIN + 250 * US, ORIGIN + 270 * US, bytes=4096, correlation=5, device=1)]
GPU1_CALLS = [HostCall("cuMemsetD32Async", ORIGIN + 240 * US, ORIGIN + 245 * US, 5, at("/u/y.py", 9))]


def copy_bound(h2d, d2h):
    assert (h2d, d2h) == (MIB, 0)  # GPU 0's copy only
    return 0.05, 2


def traced(activities, calls, rank=None):
    return result_of([Recording(activities, calls)], copy_bound=copy_bound, pinned=None, target="ddp:step",
                     rank=rank)


def assert_by_hand(found):
    """The figures worked out by hand for the two GPUs above (ms)."""
    gpu0, gpu1 = found.gpus[0], found.gpus[1]
    # GPU 0: compute [0,100] [180,260] = 180; communication [60,160] [240,300] = 160, of which [60,100] and
    # [240,260] beside compute = 60 (37.5%); exposed 100, of it [100,160] between the first and last compute (0-260)
    # = 60: the tail [260,300] follows the last compute. The copy [80,140] hides only behind GPU 0's own compute,
    # [80,100] = 20 of 60 (GPU 1 computes throughout it). Nothing runs from 160 to 180: one gap of 20.
    o = gpu0.overlap
    assert (gpu0.makespan_ms, o.busy_ns["compute"], o.comm_ns, o.comm_hidden_ns) == (0.3, 180 * US, 160 * US, 60 * US)
    assert gpu0.comm_hidden == 0.375 and gpu0.as_dict()["comm_exposed_ms"] == 0.1 and o.comm_idle_ns == 60 * US
    assert (o.copy_ns, o.hidden_ns, gpu0.hidden) == (60 * US, 20 * US, pytest.approx(1 / 3))
    assert [(g.start_ns - ORIGIN, g.end_ns - ORIGIN) for g in o.gaps] == [(160 * US, 180 * US)]
    assert (o.fill_ns, o.drain_ns, gpu0.bound_ms) == (0, 40 * US, 0.18)  # bound: compute 0.18 > copies 0.05
    # GPU 1: compute [20,200] and the memset [250,270] = 200; communication [150,250] = 100, [150,200] beside compute
    # = 50, exposed 50, all of it between the first and last compute; NCCL fills [200,250]: no gap.
    o = gpu1.overlap
    assert (gpu1.makespan_ms, o.busy_ns["compute"], o.comm_ns, o.comm_hidden_ns) == (0.25, 200 * US, 100 * US, 50 * US)
    assert gpu1.comm_hidden == 0.5 and o.comm_idle_ns == 50 * US and o.gaps == [] and gpu1.hidden is None
    assert gpu1.bound_ms == 0.2
    # The whole: 0 to 300; times summed over the GPUs; the slowest GPU's bound.
    whole = found.whole
    assert found.makespan_ms == 0.3 and whole.busy_ms == {"compute": 0.38, "H2D": 0.06, "D2H": 0.0, "D2D": 0.0}
    assert (whole.comm_ms, whole.comm_hidden_ms, whole.comm_exposed_ms, whole.comm_idle_ms) == pytest.approx(
        (0.26, 0.11, 0.15, 0.11))
    assert found.comm_hidden == pytest.approx(0.11 / 0.26)
    assert (whole.copy_ms, whole.hidden_ms, found.idle_ms) == pytest.approx((0.06, 0.02, 0.02))
    assert (whole.fill_ms, whole.drain_ms, whole.concurrent_kernels_ms) == (0.0, 0.03, 0.0)  # NCCL is no compute
    assert found.bound_ms == 0.2 and found.bound.terms == {"compute": 0.2, "copies": 0.05}
    assert found.efficiency == pytest.approx(0.2 / 0.3) and found.bound.copy_engines == 2


def test_one_process_on_two_gpus_is_analysed_per_gpu_and_whole():
    found = traced(GPU0 + GPU1, [])
    assert_by_hand(found)
    assert [figures.rank for figures in found.gpus.values()] == [None, None]
    text = str(found).splitlines()
    assert text[0] == "makespan 0.300 ms on 2 GPUs: 6 kernels (3 NCCL), 1 copies on 5 streams"
    assert ("communication (NCCL) 0.260 ms: 42% hidden behind compute (0.110 ms), exposed 0.150 ms, compute idle "
            "during it 0.110 ms") in text
    assert ("  GPU 0: makespan 0.300 ms, compute 0.180 ms, efficiency 60%, copies hidden 33%, communication "
            "0.160 ms, 38% hidden, exposed 0.100 ms, compute idle during it 0.060 ms, idle 0.020 ms") in text
    assert ("  GPU 1: makespan 0.250 ms, compute 0.200 ms, efficiency 80%, communication 0.100 ms, 50% hidden, "
            "exposed 0.050 ms, compute idle during it 0.050 ms, idle 0.000 ms") in text


def test_one_gpu_shows_no_lines_per_gpu_and_keeps_nccl_out_of_the_bound():
    found = traced(GPU0, [])
    assert list(found.gpus) == [0] and not any(line.startswith("  GPU") for line in str(found).splitlines())
    assert found.bound.terms == {"compute": 0.18, "copies": 0.05} and found.comm_hidden == 0.375
    assert found.summary()["comm_hidden"] == 0.375 and found.summary()["gpus"] == 1


def test_the_ranks_traces_merge_into_the_same_figures_with_each_ranks_calls():
    found = merged([traced(GPU0, GPU0_CALLS, rank=0), traced(GPU1, GPU1_CALLS, rank=1)])
    assert_by_hand(found)
    assert [(device, figures.rank) for device, figures in found.gpus.items()] == [(0, 0), (1, 1)]
    made = {(row["op"], row["rank"]): (row["call"], row["line"]) for row in found.table() if row["correlation"] == 5}
    assert made == {("H2D", 0): ("cuMemcpyHtoDAsync", "/u/x.py:5"), ("memset", 1): ("cuMemsetD32Async", "/u/y.py:9"),
                    }  # correlation 5 of each rank: its own call
    assert found.target == "ddp:step" and found.provenance.rank is None and found.runs.makespans_ms == [0.3]
    assert "  GPU 1 (rank 1): makespan 0.250 ms" in str(found)


@pytest.mark.parametrize("ranks, devices, said", [
    ((0, 0), (0, 1), "two traces of rank 0"),
    ((0, 1), (0, 0), "GPU 0 is in the traces of ranks 0 and 1"),
])
def test_merging_refuses_two_traces_of_one_rank_or_one_gpu(ranks, devices, said):
    parts = [traced([kernel(device, 7, 0, 100)], [], rank=rank) for rank, device in zip(ranks, devices)]
    with pytest.raises(ValueError, match=said):
        merged(parts)


def test_a_merged_trace_is_not_merged_again():
    both = merged([traced(GPU0, GPU0_CALLS, rank=0), traced(GPU1, GPU1_CALLS, rank=1)])
    with pytest.raises(ValueError, match="merged already"):
        merged([both, traced([kernel(2, 7, 0, 100)], [], rank=2)])


def test_the_merged_timeline_has_a_host_per_rank_and_flows_within_each(tmp_path):
    found = merged([traced(GPU0, GPU0_CALLS, rank=0), traced(GPU1, GPU1_CALLS, rank=1)])
    timeline = read_timeline(found.to_perfetto(tmp_path / "ddp.json"))
    assert {s.process for s in timeline.slices} == {"GPU 0 (rank 0)", "GPU 1 (rank 1)", "host: ddp:step (rank 0)",
                                                    "host: ddp:step (rank 1)"}
    flows = sorted((source.process, source.name, target.process, target.name) for source, target in timeline.flows)
    assert flows == [("host: ddp:step (rank 0)", "cuMemcpyHtoDAsync", "GPU 0 (rank 0)", "H2D 1 MiB"),
                     ("host: ddp:step (rank 1)", "cuMemsetD32Async", "GPU 1 (rank 1)", "memset 4 KiB")]
    nccl = [s for s in timeline.slices if s.name in (NCCL_NEW, NCCL_OLD)]
    assert len(nccl) == 3 and {s.category for s in nccl} == {"kernel,communication"}


# --- saved, read back, merged from files -----------------------------------------------------------------------------

@pytest.fixture
def rank_files(tmp_path):
    """Each rank's trace saved as a results file, as bench.tracing(save=..., rank=...) writes it."""
    return [save([("ddp:step", traced(GPU0, GPU0_CALLS, rank=0))], synthetic.environment(),
                 tmp_path / "_trace" / "rank0.parquet"),
            save([("ddp:step", traced(GPU1, GPU1_CALLS, rank=1))],
                 synthetic.environment(gpu_uuid="GPU-11111111-1111-2222-3333-444444444444", gpu_index=1),
                 tmp_path / "_trace" / "rank1.parquet")]


def test_a_saved_trace_reads_back_with_its_numbers_and_rows(rank_files):
    original = traced(GPU0, GPU0_CALLS, rank=0)
    back = load(rank_files[0])
    assert back.summary() == original.summary() and back.table() == original.table()
    assert back.provenance.rank == 0 and back.provenance.environments[0]["gpu_uuid"] == synthetic.ENV["gpu_uuid"]


def test_the_ranks_files_merge_like_the_ranks_results(rank_files, tmp_path):
    found = merged_files(rank_files)
    assert_by_hand(found)
    in_memory = merged([traced(GPU0, GPU0_CALLS, rank=0), traced(GPU1, GPU1_CALLS, rank=1)])
    assert found.summary() == in_memory.summary() and found.table() == in_memory.table()
    path = save([("ddp:step", found)], None, tmp_path / "_trace" / "merged.parquet")  # each rank's environment
    rows = store.named_tables(tmp_path, "trace")
    mine = rows[rows["traced_at"].notna() & (rows["gpus"] == 2)]
    assert len(mine) == len(found.table()) and list(mine["comm_hidden"]) == [pytest.approx(0.11 / 0.26)] * len(mine)
    by_device = mine[mine["op"] == "kernel"].groupby("device")
    assert {int(device): set(group["gpu_comm_hidden"]) for device, group in by_device} == {0: {0.375}, 1: {0.5}}
    assert {int(device): set(group["gpu_uuid"]) for device, group in by_device} == {
        0: {synthetic.ENV["gpu_uuid"]}, 1: {"GPU-11111111-1111-2222-3333-444444444444"}}
    again = load(path)
    assert again.summary() == found.summary() and again.table() == found.table()
    assert [(figures.rank, figures.comm_hidden) for figures in again.gpus.values()] == [(0, 0.375), (1, 0.5)]


def test_an_old_trace_file_still_reads_and_draws_beside_a_new_one(rank_files, tmp_path):
    old = sorted((Path(__file__).resolve().parents[1] / "results" / "_trace").glob("*-readme-step.parquet"))[0]
    (tmp_path / "_trace" / old.name).write_bytes(old.read_bytes())
    rows = store.named_tables(tmp_path, "trace")
    assert rows["comm_hidden"].isna().sum() == (rows["traced_at"] == store.read_table(old)["traced_at"][0]).sum()
    for target_rows in (store.read_table(old), store.read_table(rank_files[0])):
        figure = timeline(target_rows, "t")
        plots.pyplot().close(figure)
    with pytest.raises(store.ResultsError, match="saved before bench kept each trace's clock"):
        load(tmp_path / "_trace" / old.name)


def test_the_merged_figure_has_a_lane_group_per_gpu(rank_files):
    figure = timeline(pd.DataFrame(merged_files(rank_files).table()), "ddp:step")
    try:
        ticks = [label.get_text() for label in figure.axes[0].get_yticklabels()]
        legend = [text.get_text() for text in figure.legends[0].get_texts()]
    finally:
        plots.pyplot().close(figure)
    assert ticks == ["GPU 0 stream 7", "GPU 0 stream 8", "GPU 0 stream 20", "GPU 0 idle", "GPU 1 stream 3",
                     "GPU 1 stream 21", "GPU 1 idle", "host waits"]
    assert "communication" in legend


# --- the command line ------------------------------------------------------------------------------------------------

@pytest.fixture
def main(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)

    def run(*args):
        status = cli.main([str(arg) for arg in args])
        captured = capsys.readouterr()
        return status, captured.out, captured.err

    return run


def test_trace_merge_prints_and_writes_the_whole(main, rank_files, tmp_path):
    status, out, err = main("trace", "--merge", *rank_files, "--save", "m.parquet", "--perfetto", "m.json")
    assert status == 0, err
    assert out.startswith("ddp:step, 2 traces merged:\nmakespan 0.300 ms on 2 GPUs")
    assert "  GPU 1 (rank 1): makespan 0.250 ms" in out
    assert load(tmp_path / "m.parquet").summary() == merged_files(rank_files).summary()
    assert read_timeline(tmp_path / "m.json").other["comm_hidden"] == pytest.approx(0.11 / 0.26)


def test_trace_merge_prints_what_the_files_name_as_text(main, tmp_path):
    """Files other hosts wrote are untrusted: a name that would clear the terminal is printed as its escape."""
    target = "ddp\x1b[2J:step"
    files = [save([(target, traced(GPU0, GPU0_CALLS, rank=0))], synthetic.environment(), tmp_path / "rank0.parquet"),
             save([(target, traced(GPU1, GPU1_CALLS, rank=1))],
                  synthetic.environment(gpu_uuid="GPU-11111111-1111-2222-3333-444444444444", gpu_index=1),
                  tmp_path / "rank1.parquet")]
    status, out, err = main("trace", "--merge", *files)
    assert status == 0, err
    assert out.startswith("ddp\\x1b[2J:step, 2 traces merged:\nmakespan") and "\x1b" not in out


def test_trace_merge_refuses_what_it_cannot_merge(main, rank_files, tmp_path):
    other = save([("ddp:step", traced(GPU1, GPU1_CALLS, rank=1))], synthetic.environment(hostname="node-b"),
                 tmp_path / "_trace" / "elsewhere.parquet")
    before = sorted(path.name for path in tmp_path.iterdir())
    for args, said in ((["--merge", *rank_files, "--save", "m.parquet", "json:dumps"], "trace --merge takes no target"),
                       (["--save", "m.parquet", "--merge", rank_files[0], rank_files[0]], "two traces of rank 0"),
                       (["--save", "m.parquet", "--merge", rank_files[0], other],
                        "CUPTI's clocks of different hosts are not one clock"),
                       (["--save", "m.parquet", "--merge", tmp_path / "missing.parquet"], "no such file"),
                       (["--save", "m.parquet", "--merge", tmp_path], "is not a file"),
                       (["--save", "m.parquet", "--merge", rank_files[0].with_name("x.parquet")], "no such file"),
                       (["--merge", *rank_files, "--save", rank_files[0]], "bench never replaces a results file")):
        status, out, err = main("trace", *args)
        assert status == 2 and said in err and len(err.strip().splitlines()) == 1 and out == "", err
        assert sorted(path.name for path in tmp_path.iterdir()) == before  # nothing written


# --- the pytest gate -------------------------------------------------------------------------------------------------

def test_check_overlap_gates_the_communication_hidden():
    from bench.pytest_plugin import DidNotOverlap, check_overlap

    found = traced(GPU0 + GPU1, [])
    check_overlap(found, min_comm_hidden=0.42)  # 42.3%
    with pytest.raises(DidNotOverlap, match=r"communication hidden behind compute: 42% of its 0\.260 ms, 0\.150 ms "
                                            r"exposed \(at least 50% required\) \[GPU 0: 38%; GPU 1: 50%\]"):
        check_overlap(found, min_comm_hidden=0.5)
    with pytest.raises(DidNotOverlap, match="no NCCL kernels ran"):
        check_overlap(traced([kernel(0, 7, 0, 100)], []), min_comm_hidden=0.0)


def test_assert_overlap_traces_the_block_and_applies_min_comm_hidden(monkeypatch):
    import bench.usercode.pytest_plugin as plugin
    import bench.usercode.trace.run as run

    class Box:
        result = None

    ran = []

    @contextlib.contextmanager
    def tracing(bound=True):
        box = Box()
        yield box
        box.result = traced(GPU0 + GPU1, [])

    monkeypatch.setattr(plugin, "skip_without_gpu", lambda: None)
    monkeypatch.setattr(run, "tracing", tracing)
    with plugin.assert_overlap(min_comm_hidden=0.4):
        ran.append(1)
    with pytest.raises(plugin.DidNotOverlap, match="communication hidden behind compute: 42%"):
        with plugin.assert_overlap(min_comm_hidden=0.9):
            ran.append(2)
    assert ran == [1, 2]
    with pytest.raises(ValueError, match="min_comm_hidden must be between 0 and 1"):
        with plugin.assert_overlap(min_comm_hidden=1.5):
            raise AssertionError("the block ran")


def test_two_merged_traces_compare_their_communication_and_every_gpus_kernels(rank_files, tmp_path):
    from bench.usercode.trace import compare

    paths = [save([("ddp:step", merged_files(rank_files))], None, tmp_path / "_trace" / f"{side}.parquet")
             for side in ("old", "new")]
    found = compare.compare(compare.read(paths[0]), compare.read(paths[1]))
    lines = {line.measure: line for line in found.lines}
    assert lines["communication hidden"].old == pytest.approx(0.11 / 0.26)
    assert lines["communication hidden"].verdict == compare.Verdict.SAME
    assert lines[f"kernel {NCCL_OLD} ms"].old == pytest.approx(0.1)  # GPU 1's, beside GPU 0's
    assert lines[f"kernel {NCCL_NEW} ms"].old == pytest.approx(0.16)


# --- the committed DDP traces, merged from two ranks on two GPUs (scripts/ddp_trace.py) -----------------------------

COMMITTED = sorted(Path(__file__).resolve().parents[1].glob("results/_trace/*-ddp-*-merged.parquet"))


@pytest.mark.parametrize("path", COMMITTED, ids=lambda path: path.name)
def test_a_committed_ddp_trace_reads_back_with_the_communication_overlap_it_saved(path):
    """Each committed merged DDP trace holds two GPUs of two ranks, NCCL kernels among its records, and a
    communication-overlap column whose saved value is what its records give when read back and analysed again; the
    exposed step (one all-reduce after backward) hides none of its communication."""
    from bench.usercode.trace.load import load

    rows = pd.read_parquet(path)
    assert {"comm_hidden", "gpu_comm_hidden", "comm_ms", "rank", "device"} <= set(rows.columns)
    assert rows["gpus"].iloc[0] == 2 and set(rows["rank"].dropna()) == {0, 1} and rows["gpu_uuid"].nunique() == 2
    found = load(path)
    assert len(found.gpus) == 2
    assert any(is_collective(activity.name) for activity in found.records.activities)
    assert found.comm_hidden == pytest.approx(float(rows["comm_hidden"].iloc[0]), abs=1e-3)
    for device, figures in found.gpus.items():
        saved = rows.loc[rows["device"] == device, "gpu_comm_hidden"].iloc[0]
        assert figures.comm_hidden == pytest.approx(float(saved), abs=1e-3)
    if "-exposed-" in path.name:
        assert found.comm_hidden == 0.0 and found.whole.comm_ms > 0


def test_the_committed_ddp_traces_are_found():
    assert {"ddp", "exposed"} <= {path.name.split("-ddp-")[1].split("-")[0] for path in COMMITTED}
