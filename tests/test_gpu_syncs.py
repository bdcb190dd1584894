"""The device-wide hold, ``bench.syncs``, ``assert_async`` and ``probe`` on every stream, on a real GPU (CuPy only:
PyTorch's and JAX's cases run in scripts/syncs_cases.py). Skipped (with the reason) where no GPU is visible."""

import json
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("whole_gpu_module")]  # the hold takes time slices from others


@pytest.fixture(scope="module")
def cupy():
    import cupy

    return cupy


@pytest.fixture(scope="module")
def busy(cupy):
    """A few ms of matrix products on a non-blocking stream, queued by each call."""
    matrix = cupy.random.random((2048, 2048))
    stream = cupy.cuda.Stream(non_blocking=True)

    def queue():
        with stream:
            for _ in range(4):
                matrix @ matrix
        return stream

    queue()  # cuBLAS loads its kernels on their first call, and loading waits for an idle GPU: not under a hold
    stream.synchronize()
    return queue


def test_the_hold_fills_every_sm_and_keeps_other_streams_waiting(cupy):
    from bench.platform.cuda import runtime
    from bench.usercode.hold import device_hold

    hold = device_hold()
    properties = runtime.getDeviceProperties(runtime.getDevice())
    assert hold.shape.blocks * hold.shape.threads == (properties["multiProcessorCount"]
                                                      * properties["maxThreadsPerMultiProcessor"])
    other = cupy.cuda.Stream(non_blocking=True)
    done = cupy.zeros(1)
    done += 1  # loads the kernel: a first launch waits for the GPU to be idle (lazy loading)
    hold.launch(2.0)
    try:
        hold.wait_full()
        with other:
            done += 1
            event = other.record()
        time.sleep(0.05)
        assert not event.done and hold.holding()  # a kernel of another stream could not start
    finally:
        hold.finish()
    event.synchronize()
    assert float(done[0]) == 2 and not hold.expired()


def test_syncs_names_the_line_that_waited_on_a_non_blocking_stream(cupy, busy, monkeypatch):
    from bench import syncs
    from bench.usercode.syncs import run

    def region():
        with busy():  # float() inside: outside, CuPy would copy on the legacy stream, which waits for nothing here
            total = cupy.ones(1 << 20).sum()
            return float(total)  # noqa: the line that waits

    # The hold's watchdog (0.25 s) out of the reach of a stalled host, so that only the settle (0.1 s) can end the
    # hold: found by the settle, the wait held the GPU at least the settle and less than the watchdog would have.
    monkeypatch.setattr(run, "HOLD_TIMEOUT_S", 30.0)
    found = syncs(region, cuda_calls=False)  # a warm-up without the hold first loads its kernels
    assert found.waited and len(found.places) == 1, str(found)
    place = found.places[0]
    assert place.source == "return float(total)  # noqa: the line that waits" and place.library == "cupy"
    assert place.count == 1 and found.settle_ms <= place.hold_ms < run.HOLD_TIMEOUT_S * 1e3, place.hold_ms
    assert "region" in place.calls[-1]


def test_syncs_passes_a_region_that_only_enqueues(cupy, busy):
    from bench import syncs

    found = syncs(lambda: busy(), cuda_calls=False)
    assert not found.waited and not found.own_work, str(found)
    assert str(found).startswith("no waits")


def test_regions_nest_and_an_exception_releases_the_gpu(cupy, busy, monkeypatch):
    from bench.pytest_plugin import WaitedForGpu, assert_async
    from bench.usercode.hold import in_use
    from bench.usercode.syncs import run

    with assert_async():
        busy()
        with assert_async():
            busy()
    with pytest.raises(WaitedForGpu, match="inner_wait"):
        with assert_async():
            busy()
            with assert_async():
                inner_wait = float(cupy.ones(4).sum())  # noqa: F841
    monkeypatch.setattr(run, "HOLD_TIMEOUT_S", 30.0)  # only the region's end can end this hold, never a stalled host
    with pytest.raises(KeyError):
        with assert_async():
            busy()
            raise KeyError("inside")
    cupy.cuda.runtime.deviceSynchronize()  # returns once the hold is gone: at once, or after its 30 s watchdog
    held = in_use()
    assert held.ended() and not held.expired()  # the exception released the hold, not its watchdog


def test_probe_holds_every_stream_by_default(cupy, busy):
    from bench import probe

    stream = cupy.cuda.Stream(non_blocking=True)
    data = cupy.ones(1 << 20)

    def on_side_stream():
        with stream:
            return float(data.sum())

    held = probe(on_side_stream, serialization=False)
    assert held.verdict == "waits-for-device" and held.held == "every stream", str(held)
    legacy = probe(on_side_stream, stream=0, serialization=False)  # the old meaning: the legacy stream alone
    assert legacy.verdict != "waits-for-device", str(legacy)


def test_probe_tells_host_work_from_a_wait(cupy):
    """A call that only sleeps on the host is own-work (issue 32 saw waits-for-device: the hold ended first)."""
    from bench import probe

    slept = probe(lambda: time.sleep(0.05), serialization=False, repeats=2)  # the old 20 ms hold ended first
    assert slept.verdict == "own-work" and slept.gpu_busy_after and slept.spin_ms > 100, str(slept)


