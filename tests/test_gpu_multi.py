"""Issue 15 on two GPUs: peer copies, host links under load, blocking across GPUs, and a sweep over every GPU (one
after another and at once). Skipped with the reason on a machine with fewer than two GPUs."""

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from gpu_rows import rows_of

from bench.sweep.plan import expand

pytestmark = [pytest.mark.gpu, pytest.mark.two_gpus]
SRC = str(Path(__file__).resolve().parents[1] / "src")


def configs(name: str, **axes) -> list[dict]:
    from bench.experiments import registry

    experiment = registry()[name]
    return expand({**experiment.axes, **axes}, experiment.sweeps.valid)


def test_peer_copies_are_verified_and_peer_access_is_the_fast_path():
    rows = rows_of("peer", configs("peer", bytes=(16 << 20,)))
    assert (rows["status"] == "ok").all(), rows["error"].tolist()
    assert rows["verified"].all() and set(zip(rows["src"], rows["dst"])) == {(0, 1), (1, 0)}
    copies = rows[rows["method"] != "chase"].set_index(["src", "method", "side", "peer_access", "direction"])
    for src in (0, 1):
        direct = copies.loc[(src, "ce", "read", "enabled", "uni"), "gbps"]
        staged = copies.loc[(src, "ce", "read", "disabled", "uni"), "gbps"]
        assert direct > 2 * staged and direct > 50  # NVLink (or PCIe P2P) against a trip through the host
        both = copies.loc[(src, "ce", "read", "enabled", "bidir")]
        assert both["gbps"] > 1.2 * direct and both["forward_gbps"] > 0 and both["backward_gbps"] > 0
        assert copies.loc[(src, "sm", "write", "enabled", "uni"), "gbps"] > 50
    chase = rows[rows["method"] == "chase"]
    assert ((chase["ns_per_access"] > 100) & (chase["ns_per_access"] < 20_000)).all()
    assert chase["src_uuid"].str.startswith("GPU-").all() and (chase["src_uuid"] != chase["dst_uuid"]).all()


def test_host_links_alone_and_together_are_verified_and_add_up():
    rows = rows_of("hostlinks", configs("hostlinks", bytes=(64 << 20,)))
    assert (rows["status"] == "ok").all(), rows["error"].tolist()
    assert rows["verified"].all() and set(rows["device"]) == {0, 1}
    together = rows[rows["load"] == "together"]
    assert (together["gpus_copying"] == 2).all()
    for direction, group in together.groupby("direction"):
        total = group["total_gbps"].iloc[0]
        assert group["gbps"].max() <= total * 1.01 <= 1.02 * group["gbps"].sum()  # slowest GPU's time bounds it
    alone = rows[rows["load"] == "alone"]
    assert (alone["gbps"] > 10).all() and (alone["total_gbps"] == alone["gbps"]).all()


def test_a_device_synchronize_waits_for_its_own_gpu_only():
    rows = rows_of("crossgpu", configs("crossgpu", call=("(nothing)", "cudaDeviceSynchronize"),
                                       spin_stream=("non-blocking",)))
    assert (rows["status"] == "ok").all(), rows["error"].tolist()
    verdicts = rows.set_index(["call", "placement"])["verdict"].groupby(level=[0, 1]).agg(set)
    assert verdicts[("(nothing)", "same-gpu")] == verdicts[("(nothing)", "other-gpu")] == {"returns"}
    assert verdicts[("cudaDeviceSynchronize", "same-gpu")] == {"waits-for-device"}
    assert verdicts[("cudaDeviceSynchronize", "other-gpu")] == {"returns"}


def sweep(tmp_path: Path, *args: str) -> tuple[pd.DataFrame, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-m", "bench", "sweep", "--quick", *args, "--out", str(tmp_path)],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return pd.read_parquet(tmp_path), result.stdout


@pytest.mark.parametrize("concurrent", [False, True])
def test_a_sweep_over_every_gpu_runs_each_gpu_and_the_pairs(tmp_path, concurrent):
    rows, printed = sweep(tmp_path, "--devices", "all", "--experiments", "bandwidth,crossgpu",
                          "--axis", "direction=H2D", "--axis", "host_memory=pinned", "--sizes", "16M",
                          "--axis", "call=(nothing)", *(["--concurrent"] if concurrent else []))
    assert (rows["status"] == "ok").all(), rows["error"].tolist()
    bandwidth = rows[rows["experiment"] == "bandwidth"]
    assert sorted(bandwidth["gpu_index"]) == [0, 1] and bandwidth["gpu_uuid"].nunique() == 2
    assert set(bandwidth["concurrent_gpus"]) == {2 if concurrent else 1}
    assert "bandwidth on GPU 1" in printed
    assert set(rows[rows["experiment"] == "crossgpu"]["gpu_index"]) == {0}  # a multi-GPU plan: its first GPU's row


def test_syncs_and_probe_hold_every_gpu_the_region_uses():
    """A region whose float() waits for products on GPU 1 while GPU 0 is current: the hold on GPU 0 alone would let
    it return (issue 32 saw "no waits" and own-work)."""
    import cupy

    import bench
    from bench.platform.cuda import on_device

    with on_device(1):
        matrix = cupy.random.random((2048, 2048))
        stream = cupy.cuda.Stream(non_blocking=True)
    cupy.cuda.runtime.setDevice(0)

    def region():
        with on_device(1), stream:
            product = matrix
            for _ in range(4):
                product = product @ matrix
            return float(product[0, 0])  # the line that waits

    region()
    found = bench.syncs(region)
    assert [place.source for place in found.places] == ["return float(product[0, 0])  # the line that waits"], \
        str(found)
    assert "GPU 0" in found.hold and "GPU 1" in found.hold
    assert bench.probe(region, serialization=False).verdict == "waits-for-device"
    assert cupy.cuda.runtime.getDevice() == 0



def test_a_sweeps_process_of_gpu_1_sees_gpu_1_alone():
    """An experiment's process of one GPU is shown that GPU alone (CUDA_VISIBLE_DEVICES: its UUID), as device 0."""
    from fake_experiments import cuda_seen_rows, experiment

    from bench.platform.env import gpu_environment
    from bench.sweep.plan import Plan, rules_for
    from bench.sweep.processes import RowMessage, isolated

    seen = experiment("seen", cuda_seen_rows, axes={"n": (0,)})
    uuid = gpu_environment(1).device.gpu_uuid
    messages = list(isolated(Plan(seen, [{"n": 0}], rules_for(seen, "default")), 0, sees=uuid))
    rows = [message.row for message in messages if isinstance(message, RowMessage)]
    assert [row["note"] for row in rows] == [f"1 {uuid}"], messages


def test_jax_calls_on_gpu_1_run_beside_gpu_0s_plans(tmp_path):
    """JAX starts on every GPU it sees: its process on GPU 1 sees GPU 1 alone, and a new jit function's first call
    (which failed there when JAX was told the GPU through its own setting) runs."""
    rows, _ = sweep(tmp_path, "--devices", "all",
                    "--experiments", "library", "--axis", "call=jax first call of a new jax.jit function")
    if (rows["status"] == "skipped").all():
        pytest.skip(rows["error"].iloc[0])
    assert (rows["status"] == "ok").all(), rows["error"].tolist()
    assert rows["gpu_uuid"].nunique() == 2
