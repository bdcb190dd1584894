"""A fleet as one dataset: one results directory per host (as one ``sweep --devices all`` per node writes them) read
together, four H200s told apart by UUID and host; compare matching GPUs by UUID across two fleet snapshots; report a
section per GPU naming its host; ``--gpu HOST`` picking that host's GPUs."""

import re
from pathlib import Path

import pytest

import synthetic
from blank_figures import blank_figures
from bench.analysis import selection, compare
from bench.results import store
from bench.platform.errors import UsageError
from bench.experiments import registry

ROOT = Path(__file__).resolve().parents[1]
A0, A1, B0, B1 = synthetic.FLEET
NEWER = "20261122T000000Z"
FILE = f"{synthetic.RUN_ID}-NVIDIA-H200.parquet"


def measured() -> list[dict]:
    """What each GPU measured: launch paths and copies."""
    return synthetic.records("launch") + synthetic.records("bandwidth")


def pinned_h2d_16mib(row: dict) -> bool:
    return (row["experiment"] == "bandwidth" and row["host_memory"] == "pinned" and row["direction"] == "H2D"
            and row["bytes"] == 16 << 20)


def slower(rows: list[dict], factor: float) -> list[dict]:
    """The rows, pinned 16 MiB uploads taking ``factor`` times as long."""
    def scaled(row: dict) -> dict:
        return {**row, "samples": [value * factor for value in row["samples"]], "median": row["median"] * factor,
                "min": row["min"] * factor, "max": row["max"] * factor, "gbps": row["gbps"] / factor}

    return [scaled(row) if pinned_h2d_16mib(row) else row for row in rows]


def label(gpu: dict) -> str:
    """What compare and report call a GPU of the fleet: 'NVIDIA H200 a0a0a0a0 on node-a'."""
    return f"NVIDIA H200 {gpu['gpu_uuid'][4:12]} on {gpu['hostname']}"


def test_per_host_directories_read_as_one_dataset_of_four_gpus(tmp_path):
    results = tmp_path / "results"
    rows = measured()
    synthetic.write_fleet(results / "fleet", rows)
    (results / "fleet" / "node-b" / f".{NEWER}-NVIDIA-H200.parquet.x1y2.tmp").write_bytes(b"half a file")  # a sweep
    # still writing
    synthetic.write(results / "fleet" / "_logs" / "notes.parquet", synthetic.records("launch"))
    found = [path.relative_to(results).as_posix() for path in store.results_files(results / "fleet")]
    assert found == [f"fleet/node-a/{FILE}", f"fleet/node-b/{FILE}"]
    fleet = store.read_any(results / "fleet", synthetic.suite())
    assert len(fleet) == 4 * len(rows)
    assert [(gpu.host, gpu.uuid, gpu.name) for gpu in selection.gpus(fleet)] == [
        (gpu["hostname"], gpu["gpu_uuid"], "NVIDIA H200") for gpu in synthetic.FLEET]
    assert sorted(set(zip(fleet["hostname"], fleet["gpu_index"], fleet["gpu_uuid"]))) == [
        ("node-a", 0, A0["gpu_uuid"]), ("node-a", 1, A1["gpu_uuid"]), ("node-b", 0, B0["gpu_uuid"]),
        ("node-b", 1, B1["gpu_uuid"])]
    shown = selection.newest(fleet, registry())  # both hosts' runs have one run id: each GPU keeps its own rows
    assert [len(mine) for _, mine in selection.by_gpu(shown)] == [len(rows)] * 4
    # the fleet is part of results/ (what report reads by default); a snapshot under a _ name is not, unless named
    synthetic.write_fleet(results / "_fleet-old", synthetic.records("launch"),
                          gpus=[{**B1, "gpu_uuid": "GPU-c0c0c0c0-0000-0000-0000-000000000000"}])
    assert len(selection.gpus(store.read_any(results, synthetic.suite()))) == 4
    assert [gpu.uuid[:12] for gpu in selection.gpus(store.read_any(results / "_fleet-old", synthetic.suite()))] == ["GPU-c0c0c0c0"]


