"""The README's everyday commands that need no GPU, in a fresh clone where the CUDA libraries look uninstalled
(``pip install -e .`` alone, as the README says, runs them): each works, none of their processes (the report draws
its figures in worker processes) so much as looks for a CUDA library, and they leave the clone as git checked it
out: what they write goes where git ignores it (plots/local/), never over the committed figures the docs cite. Every
view builds its figures of every committed run; they are painted blank (tests/clone_site/sitecustomize.py). The
commands run once for the module."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from paths import WITHOUT_CUDA, with_path


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


@pytest.fixture(scope="module")
def fresh_clone(tmp_path_factory) -> tuple[Path, dict[str, tuple[subprocess.CompletedProcess, list[str]]]]:
    """A fresh clone of HEAD after the README's commands that need no GPU ran in it, one process each, in order:
    (the clone, by each command's name its finished process and the lines its processes logged)."""
    if subprocess.run(["git", "rev-parse", "--is-inside-work-tree"], cwd=ROOT, capture_output=True).returncode:
        pytest.skip("not a git checkout (an unpacked source archive): there is no commit to clone")
    clone = tmp_path_factory.mktemp("fresh") / "clone"
    git("clone", "--quiet", "--shared", "--no-checkout", str(ROOT), str(clone), cwd=clone.parent)
    git("checkout", "--quiet", git("rev-parse", "HEAD", cwd=ROOT).strip(), cwd=clone)
    logs = tmp_path_factory.mktemp("logs")
    commands = [words for words in everyday_commands() if words[0] not in GPU_COMMANDS]
    assert [words[0] for words in commands] == ["plot", "report", "compare", "claims"]
    done = {}
    for words in commands:
        if words[0] == "compare":
            words = ["compare", *COMPARED]
        log = logs / f"{words[0]}.log"
        env = {**os.environ, "PYTHONPATH": with_path(f"{WITHOUT_CUDA}{os.pathsep}{clone / 'src'}"),
               "BENCH_TEST_LOOKUPS": str(log)}
        result = subprocess.run([sys.executable, "-m", "bench", *words], cwd=clone, env=env, capture_output=True,
                                text=True)
        done[words[0]] = (result, log.read_text().splitlines() if log.exists() else [])
    return clone, done


def test_the_readme_commands_without_a_gpu_work_without_cuda_and_leave_a_fresh_clone_clean(fresh_clone):
    """One test of the module's commands, so that one pytest worker runs them. In no process (the report draws its
    figures in workers) did a command look for a CUDA library: not an import, not a look whether one is there. The
    committed results hold every experiment, so every view, every claim and compare's every step ran."""
    clone, done = fresh_clone
    for name, (result, _) in done.items():
        assert result.returncode == 0, (name, result.stderr)
    looked = {name: [line for line in lines if " looked for " in line] for name, (_, lines) in done.items()}
    assert looked == {name: [] for name in ("plot", "report", "compare", "claims")}
    started = {name: sum(" started " in line for line in lines) for name, (_, lines) in done.items()}
    assert all(count >= 1 for count in started.values()) and started["report"] > 1, started  # the hook ran, workers too
    assert git("status", "--porcelain", "--untracked-files=all", cwd=clone) == ""
    written = {path.name for path in (clone / "plots" / "local").rglob("*")}
    figures = [path for path in (clone / "plots" / "local").rglob("*.png")]  # plot draws the newest results file
    assert "report.html" in written and figures, written
    assert "cudaFree" in (clone / "plots" / "local" / "report.html").read_text()
    assert "CUDA claims against measurement" in done["claims"][0].stdout


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
