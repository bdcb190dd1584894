"""The README's everyday commands that need no GPU leave a fresh clone as git checked it out: what they write goes
where git ignores it (plots/local/), never over the committed figures the docs cite; and none of them imports a CUDA
library. The commands run once for the module (report reads every committed run: a minute or so)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GPU_COMMANDS = ("sweep", "probe", "syncs", "trace")  # measure: need a GPU
# compare's README line names placeholders; two committed default sweeps of one GPU kind stand in for them
COMPARED = ("results/20261122T004347Z-NVIDIA-H200.parquet", "results/20261122T034221Z-NVIDIA-H200.parquet")
CUDA = ("cupy", "numba")


def imported(stderr: str) -> set[str]:
    """The modules a process and every process it started imported, as Python's import profiling (``-X importtime``,
    which child interpreters inherit) printed them to ``stderr``."""
    return {line.rsplit("|", 1)[1].strip() for line in stderr.splitlines() if line.startswith("import time:")}


def said(stderr: str) -> str:
    """``stderr`` without the import profile."""
    return "\n".join(line for line in stderr.splitlines() if not line.startswith("import time:"))


def everyday_commands() -> list[list[str]]:
    """The README's 'Everyday commands' block, comments dropped, as argument lists after ``python -m bench``."""
    block = (ROOT / "README.md").read_text().split("## Everyday commands", 1)[1].split("```sh", 1)[1]
    commands = []
    for line in block.split("```", 1)[0].splitlines():
        words = line.split("#", 1)[0].split()
        if words:
            assert words[:3] == ["python", "-m", "bench"], line
            commands.append(words[3:])
    return commands


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def fresh_clone(tmp_path_factory) -> tuple[Path, dict[str, subprocess.CompletedProcess]]:
    """A fresh clone of HEAD after the README's commands that need no GPU ran in it, one process each, in order:
    (the clone, each command's finished process by the command's name)."""
    clone = tmp_path_factory.mktemp("fresh") / "clone"
    git("clone", "--quiet", "--shared", "--no-checkout", str(ROOT), str(clone), cwd=clone.parent)
    git("checkout", "--quiet", git("rev-parse", "HEAD", cwd=ROOT).strip(), cwd=clone)
    commands = [words for words in everyday_commands() if words[0] not in GPU_COMMANDS]
    assert [words[0] for words in commands] == ["plot", "report", "compare", "claims"]
    env = {**os.environ, "PYTHONPATH": str(clone / "src"), "PYTHONPROFILEIMPORTTIME": "1"}  # -X importtime
    done = {}
    for words in commands:
        if words[0] == "compare":
            words = ["compare", *COMPARED]
        done[words[0]] = subprocess.run([sys.executable, "-m", "bench", *words], cwd=clone, env=env,
                                        capture_output=True, text=True)
    return clone, done


def test_the_readme_commands_without_a_gpu_leave_a_fresh_clone_clean(fresh_clone):
    clone, done = fresh_clone
    for name, result in done.items():
        assert result.returncode == 0, (name, said(result.stderr))
    assert git("status", "--porcelain", "--untracked-files=all", cwd=clone) == ""
    written = {path.name for path in (clone / "plots" / "local").rglob("*")}
    figures = [path for path in (clone / "plots" / "local").rglob("*.png")]  # plot draws the newest results file
    assert "report.html" in written and figures, written


def test_the_analysis_commands_never_import_cuda(fresh_clone):
    """Where the measuring libraries are installed too, in no process (the report draws its figures in worker
    processes): the committed results hold every experiment, so every view, every claim and compare's every step
    ran."""
    _, done = fresh_clone
    loaded = {name: sorted(module for module in imported(result.stderr) if module.split(".")[0] in CUDA)
              for name, result in done.items()}
    assert loaded == {name: [] for name in ("plot", "report", "compare", "claims")}
    assert all("bench.cli" in imported(result.stderr) for result in done.values())  # the profile was read


TRACKED_LIMIT = 35 * 2**20  # a GPU machine is sent at most 64 MiB: the tree plus the wheels a call carries


def test_the_tracked_files_fit_the_tree_a_gpu_call_carries():
    """Keep in the tree what the docs cite and the newest run per GPU kind; earlier runs stay in git history."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: no tracked files to weigh")
    names = git("ls-files", "-z", cwd=ROOT).split("\0")
    sizes = {name: (ROOT / name).stat().st_size for name in names if name and (ROOT / name).is_file()}
    total = sum(sizes.values())
    largest = sorted(sizes, key=sizes.get, reverse=True)[:5]
    assert total <= TRACKED_LIMIT, (f"tracked files weigh {total / 2**20:.2f} MiB, over {TRACKED_LIMIT / 2**20:.0f} MiB;"
                                    f" the largest: {', '.join(largest)}")