def test_a_hostname_picks_every_gpu_on_that_host(tmp_path, run):
    rows = synthetic.frame(synthetic.on_gpus(synthetic.records("launch")))
    for wanted in ("node-b", "NODE-B"):
        picked = selection.select_gpu(rows, wanted)
        assert sorted(set(zip(picked["hostname"], picked["gpu_uuid"]))) == [
            ("node-b", B0["gpu_uuid"]), ("node-b", B1["gpu_uuid"])] and len(picked) == 6
    assert set(selection.select_gpu(rows, "b1b1")["gpu_uuid"]) == {B1["gpu_uuid"]}
    assert set(selection.select_gpu(rows, "GPU-a0a0a0a0")["gpu_uuid"]) == {A0["gpu_uuid"]}
    with pytest.raises(UsageError, match="--gpu NVIDIA H200: matches 4 GPUs .*; give more of a UUID, or a hostname"):
        selection.select_gpu(rows, "NVIDIA H200")
    with pytest.raises(UsageError, match="--gpu node-c: no such GPU in the results"):
        selection.select_gpu(rows, "node-c")
    synthetic.write_fleet(tmp_path / "fleet", synthetic.records("launch"))
    with blank_figures():  # whose figures are drawn is tested
        result = run("plot", "fleet", "--gpu", "node-b", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert sorted(path.name for path in (tmp_path / "plots" / "local").iterdir()) == ["NVIDIA-H200-b0b0b0b0",
                                                                                      "NVIDIA-H200-b1b1b1b1"]


def test_compare_of_two_fleet_snapshots_matches_gpus_by_uuid(tmp_path, run):
    """A week later node-a's GPUs enumerate the other way round and a1a1a1a1 uploads 25% slower; node-b's GPU 1 is
    gone."""
    rows = synthetic.sampled(measured())  # enough samples to bound a median
    synthetic.write_fleet(tmp_path / "fleet-old", rows)
    swapped = synthetic.on_gpus(rows, [{**A0, "gpu_index": 1}]) + slower(
        synthetic.on_gpus(rows, [{**A1, "gpu_index": 0}]), 1.25)
    synthetic.write(tmp_path / "fleet-new" / "node-a" / f"{NEWER}-NVIDIA-H200.parquet",
                    synthetic.tagged(swapped, run_id=NEWER), NEWER)
    synthetic.write_fleet(tmp_path / "fleet-new", rows, gpus=[B0], run_id=NEWER)
    result = compare.compare(store.read_any(tmp_path / "fleet-old", synthetic.suite()), store.read_any(tmp_path / "fleet-new", synthetic.suite()), registry())
    assert list(dict.fromkeys(result.table["gpu"])) == [label(A0), label(A1), label(B0)]
    assert result.counts() == {"slower": 1, "same": 3 * len(rows) - 1}
    worse = result.table[result.table["verdict"] == "slower"].iloc[0]
    assert (worse["gpu"], worse["configuration"]) == (label(A1), "pinned H2D 16 MiB")
    assert result.headlines[0].startswith(f"bandwidth pinned H2D 16 MiB on {label(A1)}: slower, ")
    names = ", ".join(name for name in registry() if name in ("bandwidth", "launch"))
    assert result.warnings == [f"NVIDIA H200 {B1['gpu_uuid']} on node-b is only in the old results ({names}); not "
                               "compared"]
    printed = run("compare", "fleet-old", "fleet-new", "--fail-above", "20", cwd=tmp_path)
    assert printed.returncode == 1, printed.stderr
    assert f"{B1['gpu_uuid']} on node-b is only in the old" in printed.stderr  # warnings: stdout is the answer
    assert "1 configurations slower by more than 20%: failing" in printed.stdout
    assert re.search(rf"{label(A1)} +pinned H2D 16 MiB .* slower \+25\.0%", printed.stdout)
    assert not [line for line in printed.stdout.splitlines() if line != line.rstrip()]  # piped: plain lines


def test_a_replaced_gpu_pairs_with_the_lone_new_one_and_a_replaced_node_is_not_guessed(tmp_path):
    rows = synthetic.records("launch")
    synthetic.write_fleet(tmp_path / "fleet-old", rows)
    b2 = {**B1, "gpu_uuid": "GPU-b2b2b2b2-0000-0000-0000-000000000000"}
    synthetic.write_fleet(tmp_path / "fleet-new", rows, gpus=[A0, A1, B0, b2], run_id=NEWER)
    old, new = store.read_any(tmp_path / "fleet-old", synthetic.suite()), store.read_any(tmp_path / "fleet-new", synthetic.suite())
    result = compare.compare(old, new, registry())
    assert list(dict.fromkeys(result.table["gpu"])) == [label(A0), label(A1), label(B0),
                                                        "NVIDIA H200 b1b1b1b1 → b2b2b2b2 on node-b"]
    assert result.warnings == [f"NVIDIA H200 b1b1b1b1 → b2b2b2b2 on node-b: different GPUs: old NVIDIA H200 "
                               f"{B1['gpu_uuid']} on node-b, new NVIDIA H200 {b2['gpu_uuid']} on node-b"]
    node_c = [{**gpu, "hostname": "node-c", "gpu_uuid": "GPU-c" + gpu["gpu_uuid"][5:]} for gpu in (B0, B1)]
    synthetic.write_fleet(tmp_path / "fleet-c", rows, gpus=[A0, A1, *node_c], run_id=NEWER)
    result = compare.compare(old, store.read_any(tmp_path / "fleet-c", synthetic.suite()), registry())
    assert list(dict.fromkeys(result.table["gpu"])) == [label(A0), label(A1)]
    assert sorted(result.warnings) == sorted(f"NVIDIA H200 {gpu['gpu_uuid']} on {gpu['hostname']} is only in the "
                                             f"{side} results (launch); not compared"
                                             for side, gpus in (("old", (B0, B1)), ("new", node_c)) for gpu in gpus)


def test_report_has_a_section_per_gpu_naming_its_host_and_gpu_picks_a_host(tmp_path, run):
    synthetic.write_fleet(tmp_path / "results" / "fleet", measured())
    with blank_figures():  # the markup is what is tested
        result = run("report", "results/fleet", "--out", "fleet.html", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    document = (tmp_path / "fleet.html").read_text()
    assert "results/fleet: 2 runs on 4 GPUs" in document  # one run id, two hosts: two sweeps
    headings = re.findall(r"<h2 id='gpu-([^']*)'>([^<]*)</h2>", document)
    assert [text for _, text in headings] == [f"NVIDIA H200 {gpu['gpu_uuid']} on {gpu['hostname']}"
                                              for gpu in synthetic.FLEET]
    ids = [anchor for anchor, _ in headings]  # derived (a hash), never the data: a results file is untrusted
    assert len(set(ids)) == len(ids) and all(re.fullmatch(r"[0-9a-f]+", anchor) for anchor in ids)
    sections = re.split(r"<h2 id='gpu-", document)[1:]
    for gpu, section in zip(synthetic.FLEET, sections):
        assert f"<td class='gpu'>{label(gpu)}</td>" in section
        assert set(re.findall(r"<td class='gpu'>([^<]*)</td>", section)) == {label(gpu)}
    runs = re.findall(r"<tr><td>" + synthetic.RUN_ID + r"</td><td>NVIDIA H200</td><td>([^<]*)</td><td>([^<]*)</td>"
                      r"<td class='number'>(\d)</td>", document)
    assert runs == [(gpu["gpu_uuid"], gpu["hostname"], str(gpu["gpu_index"])) for gpu in synthetic.FLEET]
    with blank_figures():
        result = run("report", "results/fleet", "--gpu", "node-b", "--out", "b.html", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    document = (tmp_path / "b.html").read_text()
    assert "1 run on 2 GPUs" in document and "node-a" not in document
    assert [text.split()[2] for _, text in re.findall(r"<h2 id='gpu-([^']*)'>([^<]*)</h2>", document)] == [
        B0["gpu_uuid"], B1["gpu_uuid"]]
