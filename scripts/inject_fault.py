"""A sweep in which one experiment makes an illegal memory access after N rows (isolation, shown on a real GPU).

    python scripts/inject_fault.py EXPERIMENT:N [--experiments A,B,C] [--quick] [--out DIR]

The sticky cudaErrorIllegalAddress must end only that experiment: its remaining configurations become failed rows
with the runtime's error text, and the experiments before and after it keep every row.
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the fault wrapper is test support

from rich.console import Console  # noqa: E402

from bench import cli  # noqa: E402
from bench.sweep import Planned, Request, Runner  # noqa: E402
from faults import with_fault  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fault", help="EXPERIMENT:N")
    parser.add_argument("--experiments", default="launch,overlap,graphs")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=Path("results/_fault-injection"))
    args = parser.parse_args()
    target, _, after = args.fault.partition(":")
    console = Console()
    progress = cli._Progress(console)
    runner = Runner(Request(args.experiments.split(","), "quick" if args.quick else "default", out=args.out,
                            command=" ".join(["python", *sys.argv])), progress)
    planned = runner.plan()
    plans = [item if item.experiment.name != target else
             type(item)(with_fault(item.experiment, int(after)), item.configs, item.rules)
             for item in planned.plans]
    checked = runner.check(Planned(plans, planned.devices, planned.left_out))
    try:
        outcome = runner.run(checked)
    finally:
        progress.close()
    cli._print_summary(checked.plans, outcome, console)
    return 0


if __name__ == "__main__":
    sys.exit(main())
