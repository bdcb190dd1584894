"""scripts/gate_proof.py without a GPU: each edit changes docs/examples/train_loop.py as its name says, into Python
that parses, and nothing else; the gates it runs are commands bench and its pytest plugin have."""

import ast
import difflib

import pytest

from paths import script_module


@pytest.fixture(scope="module")
def proof():
    with script_module("gate_proof") as module:
        yield module


def changed(before: str, after: str) -> tuple[list[str], list[str]]:
    """The lines removed and added."""
    diff = list(difflib.ndiff(before.splitlines(), after.splitlines()))
    return [line[2:] for line in diff if line.startswith("- ")], [line[2:] for line in diff if line.startswith("+ ")]


def test_each_edit_does_what_its_name_says_and_parses(proof):
    source = proof.LOOP.read_text()
    edits = {edit.name: edit for edit in proof.EDITS}
    for edit in proof.EDITS:
        ast.parse(edit.apply(source))
    removed, added = changed(source, edits["moved"].apply(source))
    assert removed == [] and "EDITED = 'lines added above the loop'" in added and "" in added
    assert source.index("def train(") < edits["moved"].apply(source).index("def train(")
    removed, added = changed(source, edits["item"].apply(source))
    assert removed == [] and len(added) == 1 and added[0].strip().endswith(".item()")
    removed, added = changed(source, edits["unlogged"].apply(source))
    assert added == [] and [line.strip() for line in removed] == ["if step % LOG_EVERY == 0:",
                                                                  "losses.append(loss.item())"]
    removed, added = changed(source, edits["pageable"].apply(source))
    assert len(removed) == 1 and ".pin_memory()" in removed[0] and "pin_memory" not in added[0]


def test_the_gates_it_runs_are_bench_commands(proof):
    from bench.cli import _parser

    for arguments in [*proof.GATES.values(), *proof.BASELINES.values()]:
        if arguments[:2] == ["-m", "bench"]:
            _parser().parse_args(arguments[2:])
        else:
            assert arguments[:2] == ["-m", "pytest"] and "--bench-baseline" in arguments
    assert {gate for edit in proof.EDITS for gate in edit.expected} <= set(proof.GATES)
