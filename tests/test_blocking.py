"""CPU tests of the blocking, serialization, alloc and graphs experiments' logic, the catalog and the claims."""

import matplotlib.image
import pandas as pd
import pytest

from bench import claims, plots
from bench.calls import DOCS_HOST, PLACEMENTS, catalog, documented_serializes, documented_waits
from bench.experiments import alloc, blocking, graphs, serialization
from bench.sweep import plan
from synthetic import alloc_and_graphs_rows, blocking_rows

REQUIRED_APIS = {
    "cudaMalloc", "cudaFree", "cudaMallocAsync", "cudaFreeAsync", "cudaHostAlloc", "cudaFreeHost", "cudaHostRegister",
    "cudaHostUnregister", "cudaMemcpyAsync", "cudaMemcpy", "cudaMemset", "cudaMemsetAsync", "cudaStreamCreate",
    "cudaStreamDestroy", "cudaEventRecord", "cudaEventQuery", "cudaStreamQuery", "cudaGetLastError", "kernel<<<>>>",
    "cudaStreamSynchronize", "cudaDeviceSynchronize",
}


def test_catalog_is_complete_and_documented():
    calls = catalog()
    assert REQUIRED_APIS <= {call.api for call in calls.values()}
    copies = {name for name in calls if name.startswith("cudaMemcpyAsync")}
    assert len(copies) == 8  # H2D/D2H × pinned/pageable × small/large
    for call in calls.values():
        assert call.docs_host in DOCS_HOST and call.docs
        assert call.api == "(nothing)" or call.source.startswith("https://docs.nvidia.com/cuda/")
        assert set(call.placements) <= set(PLACEMENTS)
    assert calls["kernel launch"].placements == ("same", "other", "legacy", "per-thread")


def test_documented_expectations_follow_stream_semantics():
    calls = catalog()
    sync = calls["cudaStreamSynchronize"]
    assert documented_waits(sync, "same", spin_blocking=False) is True
    assert documented_waits(sync, "other", spin_blocking=True) is False
    assert documented_waits(sync, "legacy", spin_blocking=True) is True  # the NULL stream waits for blocking ones
    assert documented_waits(sync, "legacy", spin_blocking=False) is False
    assert documented_waits(calls["cudaGetLastError"], "none", True) is None
    assert documented_waits(calls["cudaMemcpyAsync H2D pageable 64 MiB"], "same", True) is None  # "might"
    assert documented_serializes(calls["cudaMalloc"], "none", False) is True
    assert documented_serializes(calls["kernel launch"], "legacy", True) is True
    assert documented_serializes(calls["kernel launch"], "legacy", False) is None


@pytest.mark.parametrize("host_ms, running, left, verdict", [
    (19.5, False, 19.9, "waits-for-device"),
    (0.004, True, 19.9, "returns"),
    (3.0, True, 19.9, "own-work"),
    (0.3, True, 19.9, "returns"),
    (0.2, False, 19.9, "unclear"),
])
def test_host_verdict(host_ms, running, left, verdict):
    assert blocking.classify(host_ms, running, left) == verdict


def test_consensus_prefers_the_majority_then_the_more_blocking():
    assert blocking.consensus(["returns", "returns", "own-work"]) == ("returns", False)
    assert blocking.consensus(["returns", "waits-for-device"]) == ("waits-for-device", False)
    assert blocking.consensus(["own-work"] * 3) == ("own-work", True)


@pytest.mark.parametrize("second, verdict", [((0.05, 20.05), "overlaps"), ((20.1, 40.1), "serializes"),
                                             ((15.0, 35.0), "partial")])
def test_serialization_verdict(second, verdict):
    assert serialization.classify((0.0, 20.0), second, 20.0) == verdict


def test_plans_cover_each_call_in_its_placements():
    configs = plan(["blocking"])[0].configs
    assert len(configs) == 2 * sum(len(call.placements) for call in catalog().values())
    assert {c["placement"] for c in configs if c["call"] == "cudaMalloc"} == {"none"}
    alloc_configs = plan(["alloc"])[0].configs
    assert not [c for c in alloc_configs if c["api"] == "cudaMalloc" and c["release_threshold"] != "none"]
    assert not [c for c in alloc_configs if c["api"].startswith("cudaHost") and c["pattern"] == "loop"]
    assert {c["release_threshold"] for c in alloc_configs if c["api"] == "cudaMallocAsync"} == {"0", "max"}
    graph_configs = plan(["graphs"])[0].configs
    assert sum(c["case"] == "sync-in-capture" for c in graph_configs) == 1


def test_claims_from_a_synthetic_frame():
    rows = pd.concat([blocking_rows(), alloc_and_graphs_rows()], ignore_index=True)
    verdicts = claims.table(rows).set_index("claim")["verdict"]
    assert verdicts["cudaGetLastError waits for running kernels"] == "false"
    assert verdicts["cudaFree waits for running kernels"] == "true"
    assert verdicts["cudaMalloc is synchronous"] == "partly"  # returns on the host, serializes on the device
    assert verdicts["cudaMemcpyAsync returns immediately"] == "partly"
    assert verdicts["a kernel after cudaMallocAsync in the same stream needs a synchronization"] == "false"
    assert verdicts["cudaStreamSynchronize inside a capture makes an allocation safe"] == "false"
    assert verdicts["cudaMallocAsync is cheaper than cudaMalloc in a loop"] == "true"
    measured = claims.table(rows).set_index("claim")["measured"]
    assert "0 wrong results in 100" in measured["the runtime may reorder operations within a stream"]


def test_claims_without_rows_say_not_measured():
    table = claims.table(pd.DataFrame())
    assert set(table["verdict"]) == {"not measured"}
    assert claims.missing_experiments(pd.DataFrame()) == ["blocking", "graphs", "serialization", "alloc"]
    assert claims.missing_experiments(blocking_rows()) == ["graphs", "alloc"]


def test_truth_table_and_alloc_plots(tmp_path):
    rows = pd.concat([blocking_rows(), alloc_and_graphs_rows()], ignore_index=True)
    paths = plots.plot_results(rows, tmp_path)
    names = [path.name for path in paths]
    assert names == ["blocking_truth_table.png", "blocking_truth_table.svg", "alloc.png", "alloc.svg"]
    height, width, _ = matplotlib.image.imread(paths[0]).shape
    assert width > 1500 and height > 700
    svg = paths[1].read_text()
    assert "cudaGetLastError" in svg and "waits-for-device" in svg and "serializes" in svg
    assert "cudaMallocAsync, release threshold max" in paths[3].read_text()


def test_headlines():
    rows = blocking_rows()
    host = blocking.headline(rows[rows["experiment"] == "blocking"])
    assert set(host["finding"]) == {"waits for the device", "contradicts the docs"}
    device = serialization.headline(rows[rows["experiment"] == "serialization"])
    assert set(device["call"]) >= {"cudaMalloc", "cudaDeviceSynchronize"}
    extra = alloc_and_graphs_rows()
    assert len(alloc.headline(extra[extra["experiment"] == "alloc"])) == 8
    assert len(graphs.headline(extra[extra["experiment"] == "graphs"])) == 2
