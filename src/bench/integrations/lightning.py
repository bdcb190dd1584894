"""bench's PyTorch Lightning callback: ``Trainer(callbacks=[SyncsCallback(step=10)])`` runs ``bench syncs`` on the
tenth training batch (counted from 0) as Lightning runs it: forward, backward, the optimizer and Lightning's own hooks,
whose waits are named at Lightning's lines. Needs ``lightning`` (or ``pytorch_lightning``): the ``lightning`` extra.
"""

from __future__ import annotations

import importlib.util
import sys

from bench.integrations.step import StepCallback


def _package() -> str:
    """The Lightning the user's code imports: ``pytorch_lightning`` where only it is loaded (its Trainer takes only its
    own callbacks), else ``lightning``, else whichever is installed."""
    if "pytorch_lightning" in sys.modules and "lightning" not in sys.modules:
        return "pytorch_lightning"
    for name in ("lightning", "pytorch_lightning"):
        if importlib.util.find_spec(name) is not None:
            return name
    raise ImportError("bench.integrations.lightning needs PyTorch Lightning: pip install 'cuda-sync-bench[lightning]'")


if _package() == "lightning":
    from lightning.pytorch.callbacks import Callback
    from lightning.pytorch.utilities.rank_zero import rank_zero_info
else:
    from pytorch_lightning.callbacks import Callback
    from pytorch_lightning.utilities.rank_zero import rank_zero_info


class SyncsCallback(StepCallback, Callback):
    """``bench syncs`` on training batch ``step`` (from 0; the batch before it is watched as it is, so at least 2),
    ``bench trace`` on the next with ``trace=True``; a step runs from its batch's start to the next one's (its hooks
    and logging, the next batch's fetch). The table goes to Lightning's log (``rank_zero_info``) and, as text and
    JSON, into ``trainer.default_root_dir``. ``fail_on_wait=True`` stops the run
    (:class:`~bench.usercode.syncs.checks.WaitedForGpu`) naming the lines that waited; ``baseline`` (a ``bench syncs
    --save-baseline`` file) stops it only on a wait the baseline lacks. Its arguments: :class:`StepCallback`'s."""

    FRAMEWORKS = frozenset({"lightning", "pytorch_lightning", "lightning_fabric"})

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self._step_starts(lambda lines: self._said(trainer, lines))

    def on_train_end(self, trainer, pl_module) -> None:
        self._said(trainer, self.watch.close_step())

    def on_exception(self, trainer, pl_module, exception) -> None:
        self.watch.abandon()

    def _said(self, trainer, lines: list[str]) -> None:
        """Log and save what a watched step found (the default root directory: ``log_dir`` would ask every rank),
        then stop the run where it failed."""
        if not lines:
            return
        for line in lines:
            rank_zero_info(line)
        self.watch.save(trainer.default_root_dir, rank=trainer.global_rank if trainer.world_size > 1 else None)
        self.watch.verdict()
