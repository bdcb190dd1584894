"""The README opens with the two set-up commands, and CI runs its test command verbatim."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_commands():
    lines = (ROOT / "README.md").read_text().splitlines()
    start = lines.index("```sh")
    end = lines.index("```", start + 1)
    return [line for line in lines[start + 1 : end] if line.strip() and not line.startswith("#")]


def test_readme_opens_with_two_setup_commands():
    text = (ROOT / "README.md").read_text()
    assert text.index("```sh") < text.index("##")  # before any section
    sweep, tests = readme_commands()
    assert sweep.endswith("python -m bench sweep") and "pip install" in sweep
    assert "pytest" in tests and "pip install" in tests
    # The sweep needs the measuring libraries, and so do CPU tests of the kernels (marker cuda_libs): both install them.
    assert ".[cu12]" in sweep and ".[cu12,test]" in tests


def test_ci_runs_the_readme_test_command_verbatim():
    _, tests = readme_commands()
    assert tests in (ROOT / ".ci" / "run").read_text().splitlines()
