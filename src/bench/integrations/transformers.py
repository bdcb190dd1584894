"""bench's Hugging Face ``Trainer`` callback: ``Trainer(..., callbacks=[SyncsCallback(step=10)])`` runs ``bench
syncs`` on the tenth optimizer step (counted from 0) as the Trainer runs it: its forward and backward passes (every
micro-batch of a gradient accumulation), the optimizer and the Trainer's own code, whose waits are named at its lines
(transformers' and accelerate's). Needs ``transformers``: the ``transformers`` extra.
"""

from __future__ import annotations

from bench.integrations.step import StepCallback

try:
    from transformers import TrainerCallback
    from transformers.utils import logging
except ImportError:
    raise ImportError("bench.integrations.transformers needs transformers: pip install "
                      "'cuda-sync-bench[transformers]'") from None

logger = logging.get_logger("transformers.bench")  # under transformers' own logger and its verbosity


class SyncsCallback(StepCallback, TrainerCallback):
    """``bench syncs`` on optimizer step ``step`` (from 0; the step before it is watched as it is, so at least 2),
    ``bench trace`` on the next with ``trace=True``; a step runs from its start to the next one's (the Trainer's
    logging, saving and the next batch's fetch). The table goes to transformers' log (a warning where the step
    waited) and, as text and JSON, into ``args.output_dir``. ``fail_on_wait=True`` stops the run
    (:class:`~bench.usercode.syncs.checks.WaitedForGpu`) naming the lines that waited; ``baseline`` (a ``bench syncs
    --save-baseline`` file) stops it only on a wait the baseline lacks. Its arguments: :class:`StepCallback`'s."""

    FRAMEWORKS = frozenset({"transformers", "accelerate"})

    def on_step_begin(self, args, state, control, **kwargs) -> None:
        self._step_starts(lambda lines: self._said(args, lines))

    def on_train_end(self, args, state, control, **kwargs) -> None:
        self._said(args, self.watch.close_step())

    def _said(self, args, lines: list[str]) -> None:
        """Log and save what a watched step found, then stop the run where it failed."""
        if not lines:
            return
        waited = self.found.syncs is not None and self.found.syncs.waited
        for line in lines:
            (logger.warning if waited else logger.info)(line)
        self.watch.save(args.output_dir, rank=args.process_index if args.world_size > 1 else None)
        self.watch.verdict()
