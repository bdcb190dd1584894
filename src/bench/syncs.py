"""Where does *my* code wait? The public names of the syncs tool, whose code is :mod:`bench.usercode.syncs`:
``bench.syncs(fn)`` and ``with held_region():`` hold the GPU and watch the region (:mod:`bench.usercode.syncs.run`),
and what they find is a :class:`SyncsResult` of :class:`Place` s, its text and its results files; ``with
allow_waits("why"):`` marks waits the region makes on purpose (:mod:`bench.usercode.allowance`)."""

from bench.usercode.allowance import allow_waits
from bench.usercode.syncs.files import TABLE, columns, save
from bench.usercode.syncs.result import DEFAULT_SETTLE_MS, Place, SyncsResult
from bench.usercode.syncs.run import held_region, syncs

__all__ = ["DEFAULT_SETTLE_MS", "TABLE", "Place", "SyncsResult", "allow_waits", "columns", "held_region", "save",
           "syncs"]
