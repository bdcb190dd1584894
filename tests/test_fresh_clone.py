"""The README's everyday commands that need no GPU leave a fresh clone as git checked it out: what they write goes
where git ignores it (plots/local/), never over the committed figures the docs cite."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GPU_COMMANDS = ("sweep", "probe", "syncs", "trace")  # measure: need a GPU
# compare's README line names placeholders; two committed default sweeps of one GPU kind stand in for them
COMPARED = ("results/20261122T004347Z-NVIDIA-H200.parquet", "results/20261122T034221Z-NVIDIA-H200.parquet")


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


def test_the_readme_commands_without_a_gpu_leave_a_fresh_clone_clean(tmp_path):
    """Takes a minute or two: report reads every committed run."""
    clone = tmp_path / "clone"
    git("clone", "--quiet", "--shared", "--no-checkout", str(ROOT), str(clone), cwd=tmp_path)
    git("checkout", "--quiet", git("rev-parse", "HEAD", cwd=ROOT).strip(), cwd=clone)
    commands = [words for words in everyday_commands() if words[0] not in GPU_COMMANDS]
    assert [words[0] for words in commands] == ["plot", "report", "compare", "claims"]
    env = {**os.environ, "PYTHONPATH": str(clone / "src")}
    for words in commands:
        if words[0] == "compare":
            words = ["compare", *COMPARED]
        result = subprocess.run([sys.executable, "-m", "bench", *words], cwd=clone, env=env, capture_output=True,
                                text=True)
        assert result.returncode == 0, (words, result.stderr)
    assert git("status", "--porcelain", "--untracked-files=all", cwd=clone) == ""
    written = {path.name for path in (clone / "plots" / "local").rglob("*")}
    figures = [path for path in (clone / "plots" / "local").rglob("*.png")]  # plot draws the newest results file
    assert "report.html" in written and figures, written


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
