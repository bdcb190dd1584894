"""JAX calls and what JAX's documentation says about them. JAX runs its computations on streams of its own that no
other library can name (``stream="own"``): the ``library`` experiment holds the whole GPU for them. Its dispatch is
asynchronous, an operation returning an array that is a future; a call that reads a result reads a *fresh* one,
computed in ``arm`` once the GPU is held, so it is not ready when the call is made. JAX is optional (``pip install
"cuda-sync-bench[jax]"``, a CUDA build of jaxlib): without it these calls' rows are skipped with the reason."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from bench.catalogs import Call, Prepared, fresh_number
from bench.catalogs.pages import JAX_ASYNC, JAX_DOCS
from bench.platform.cuda import make_current, runtime
from bench.platform import lazy

jax = lazy.module("jax")
jnp = lazy.module("jax.numpy")

DOCS = JAX_DOCS
ASYNC = JAX_ASYNC
API = DOCS + "_autosummary/"
SIZE = 1 << 20  # elements of the float32 inputs (4 MiB)
SMALL = 10  # elements that tolist() and repr() read
LIMIT = 3.0  # above every fresh scalar (x * 2 + 1 with x in [0, 1)): ``while a > LIMIT`` tests its condition once
WAITS = "reading the value on the host makes JAX \"force the Python code to wait for the computation to complete\""
RETURNS = "\"JAX does not wait for the operation to complete before returning control to the Python program\""


class Fresh(NamedTuple):
    """What ``Kit.fresh`` computes from the kit's inputs: the results the calls read."""

    vector: object  # x * 2 + 1
    scalar: object  # its first element
    small: object  # its first SMALL elements
    mask: object  # where it exceeds 2 (about half)
    counts: object  # the integers plus one
    count: object  # how many elements the mask keeps (an int32 scalar)


def _twice_plus_one(x):
    return x * 2 + 1


def _fresh(x, counts) -> Fresh:
    vector = _twice_plus_one(x)
    mask = vector > 2
    return Fresh(vector, vector[0], vector[:SMALL], mask, counts + 1, jnp.count_nonzero(mask))


class Kit:
    """JAX inputs on the GPU the CUDA runtime has current: a random float32 vector, small non-negative integers, a
    PRNG key, a pageable host array; a jitted ``x * 2 + 1`` and the jitted function that makes the fresh results, both
    compiled and run once; everything ready."""

    def __init__(self) -> None:
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX would take 75% of the GPU's memory
        # The GPU is read before JAX starts: starting its backend (creating each GPU's streams) can leave another GPU
        # current on this thread, and that GPU would become JAX's default device.
        self.device = runtime.getDevice()
        jax.config.update("jax_default_device", jax.devices("gpu")[self.device])
        self.key, values, integers = jax.random.split(jax.random.key(11), 3)
        self.x = jax.random.uniform(values, (SIZE,), dtype=jnp.float32)
        self.counts = jax.random.randint(integers, (SIZE,), 0, 1000)
        self.host = np.random.default_rng(12).random(SIZE, dtype=np.float32)
        self.jitted = jax.jit(_twice_plus_one)
        self.fresh = jax.jit(_fresh)
        jax.block_until_ready((self.jitted(self.x), self.fresh(self.x, self.counts)))
        make_current(self.device)  # current again for CuPy and numba-cuda, whatever JAX left current


def _simple(make: Callable[[Kit], Callable[[], object]]):
    """A call that needs only the kit: ``make(kit)`` returns the function to time."""
    return lambda kit, stream: Prepared(call=make(kit))


def _reads(pick: Callable[[Fresh], object], read: Callable[[object], object]):
    """A call that reads a fresh result: ``arm`` computes the kit's fresh results, the call is ``read(pick(them))``."""
    def prepare(kit: Kit, stream) -> Prepared:
        held: list = []
        return Prepared(call=lambda: read(held[-1]), arm=lambda: held.append(pick(kit.fresh(kit.x, kit.counts))),
                        cleanup=held.clear)
    return prepare


def _read_again(kit: Kit, stream) -> Prepared:
    """np.asarray of an array already read once: its host copy is cached."""
    array = kit.jitted(kit.x)
    np.asarray(array)
    return Prepared(call=lambda: np.asarray(array))


def _if_positive(a) -> bool:
    """``if a > 0:``, as in a program's control flow: the condition is ``bool(a > 0)``."""
    if a > 0:
        return True
    return False


def _while_above(a) -> int:
    """``while a > LIMIT:``, its condition tested once: the fresh scalar is below LIMIT, the body never runs."""
    turns = 0
    while a > LIMIT:
        a, turns = a - 1, turns + 1
    return turns


def _first_jit(kit: Kit, stream) -> Prepared:
    """A function no cache has seen: its constant (exact in float32) differs each time."""
    constant = fresh_number() % (1 << 24)
    function = jax.jit(lambda x: x * 2 + constant)
    return Prepared(call=lambda: function(kit.x))


def _call(name, category, docs, page, prepare, docs_host="silent", fresh=False) -> Call:
    return Call(f"jax {name}", "jax", docs_host, docs, page, prepare, category=category, stream="own", fresh=fresh)


