"""The JAX catalog and PyTorch's Triton calls, without JAX, PyTorch or Triton: the catalogs build, import none of
them, and say what the ``library`` experiment needs. And, with a fake CUDA runtime and a fake JAX, the ``library``
experiment keeps its GPU current whatever JAX leaves current (XLA makes the GPU of its work current on the calling
thread: two-GPU sweeps failed with CuPy's "The device that the stream is created on (1) does not match with the
current device (0)")."""

import contextlib
import importlib.util
import subprocess
import sys
from dataclasses import replace
from types import SimpleNamespace
from urllib.parse import urlparse

import pytest

import bench.platform.cuda
from bench import catalogs
from bench.catalogs import CATEGORIES, LIBRARIES, LIBRARY_DOCS_HOST, Call, Prepared, calls, jax_calls, torch_calls
from bench.analysis.claims import JAX_DISPATCH, JAX_READS
from bench.experiments import library
from bench.platform.libraries import BY_NAME

TRITON_CALLS = {"torch triton kernel launch (warm)": ("launch", False),
                "torch triton kernel first call": ("compilation", True)}


def test_the_catalogs_import_no_library():
    code = ("import sys, bench.catalogs.jax_calls, bench.catalogs.torch_calls; "
            "print(sorted({'jax', 'torch', 'triton'} & set(sys.modules)))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_jax_calls_say_what_the_experiment_needs():
    names = [call.name for call in jax_calls.CALLS]
    assert len(names) >= 15 and len(set(names)) == len(names)
    for call in jax_calls.CALLS:
        assert call.name.startswith("jax ") and call.library == "jax", call.name
        assert call.category in CATEGORIES and call.stream == "own", call.name
        assert call.docs and call.docs_host in LIBRARY_DOCS_HOST, call.name
        source = urlparse(call.source)
        assert source.scheme == "https" and source.netloc in ("docs.jax.dev", "jax.readthedocs.io"), call.source
    assert {call.name for call in jax_calls.CALLS if call.fresh} == {"jax first call of a new jax.jit function"}


CONTROL_FLOW = ("jax int(a)", "jax a.item()", "jax if a > 0:", "jax while a > 3: (condition tested once)")
DATA_DEPENDENT_LENGTH = "jax len(jnp.nonzero(mask)[0])"


def test_conversions_in_control_flow_read_a_fresh_value_and_the_docs_say_they_wait():
    by_name = {call.name: call for call in jax_calls.CALLS}
    for name in CONTROL_FLOW:
        call = by_name[name]
        assert (call.category, call.docs_host, call.source) == ("scalar", "stream", jax_calls.ASYNC), name
        assert "force the Python code to wait for the computation to complete" in call.docs, name
    length = by_name[DATA_DEPENDENT_LENGTH]
    assert (length.category, length.docs_host) == ("indexing", "silent")  # the docs say data-dependent, not "waits"
    assert length.source.endswith("jax.numpy.nonzero.html") and "data-dependent" in length.docs
    assert set(CONTROL_FLOW) <= set(JAX_READS) and set(JAX_READS + JAX_DISPATCH) <= set(by_name)


def test_the_while_condition_is_tested_once():
    class Scalar:  # a fresh scalar, x * 2 + 1 with x in [0, 1): below LIMIT
        tests = 0

        def __gt__(self, other):
            Scalar.tests += 1
            return 2.5 > other

    assert jax_calls._while_above(Scalar()) == 0 and Scalar.tests == 1
    assert jax_calls._if_positive(2.5) is True and jax_calls._if_positive(-1.0) is False


def test_the_new_jax_calls_are_in_the_default_sweep():
    from bench.sweep.plan import make

    (item,) = [item for item in make() if item.experiment.name == "library"]
    planned = {(config["call"], config["placement"]) for config in item.configs}
    for name in (*CONTROL_FLOW, DATA_DEPENDENT_LENGTH):
        assert {(name, placement) for placement in library.PLACEMENTS} <= planned, name
    assert item.estimate_s <= item.experiment.cost.share_s


def test_call_names_are_unique_across_the_libraries():
    names = [call.name for library in LIBRARIES for call in calls(library)]
    assert "jax" in LIBRARIES and len(names) == len(set(names))


def test_triton_calls_are_in_the_torch_catalog():
    by_name = {call.name: call for call in torch_calls.CALLS}
    for name, (category, fresh) in TRITON_CALLS.items():
        call = by_name[name]
        assert (call.category, call.stream, call.fresh) == (category, "current", fresh)
        assert urlparse(call.source).netloc == "triton-lang.org" and call.docs
    assert {call.name for call in torch_calls.CALLS if call.fresh} == {"torch triton kernel first call"}


def test_a_triton_call_without_triton_says_why():
    if importlib.util.find_spec("triton") is not None:
        pytest.skip("Triton is installed here")
    with pytest.raises(ImportError, match="Triton is not installed"):
        torch_calls._triton_kernel(1)


# --- the GPU stays current, whatever JAX leaves current ---------------------------------------------------------


class FakeRuntime:
    """The CUDA runtime's current device, as a process with two GPUs sees it."""

    def __init__(self, device: int) -> None:
        self.device, self.synchronized = device, []

    def getDevice(self) -> int:
        return self.device

    def setDevice(self, device: int) -> None:
        self.device = device

    def deviceSynchronize(self) -> None:
        self.synchronized.append(self.device)


@pytest.fixture
def runtime(monkeypatch):
    fake = FakeRuntime(1)
    for module in (bench.platform.cuda, library, jax_calls):
        monkeypatch.setattr(module, "runtime", fake)
    return fake


def test_kept_device_makes_the_gpu_current_again(runtime):
    with bench.platform.cuda.kept_device(1):
        runtime.setDevice(0)
    assert runtime.device == 1
    with pytest.raises(ValueError), bench.platform.cuda.kept_device(1):
        runtime.setDevice(0)
        raise ValueError
    assert runtime.device == 1


def _moving(runtime, seen: list, label: str, returns=None):
    """A library function that leaves GPU 0 current, as XLA's pinned staging memory does."""
    def function():
        seen.append((label, runtime.device))
        runtime.setDevice(0)
        return returns
    return function


@pytest.mark.parametrize("name", ["jax fake", "cupy fake"])
def test_a_jax_call_leaves_the_rows_gpu_current(runtime, name):
    seen: list = []
    made = _moving(runtime, seen, "call", returns=42)

    def prepare(kit, stream):
        _moving(runtime, seen, "prepare")()
        return Prepared(call=made, arm=_moving(runtime, seen, "arm"), cleanup=_moving(runtime, seen, "cleanup"))

    call = Call(name, name.split()[0], "silent", "docs", "https://docs.jax.dev/", prepare, category="scalar",
                stream="own")
    streams = SimpleNamespace(device=1, call=None, current=contextlib.nullcontext)
    prepared = library._prepared(call, None, streams)
    assert runtime.device == 1 and runtime.synchronized == [1]  # the inputs' wait is on the row's GPU
    if name.startswith("cupy"):
        assert prepared.call is made  # nothing added to the timed call of a library that keeps its GPU
        return
    for step in (prepared.arm, prepared.call, prepared.cleanup):
        runtime.setDevice(1)
        returned = step()
        assert runtime.device == 1, seen
    assert returned is None and prepared.call() == 42
    assert seen == [("prepare", 1), ("arm", 1), ("call", 1), ("cleanup", 1), ("call", 1)]


class FakeJax:
    """Starting the backend leaves the last GPU current; running work leaves GPU 0 current."""

    def __init__(self, runtime) -> None:
        self.runtime, self.default = runtime, None
        self.config = SimpleNamespace(update=lambda name, value: setattr(self, "default", value))
        self.random = SimpleNamespace(split=lambda key, n: [key] * n, key=lambda seed: seed,
                                      uniform=lambda *args, **kwargs: "x", randint=lambda *args, **kwargs: "counts")

    def devices(self, kind):
        self.runtime.setDevice(1)
        return ["gpu 0", "gpu 1"]

    def jit(self, function):
        return lambda *args: self.runtime.setDevice(0)

    def block_until_ready(self, values):
        return values


@pytest.mark.parametrize("device", [0, 1])
def test_the_jax_kit_takes_the_gpu_current_before_jax_started(runtime, monkeypatch, device):
    fake = FakeJax(runtime)
    monkeypatch.setattr(jax_calls, "jax", fake)
    monkeypatch.setattr(jax_calls, "jnp", SimpleNamespace(float32="float32"))
    runtime.setDevice(device)
    kit = jax_calls.Kit()
    assert fake.default == f"gpu {device}" and kit.device == device and runtime.device == device


def test_measure_keeps_its_gpu_through_the_libraries_start_and_failures(runtime, monkeypatch):
    def missing():  # starting JAX's backend leaves the other GPU current
        runtime.setDevice(0)
        return None

    def failing(library_name):
        runtime.setDevice(0)
        raise RuntimeError("the library's error")

    monkeypatch.setattr(library, "SpinWatch", lambda: None)
    jax = BY_NAME["jax"]
    monkeypatch.setitem(BY_NAME, "jax", replace(jax, module="math",
                                                loading=replace(jax.loading, cuda_missing=lambda jax: missing())))
    monkeypatch.setattr(catalogs, "kit", failing)
    rows = []
    for row in library.measure([{"call": "jax float(a)", "placement": "same"},
                                {"call": "jax int(a)", "placement": "same"}], None):
        assert runtime.device == 1
        rows.append(row)
    assert [row["status"] for row in rows] == ["failed", "failed"] and "the library's error" in rows[0]["error"]
    assert runtime.synchronized == [1, 1]  # after a failure, the wait is on the row's GPU

    def measured(config, call, kit, watch, first):
        runtime.setDevice(0)
        return {**config, "status": "ok"}

    monkeypatch.setattr(catalogs, "kit", lambda library_name: object())
    monkeypatch.setattr(library, "_measure", measured)
    for row in library.measure([{"call": "jax if a > 0:", "placement": "other"}], None):
        assert row["status"] == "ok" and runtime.device == 1
