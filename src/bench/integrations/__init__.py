"""bench inside the training frameworks that own the loop: a callback that runs ``syncs`` (and, when asked, ``trace``)
on one training step the user chooses after warm-up, logs the table through the framework's logger, saves it where
the framework saves its outputs, and can stop the run on a wait. :mod:`.lightning` (PyTorch Lightning) and
:mod:`.transformers` (Hugging Face ``Trainer``), each with the extra of its name; :mod:`.step` is what they share.

May import :mod:`bench.usercode` (the held region, the watcher, tracing), the frameworks (each in its own module, on
import), and the bottom floor; nothing imports it but the user.
"""
