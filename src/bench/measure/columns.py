"""Result columns several experiments declare alike: one declaration each, so their names, types and docs cannot
drift apart. An experiment whose column means something else under the same name (``bytes`` as a working set, say)
declares its own, of the same type."""

from __future__ import annotations

from collections.abc import Sequence

from bench.results.schema import FLAG, FLOAT, INT, TEXT, TEXTS, Column, column
from bench.platform.vocabulary import PLACEMENTS, SPIN_STREAMS

# --- copies ----------------------------------------------------------------------------------------------------
BYTES_PER_COPY = column("bytes", INT, "bytes per copy")
GBPS = column("gbps", FLOAT, "GB/s (1e9 bytes/s) at the median")
VERIFIED_COPY = column("verified", FLAG, "the copy's destination equalled its source byte for byte before timing")

# --- a call made while spin kernels run (bench.measure.verdicts) ------------------------------------------------
SPIN_STREAM = column("spin_stream", TEXT, "how the spinning stream was created", SPIN_STREAMS)
API = column("api", TEXT, "the CUDA runtime function")
SPIN_MS = column("spin_ms", FLOAT, "length of each spin kernel")
HOST_MS = column("host_ms", FLOAT, "median host time of the call")
SPIN_LEFT_MS = column("spin_left_ms", FLOAT, "median of how much of the spin was left when the call was made")
IDLE_HOST_MS = column("idle_host_ms", FLOAT, "host time of the call with nothing running")
STABLE = column("stable", FLAG, "all repeats gave the same verdict")
DOCS = column("docs", TEXT, "what the documentation says")
SOURCE = column("source", TEXT, "the documentation page")
MATCHES_DOCS = column("matches_docs", FLAG, "the measurement agrees with the documentation (empty: the docs say "
                                            "nothing)")
DOCS_WAITS = column("docs_waits", FLAG, "the docs say the call waits for the spinning kernel (empty: silent or "
                                        "vague)")


def verdict_columns(values: Sequence[str]) -> tuple[Column, Column]:
    """``verdict`` and ``verdicts``, holding ``values``."""
    return (column("verdict", TEXT, "the most common verdict over the repeats", values),
            column("verdicts", TEXTS, "each repeat's verdict", values))


# The runtime call catalog's columns (bench.catalogs.runtime), which the blocking and serialization experiments share.
CATALOG_COLUMNS = (
    column("call", TEXT, "the call, as named in the catalog (bench.catalogs)"),
    column("placement", TEXT, "the call's stream: same (the spinning stream), other (a non-blocking stream), legacy "
                              "(the NULL stream), per-thread, or none (the call takes no stream)", PLACEMENTS),
    SPIN_STREAM, API, SPIN_MS, HOST_MS, STABLE, DOCS, SOURCE, MATCHES_DOCS,
)
