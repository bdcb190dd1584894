"""scripts/answer_times.py without a GPU: its rows' summary, and its parquet written through bench's store from a
run's JSON (typed, the environment on every row, replaced only when asked)."""

import json

import pytest

from bench.results import store
from paths import script_module

ENVIRONMENT = {"gpu_name": "NVIDIA H100 80GB HBM3", "gpu_uuid": "GPU-0000", "git_commit": "abc1234",
               "driver_version": "580.1", "not_a_column": "left out"}


@pytest.fixture(scope="module")
def answer_times():
    with script_module("answer_times") as module:
        yield module


def rows() -> list[dict]:
    made = []
    for number, (t0, walls) in enumerate([(4.0, (4.5, 6.5)), (5.0, (5.2, 5.0)), (3.0, (3.9, 3.5))]):
        for tool, wall in zip(("syncs", "probe"), walls):
            made.append({"tool": tool, "target": "docs/examples/cupy_step.py:step", "library": "cupy",
                         "region_ms": 11.0, "t0_s": t0, "wall_s": wall, "round": number, "status": 0,
                         "phases": json.dumps({"your module's import": 0.7}), "bench_src": "src"})
    return made


def test_the_summary_gives_medians_and_the_worst_row_beyond_t0(answer_times):
    summary = answer_times.summarized(rows())
    assert summary["docs/examples/cupy_step.py:step syncs"] == pytest.approx(
        {"t0_s": 4.0, "wall_s": 4.5, "beyond_t0_s": 0.5, "worst_beyond_t0_s": 0.9})
    assert summary["docs/examples/cupy_step.py:step probe"]["worst_beyond_t0_s"] == pytest.approx(2.5)


def test_the_parquet_is_written_from_the_json_typed_with_the_environment(answer_times, tmp_path):
    kept = tmp_path / "20261207T000000Z-NVIDIA-H100.json"
    kept.write_text(json.dumps({"gpu": ENVIRONMENT, "rows": rows()}))
    written = answer_times.from_json(kept)
    assert written == kept.with_suffix(".parquet")
    assert store.read_metadata(written)["table"] == answer_times.TABLE
    table = store.read_table(written)
    assert len(table) == 6 and set(table["gpu_uuid"]) == {"GPU-0000"} and "not_a_column" not in table
    assert table["round"].tolist() == [0, 0, 1, 1, 2, 2] and table["wall_s"].iloc[1] == 6.5
    answer_times.from_json(kept)  # told to: the parquet of that run is replaced, not put beside it
    assert sorted(path.name for path in tmp_path.iterdir()) == [kept.name, written.name]


def test_a_new_runs_parquet_never_replaces_a_file(answer_times, tmp_path):
    path = tmp_path / "run.parquet"
    path.write_bytes(b"someone else's")
    written = answer_times.write_parquet(path, rows(), ENVIRONMENT, new=True)
    assert written != path and path.read_bytes() == b"someone else's"
