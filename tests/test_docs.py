"""The docs' Python examples run as written (each ```python block of README.md and docs/, in
a fresh namespace, from the repository's root)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _blocks():
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for i, block in enumerate(BLOCK.findall(path.read_text())):
            # one that runs the my_optimizer.py the docs say to save is run beside that file
            marks = pytest.mark.skip(reason="tests/test_custom_optimizer.py runs it") \
                if '"py:my_optimizer:' in block else ()
            yield pytest.param(block, id=f"{path.relative_to(ROOT)}#{i}", marks=marks)


BLOCKS = list(_blocks())


def test_the_docs_have_python_examples():
    assert len(BLOCKS) >= 2  # a pattern that stopped matching would pass every case below


@pytest.mark.parametrize("code", BLOCKS)
def test_a_python_example_of_the_docs_runs(code, monkeypatch):
    monkeypatch.chdir(ROOT)
    exec(compile(code, "<docs>", "exec"), {"__name__": "__docs__"})


# a problem named in an example of a docstring or a page: by URI, given to load_problem, or
# to a command's --problem (a suite name or a file of this repository; FILE: a placeholder)
_NAMED = re.compile(r'load_problem\("([^"/]+)"\)|(problem://autoprofiler/v1/level\d/\w+)'
                    r'|--problem[ =]([a-z0-9_./]+\b)')


def _texts():
    """The README's, the docs' and the packages' texts (a Python file's string literals split
    over lines joined, so that a message's command reads as one)."""
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        yield path, path.read_text()
    for package in ("autoprofiler_env", "agents", "baselines", "experiments"):
        for path in sorted((ROOT / package).rglob("*.py")):
            yield path, re.sub(r'"\s*\n\s*[rf]?"', "", path.read_text())


def test_the_problems_the_docs_name_exist(monkeypatch):
    """A sketch naming a problem the suite no longer holds (softmax_4096x8192, renamed
    since) fails for whoever copies it."""
    from autoprofiler_env.problems import load_problem

    monkeypatch.chdir(ROOT)  # a file is named from the repository's root
    named = {name for _, text in _texts() for match in _NAMED.findall(text)
             for name in match if name}
    assert len(named) >= 3  # a pattern that stopped matching would pass with none
    missing = []
    for name in sorted(named):
        try:
            load_problem(name)
        except Exception:  # noqa: BLE001 - each one that does not load is listed
            missing.append(name)
    assert not missing


def _subcommands(parser) -> dict:
    import argparse

    return next((a.choices for a in parser._actions
                 if isinstance(a, argparse._SubParsersAction)), {})


def _commands_said(text: str):
    """Each ``autoprofiler ...`` command line of a text's code (blocks and inline spans), as
    its words up to the end of the command (a pipe, ``&&``, ``;``, a comment)."""
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```", text, re.S | re.M)
    spans = re.findall(r"`([^`\n]+(?:\n[^`\n]+)?)`", re.sub(r"^```.*?^```", "", text,
                                                           flags=re.S | re.M))
    for code in [line for block in blocks for line in block.replace("\\\n", " ").splitlines()
                 ] + spans:
        for match in re.finditer(r"(?:^|\s|\()autoprofiler\s+([^;&|`#)]*)", " ".join(code.split())):
            yield match.group(1).split()


def test_the_commands_the_docs_show_take_the_options_they_are_given():
    """A command shown in a page or an error message with an option the CLI no longer takes
    (renamed since, say) fails for whoever copies it: every command shown names a subcommand
    and its options."""
    from experiments.cli import build_parser

    cli, wrong, options = build_parser(), [], 0
    for path, text in _texts():
        for words in _commands_said(text):
            parser, command = cli, []
            while words and words[0] in _subcommands(parser):
                parser = _subcommands(parser)[words[0]]
                command.append(words.pop(0))
            if not command:
                wrong.append(f"{path.name}: autoprofiler {' '.join(words[:1])}: no command")
                continue
            known = {o for action in parser._actions for o in action.option_strings}
            said = [w.split("=")[0].rstrip(".,:\"") for w in words if w.startswith("--")]
            options += len(said)
            wrong += [f"{path.name}: autoprofiler {' '.join(command)} {o}"
                      for o in said if o not in known]
    assert options >= 100  # a pattern that stopped matching would pass with none
    assert not wrong
