import time

_began = time.perf_counter()  # the interpreter's start ends here; bench's imports begin (-v says each's seconds)

from bench.cli import main  # noqa: E402

raise SystemExit(main(began=_began))
