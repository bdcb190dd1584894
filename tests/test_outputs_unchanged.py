"""Issue 54's guard rail: every reading command's output on the committed results (report, compare in text, JSON and
Markdown, claims in the three, plot, sweep --list; scripts/output_digests.py's CASES) is byte-identical to what it was
before the refactor (commit 0311a27, recorded in tests/data/outputs_before_refactor.json by
``python scripts/output_digests.py --at 0311a27 --write``): stdout, stderr, the exit status and every file written,
with only the path of the directory each command writes into (a temporary one) normalised in what it prints.

Figures' bytes depend on the libraries that draw them, so the recorded digests hold under the versions they were
recorded with (the JSON's ``environment``). Under others, the commands run on the recorded commit's tree too (from
git, as ``--at`` does) and the two are compared; where git lacks that commit (a shallow clone) the test is skipped,
naming the versions that differ."""

from __future__ import annotations

import contextlib
import json
import subprocess

import pytest

from paths import script_module


def _before(script, recorded: dict, tmp_path) -> dict:
    """The digests before the refactor under this environment: the recorded ones, or the recorded commit's."""
    here = script.environment()
    if here == recorded["environment"]:
        return recorded["commands"]
    differing = ", ".join(f"{name} {recorded['environment'].get(name)} recorded, {here.get(name)} here"
                          for name in sorted(here.keys() | recorded["environment"].keys())
                          if here.get(name) != recorded["environment"].get(name))
    tree = None
    if recorded["commit"] is not None:  # None: recorded from a working tree, nothing to run again
        with contextlib.suppress(OSError, subprocess.CalledProcessError):  # no git, or no such commit in it
            tree = script.commit_tree(recorded["commit"], tmp_path / "before-tree")
    if tree is None:
        commit = (recorded["commit"] or "COMMIT")[:12]
        pytest.skip(f"the digests were recorded under other versions ({differing}) and git has no commit {commit} "
                    f"to run here: python scripts/output_digests.py --at {commit} --write records them under these")
    return script.digests(tree, tmp_path / "before")


def test_every_commands_output_on_the_committed_results_is_as_before_the_refactor(tmp_path):
    with script_module("output_digests") as script:
        recorded = json.loads(script.RECORDED.read_text())
        before = _before(script, recorded, tmp_path)
        now = script.digests(out=tmp_path / "now")
        differing = script.differences(before, now)
    assert not differing, "outputs that differ from commit " + recorded["commit"][:12] + "'s:\n" + "\n".join(differing)


def test_a_difference_names_the_command_and_what_differs():
    with script_module("output_digests") as script:
        before = {"plot": {"exit": 0, "stdout": "a", "stderr": "b", "files": {"x.png": "1", "y.svg": "2"}},
                  "claims": {"exit": 0, "stdout": "a", "stderr": "b", "files": {}}}
        now = {"plot": {"exit": 0, "stdout": "a", "stderr": "c", "files": {"x.png": "9", "z.svg": "2"}},
               "claims": {"exit": 1, "stdout": "a", "stderr": "b", "files": {}}}
        assert script.differences(before, now) == [
            "claims: exit differs (0 then, 1 now)", "plot: stderr differs", "plot: x.png differs",
            "plot: y.svg not written now", "plot: z.svg written now, not then"]
        assert script.differences(before, before) == []
        assert script.differences(before, {"plot": before["plot"]}) == ["claims: not run now"]
