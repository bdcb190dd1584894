"""The example notebook executed on a GPU (issue 53 §1): docs/examples/notebook.ipynb run top to bottom by nbclient
in a scratch directory, bench from this checkout, and written with its outputs to OUT.ipynb (the Perfetto timeline
it writes stays in the scratch directory: its size is the trace's).

    python scripts/notebook_proof.py OUT.ipynb
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "docs" / "examples" / "notebook.ipynb"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    if args.out.exists():
        raise SystemExit(f"{args.out} exists: a run writes a new file")
    import nbclient
    import nbformat

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    path = os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))
    with tempfile.TemporaryDirectory(prefix="notebook-") as scratch:
        client = nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3",
                                         resources={"metadata": {"path": scratch}})
        client.execute(env={**os.environ, "PYTHONPATH": path})
        written = sorted(item.name for item in Path(scratch).iterdir())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, args.out)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            kinds = [output.get("output_type") + (f":{output.get('name')}" if output.get("name") else "")
                     for output in cell.outputs]
            print(f"{cell.source.splitlines()[0][:60]!r}: {', '.join(kinds) or 'no output'}")
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes); beside it the notebook wrote {written}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
