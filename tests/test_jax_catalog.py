"""The JAX catalog and PyTorch's Triton calls, without JAX, PyTorch or Triton: the catalogs build, import none of
them, and say what the ``library`` experiment needs."""

import importlib.util
import subprocess
import sys
from urllib.parse import urlparse

import pytest

from bench.catalogs import CATEGORIES, LIBRARIES, LIBRARY_DOCS_HOST, calls, jax_calls, torch_calls

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
