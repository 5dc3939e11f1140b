"""Python source parsed alike on every Python the package runs on (autoprofiler_env.pyast)."""

import ast

import pytest

import autoprofiler_env.pyast as pyast


def test_a_source_nested_too_deeply_is_refused_before_python_3_10s_parser_builds_it(
        monkeypatch):
    """A Python 3.10 audit: a reply or candidate of a million ``1+1+...`` (2 MB) crashed the
    interpreter in ast.parse (a segfault: the judge's process), where 3.11 raises
    RecursionError; here 3.10 is stood in for, and ast.parse must not be reached."""
    parsed = []
    real = ast.parse
    monkeypatch.setattr(pyast, "_DEPTH_CHECKED", False)
    monkeypatch.setattr(pyast.ast, "parse", lambda *a, **k: parsed.append(1) or real(*a, **k))
    with pytest.raises(RecursionError):
        pyast.parse("1" + "+1" * 1_000_000)
    assert parsed == []
    tree = pyast.parse("x = 1\n", "f.py")  # what parses is parsed as before
    assert isinstance(tree, ast.Module) and parsed == [1]
    with pytest.raises(SyntaxError, match="expected ':'"):  # said by ast.parse, as on 3.11
        pyast.parse("class A\n", "f.py")


def test_the_judge_the_reply_reader_and_the_problem_loader_parse_through_it(tmp_path):
    from autoprofiler_env.errors import LLMError, ProblemError
    from autoprofiler_env.harness.static_check import check_source
    from autoprofiler_env.optimizers.llm.reply import extract_code
    from autoprofiler_env.problems import load_file

    deep = "x = " + "a." * 200_000 + "b\n"
    assert check_source(deep) == []  # a source that does not parse has no findings
    with pytest.raises(LLMError, match="nested too deeply"):
        extract_code(f"```python\n{deep}```")
    (tmp_path / "deep.py").write_text(deep)
    with pytest.raises(ProblemError, match="nested too deeply"):  # was a RecursionError
        load_file(tmp_path / "deep.py")