def test_jax_and_triton_calls_in_the_library_truth_table(cupy):
    """JAX's calls, held by the device-wide hold (its streams have no names), and Triton's launch."""
    pytest.importorskip("jax")
    from gpu_rows import rows_of

    configs = [{"call": call, "placement": "same"} for call in (
        "jax float(a)", "jax a * 2 + 1", "jax jitted f(a) (compiled)", "jax a[boolean mask]",
        "jax a.copy_to_host_async()")]
    frame = rows_of("library", configs).set_index("call")
    assert (frame["status"] == "ok").all(), frame["error"].tolist()
    verdicts = frame["verdict"].to_dict()
    assert verdicts["jax float(a)"] == "waits-for-device" and verdicts["jax a[boolean mask]"] == "waits-for-device"
    for dispatch in ("jax a * 2 + 1", "jax jitted f(a) (compiled)"):  # returns (or own-work: slow, never a wait)
        assert verdicts[dispatch] != "waits-for-device", (dispatch, frame.loc[dispatch, "host_ms"])
    assert verdicts["jax a.copy_to_host_async()"] != "waits-for-device"
    assert frame.loc["jax float(a)", "matches_docs"]
    if pytest.importorskip("torch").cuda.is_available():
        pytest.importorskip("triton")
        triton = rows_of("library", [{"call": "torch triton kernel launch (warm)", "placement": "same"}])
        assert triton["status"].tolist() == ["ok"] and triton["verdict"].tolist() == ["returns"], triton["error"]


REGION = """
import cupy

x = cupy.ones(1 << 20)


def step():
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        total = x.sum()
        return float(total)
"""


def test_a_syncs_baseline_passes_code_moved_down_and_fails_a_new_wait_on_its_line(tmp_path):
    from commands import bench

    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    target = tmp_path / "loop.py"
    target.write_text(REGION)
    saved = bench("syncs", "--no-cuda-calls", "--save-baseline", "base.json", "loop.py:step", cwd=tmp_path)
    assert saved.returncode == 0, saved.stderr
    places = json.loads((tmp_path / "base.json").read_text())["places"]
    assert [place["source"] for place in places] == ["return float(total)"]
    target.write_text("import os\n\n# moved down\n" + REGION)
    moved = bench("syncs", "--no-cuda-calls", "--baseline", "base.json", "loop.py:step", cwd=tmp_path)
    assert moved.returncode == 0 and "nothing got worse" in moved.stdout, moved.stdout + moved.stderr
    target.write_text(REGION.replace("        total = x.sum()\n",
                                     "        total = x.sum()\n        peak = float(x.max())\n"))
    worse = bench("syncs", "--no-cuda-calls", "--baseline", "base.json", "--format", "github", "loop.py:step",
                  cwd=tmp_path)
    line = REGION.splitlines().index("        total = x.sum()") + 2
    assert worse.returncode == 1, worse.stdout + worse.stderr
    assert worse.stdout.splitlines()[0].startswith(f"::error file=loop.py,line={line},"), worse.stdout


def test_a_wait_inside_allow_waits_is_shown_allowed_and_passes_assert_async(cupy, busy):
    import bench
    from bench.pytest_plugin import WaitedForGpu, assert_async

    def region():
        with busy():
            total = cupy.ones(1 << 20).sum()
            with bench.allow_waits("the loss, logged"):
                return float(total)

    found = bench.syncs(region, cuda_calls=False)
    assert not found.waited and [place.allowed for place in found.allowed] == ["the loss, logged"], str(found)
    region()
    with assert_async():
        region()
    with pytest.raises(WaitedForGpu, match="1 time"):
        with assert_async(max_waits=0):
            with busy():
                float(cupy.ones(1 << 20).sum())


THEIR_TEST = REGION + """

def test_step(assert_async):
    step()
    with assert_async():
        step()
"""


def test_pytest_keeps_a_baseline_per_test_and_fails_only_on_a_new_wait(tmp_path):
    import os
    import subprocess
    import sys

    from paths import with_path

    env = {**os.environ, "PYTHONPATH": with_path(str(Path(__file__).resolve().parents[1] / "src")),
           "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}

    def pytest_run(*options):
        return subprocess.run([sys.executable, "-m", "pytest", "-p", "bench.pytest_plugin", "-p", "no:cacheprovider",
                               "--bench-baseline", "baselines", *options, "test_theirs.py"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)

    (tmp_path / "test_theirs.py").write_text(THEIR_TEST)
    written = pytest_run("--bench-update-baseline")
    assert written.returncode == 0 and len(list((tmp_path / "baselines").iterdir())) == 1, written.stdout[-2000:]
    assert pytest_run().returncode == 0  # the wait it has passes
    (tmp_path / "test_theirs.py").write_text(THEIR_TEST.replace("        total = x.sum()\n",
                                                                "        total = x.sum()\n        float(x.max())\n"))
    failed = pytest_run()
    assert failed.returncode == 1 and "test_theirs.py:11  new: 1 wait" in failed.stdout, failed.stdout[-3000:]


@pytest.mark.parametrize("legacy", [False, True], ids=["hold", "spin"])
def test_probe_does_not_hold_inside_allow_waits(cupy, legacy):
    import bench

    stream = cupy.cuda.Stream.null if legacy else cupy.cuda.Stream(non_blocking=True)

    def region(allow: bool):
        with stream:  # the read on the stream that computed it: on another stream it would not wait for it
            total = cupy.ones(1 << 20).sum()
            if allow:
                with bench.allow_waits("the loss, logged"):
                    return float(total)
            return float(total)

    on = 0 if legacy else None  # a spin on the legacy stream, or the device-wide hold
    allowed = bench.probe(region, True, stream=on, serialization=False)
    assert allowed.verdict == "returns" and allowed.allowed == ("the loss, logged",), str(allowed)
    waited = bench.probe(region, False, stream=on, serialization=False)
    assert waited.verdict == "waits-for-device" and waited.allowed == (), str(waited)