CALLS = (
    _call("float(a)", "scalar", WAITS, ASYNC, _reads(lambda fresh: fresh.scalar, float), docs_host="stream"),
    _call("a.item()", "scalar", WAITS, ASYNC, _reads(lambda fresh: fresh.scalar, lambda a: a.item()),
          docs_host="stream"),
    _call("int(a)", "scalar", "int() is a read of the value: " + WAITS, ASYNC,
          _reads(lambda fresh: fresh.count, int), docs_host="stream"),
    _call("if a > 0:", "scalar", "the condition is bool(a > 0), a read of the value: " + WAITS, ASYNC,
          _reads(lambda fresh: fresh.scalar, _if_positive), docs_host="stream"),
    _call(f"while a > {LIMIT:g}: (condition tested once)", "scalar", f"each test of the condition is bool(a > "
          f"{LIMIT:g}), a read of the value: " + WAITS, ASYNC, _reads(lambda fresh: fresh.scalar, _while_above),
          docs_host="stream"),
    _call("repr(a)", "scalar", "printing an array (\"evaluating repr(result) or str(result)\") \"will block until "
          "the value is ready\"", ASYNC, _reads(lambda fresh: fresh.small, repr), docs_host="stream"),
    _call("np.asarray(a)", "transfer", "only when the host reads a value, e.g. \"converting it into a plain old "
          "numpy.ndarray\", does JAX \"force the Python code to wait for the computation to complete\"", ASYNC,
          _reads(lambda fresh: fresh.vector, np.asarray), docs_host="stream"),
    _call("np.asarray(a) again (host copy cached)", "transfer", "JAX \"may cache the value of the array on the host\" "
          "once it was read; silent about reading it again", API + "jax.Array.copy_to_host_async.html", _read_again),
    _call("jax.device_get(a)", "transfer", "\"Transfer x to host\" as NumPy arrays; " + WAITS, ASYNC,
          _reads(lambda fresh: fresh.vector, lambda a: jax.device_get(a)), docs_host="stream"),
    _call("a.tolist()", "transfer", "a (nested) list of Python scalars; " + WAITS, ASYNC,
          _reads(lambda fresh: fresh.small, lambda a: a.tolist()), docs_host="stream"),
    _call("a.copy_to_host_async()", "transfer", "starts filling JAX's host copy of the array but \"does not wait for "
          "the copy to complete\"", API + "jax.Array.copy_to_host_async.html",
          _reads(lambda fresh: fresh.vector, lambda a: a.copy_to_host_async()), docs_host="never"),
    _call("jax.device_put(numpy pageable)", "transfer", "\"Transfers x to device\"; silent about waiting",
          API + "jax.device_put.html", _simple(lambda kit: lambda: jax.device_put(kit.host))),
    _call("a[boolean mask]", "indexing", "boolean indexing: \"the output shape will depend on the number of True "
          "entries\" (jnp.extract, its equivalent); silent about waiting", API + "jax.numpy.extract.html",
          _reads(lambda fresh: fresh, lambda fresh: fresh.vector[fresh.mask])),
    _call("jnp.nonzero(mask)", "indexing", "\"the size of the output of nonzero is data-dependent\" (not usable under "
          "jit); silent about waiting", API + "jax.numpy.nonzero.html",
          _reads(lambda fresh: fresh.mask, lambda mask: jnp.nonzero(mask))),
    _call("len(jnp.nonzero(mask)[0])", "indexing", "len() reads the shape, and \"the size of the output of nonzero "
          "is data-dependent\"; silent about waiting", API + "jax.numpy.nonzero.html",
          _reads(lambda fresh: fresh.mask, lambda mask: len(jnp.nonzero(mask)[0]))),
    _call("jnp.nonzero(mask, size=n)", "indexing", "with a static size the output's shape is known without the data "
          "(usable under jit); silent about waiting", API + "jax.numpy.nonzero.html",
          _reads(lambda fresh: fresh.mask, lambda mask: jnp.nonzero(mask, size=SIZE))),
    _call("jnp.unique(a)", "indexing", "\"the size of the output of unique is data-dependent\" (not usable under jit "
          "without size); silent about waiting", API + "jax.numpy.unique.html",
          _reads(lambda fresh: fresh.counts, lambda counts: jnp.unique(counts))),
    _call("a.at[0].set(1.0)", "indexing", "returns \"a modified copy of x\", an operation: " + RETURNS, ASYNC,
          _simple(lambda kit: lambda: kit.x.at[0].set(1.0)), docs_host="never"),
    _call("a * 2 + 1", "compute", RETURNS, ASYNC, _simple(lambda kit: lambda: kit.x * 2 + 1), docs_host="never"),
    _call("jnp.sort(a)", "compute", "\"Return a sorted copy of an array\", an operation: " + RETURNS, ASYNC,
          _simple(lambda kit: lambda: jnp.sort(kit.x)), docs_host="never"),
    _call("jax.random.normal(key, shape)", "compute", "random numbers from a key, an operation: " + RETURNS, ASYNC,
          _simple(lambda kit: lambda: jax.random.normal(kit.key, (SIZE,))), docs_host="never"),
    _call("jitted f(a) (compiled)", "launch", "a compiled function's call dispatches it: " + RETURNS, ASYNC,
          _simple(lambda kit: lambda: kit.jitted(kit.x)), docs_host="never"),
    _call("first call of a new jax.jit function", "compilation", "jit traces and compiles a function on its first "
          "call for its inputs' shapes and types (later matching calls need \"no re-compilation\"); silent about "
          "waiting", DOCS + "tracing.html", _first_jit, fresh=True),
    _call("a.block_until_ready()", "synchronization", "control: waits \"for the computation that produced it to "
          "complete\"", ASYNC, _reads(lambda fresh: fresh.vector, lambda a: a.block_until_ready()),
          docs_host="stream"),
    _call("jax.effects_barrier()", "synchronization", "\"Waits until existing functions have completed any "
          "side-effects\"; these computations have none", API + "jax.effects_barrier.html",
          _simple(lambda kit: lambda: jax.effects_barrier())),
)
