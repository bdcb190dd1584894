"""bench's PyTorch Lightning callback: ``Trainer(callbacks=[SyncsCallback(step=10)])`` runs ``bench syncs`` on the
tenth training batch (counted from 0) as Lightning runs it: forward, backward, the optimizer and Lightning's own hooks,
whose waits are named at Lightning's lines. Needs ``lightning`` (or ``pytorch_lightning``): the ``lightning`` extra.
"""

from __future__ import annotations

from pathlib import Path

from bench.integrations.step import StepWatch
from bench.usercode.syncs.result import DEFAULT_SETTLE_MS

try:
    from lightning.pytorch.callbacks import Callback
    from lightning.pytorch.utilities.rank_zero import rank_zero_info
except ImportError:  # the older package name
    try:
        from pytorch_lightning.callbacks import Callback
        from pytorch_lightning.utilities.rank_zero import rank_zero_info
    except ImportError:
        raise ImportError("bench.integrations.lightning needs PyTorch Lightning: pip install "
                          "'cuda-sync-bench[lightning]'") from None

FRAMEWORKS = frozenset({"lightning", "pytorch_lightning", "lightning_fabric"})


class SyncsCallback(Callback):
    """``bench syncs`` on training batch ``step`` (from 0; the batch before it is watched as it is, so at least 2),
    ``bench trace`` on the next with ``trace=True``. The table goes to Lightning's log (``rank_zero_info``) and, as
    text and JSON, into ``trainer.log_dir`` (else ``default_root_dir``). ``fail_on_wait=True`` stops the run
    (:class:`~bench.usercode.syncs.checks.WaitedForGpu`) naming the lines that waited; ``baseline`` (a ``bench syncs
    --save-baseline`` file) stops it only on a wait the baseline lacks."""

    def __init__(self, step: int = 10, trace: bool = False, fail_on_wait: bool = False,
                 baseline: str | Path | None = None, settle_ms: float = DEFAULT_SETTLE_MS,
                 timeout_s: float = 120.0) -> None:
        super().__init__()
        self.watch = StepWatch(step, FRAMEWORKS, trace=trace, fail_on_wait=fail_on_wait, baseline=baseline,
                               settle_ms=settle_ms, timeout_s=timeout_s)
        self.batches = 0

    @property
    def found(self):
        """What the watched steps found (``found.syncs``, ``found.trace``, ``found.files``)."""
        return self.watch.found

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self.watch.begin(self.batches)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        step, self.batches = self.batches, self.batches + 1
        lines = self.watch.end(step)
        if not lines:
            return
        for line in lines:
            rank_zero_info(line)
        directory = getattr(trainer, "log_dir", None) or trainer.default_root_dir
        self.watch.save(directory, rank=getattr(trainer, "global_rank", 0) if trainer.world_size > 1 else None)
        if step == self.watch.step:
            self.watch.verdict()

    def on_exception(self, trainer, pl_module, exception) -> None:
        self.watch.abandon()

    def on_train_end(self, trainer, pl_module) -> None:
        self.watch.abandon()
