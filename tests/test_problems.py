"""The problem suite and the loaders."""

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from autoprofiler_env.errors import ProblemError, ProblemNotFoundError
from autoprofiler_env.features import OP_CATEGORIES
from autoprofiler_env.harness import Evaluator, HarnessConfig
from autoprofiler_env.problems import (
    SUITE_URI_PREFIX,
    import_problem,
    load_directory,
    load_file,
    load_problem,
    load_suite,
    scan_directory,
)
from autoprofiler_env.problems.loaders import read_manifest
from autoprofiler_env.problems.manifest import build_manifest
from tests.conftest import DATA

SUITE = load_suite()


def test_suite_has_at_least_80_problems_in_three_levels():
    assert len(SUITE) >= 80
    levels = Counter(p.level for p in SUITE)
    assert set(levels) == {1, 2, 3}
    assert min(levels.values()) >= 15


def test_uris_are_unique_and_stable():
    uris = [p.uri for p in SUITE]
    assert len(set(uris)) == len(uris)
    for p in SUITE:
        assert p.uri == f"{SUITE_URI_PREFIX}level{p.level}/{p.name}"
        assert load_problem(p.uri) == p
        assert load_problem(p.name) == p
        assert load_file(p.path) == p


def test_every_problem_has_a_split_and_known_tags():
    for p in SUITE:
        assert p.split in ("train", "val", "test"), p.uri
        assert p.tags and set(p.tags) <= set(OP_CATEGORIES), p.uri


def test_split_is_stratified_with_at_least_20_test_problems():
    splits = Counter(p.split for p in SUITE)
    assert splits["test"] >= 20
    for level in (1, 2, 3):
        in_level = Counter(p.split for p in SUITE if p.level == level)
        total = sum(in_level.values())
        assert in_level["test"] >= 0.2 * total - 1, (level, in_level)
        assert in_level["train"] >= 0.5 * total, (level, in_level)
    assert {p.uri for p in load_suite(split="test")} == {p.uri for p in SUITE
                                                         if p.split == "test"}


@pytest.mark.slow
def test_manifest_is_up_to_date():
    """The committed tags are what the static analysis computes now, and no split moved."""
    assert build_manifest() == read_manifest(), (
        "the suite's manifest is stale: run `python -m autoprofiler_env.problems.manifest` "
        "(and check that no split moved)")


@pytest.mark.slow
def test_every_problem_runs_at_smoke_size_and_is_well_posed():
    """Each reference runs on a CPU at its smoke size and its output is not matched by a
    constant (the harness raises ProblemError otherwise)."""
    config = HarnessConfig(device="cpu", size="smoke", timing_budget_ms=1, min_trials=1,
                           max_trials=1, warmup_ms=0)
    with Evaluator(config, prepare_timeout_s=120) as ev:
        for p in SUITE:
            assert ev.reference(p).timing.median_ms > 0


def test_smoke_sizes_are_small():
    for p in SUITE:
        module = import_problem(p.path, "smoke")
        n = sum(x.numel() for x in module.get_inputs() if hasattr(x, "numel"))
        assert n <= 1_000_000, f"{p.name}: {n} input elements at smoke size"


def test_kernelbench_directory_loads_in_natural_order(tmp_path):
    relu = (DATA / "problems" / "relu_small.py").read_text()
    level = tmp_path / "level1"
    level.mkdir()
    for name in ("19_ReLU.py", "2_ReLU_again.py", "100_Last.py"):
        (level / name).write_text(relu)
    shutil.copy(DATA / "problems" / "lacks_get_inputs.py", level / "7_Broken.py")
    (level / "__init__.py").write_text("")
    problems, errors = scan_directory(level)
    assert [p.name for p in problems] == ["2_ReLU_again", "19_ReLU", "100_Last"]
    assert all(p.level == 1 and p.uri.startswith("problem://local/level1/") for p in problems)
    assert len(errors) == 1 and "7_Broken.py" in str(errors[0])
    assert "get_inputs" in errors[0].cause
    assert load_directory(level) == problems
    with pytest.raises(ProblemError):
        load_directory(level, strict=True)


@pytest.mark.parametrize("name, cause", [
    ("lacks_get_inputs", "does not define get_inputs"),
    ("import_fails", "import failed"),
])
def test_broken_problem_files_name_the_file_and_cause(name, cause):
    path = DATA / "problems" / f"{name}.py"
    with pytest.raises(ProblemError) as info:
        import_problem(path)
    assert cause in str(info.value) and f"{name}.py" in str(info.value)


def test_a_missing_module_names_the_extra_that_installs_it(monkeypatch, tmp_path):
    """KernelBench's Mamba2 files import einops: the kernelbench extra of setup.cfg."""
    import autoprofiler_env.problems.problem as problem_module

    monkeypatch.setitem(problem_module._EXTRAS, "no_such_module_b7", "kernelbench")
    path, good = tmp_path / "48_Mamba.py", (DATA / "problems" / "relu_small.py").read_text()
    path.write_text("from no_such_module_b7 import rearrange\n" + good)
    with pytest.raises(ProblemError, match="No module named 'no_such_module_b7'") as e:
        import_problem(path)
    assert e.value.hint == ("pip install 'einops>=0.6' (in a clone of the repository: pip "
                            "install -e '.[kernelbench]') installs it")
    path.write_text("import no_such_module_c9\n" + good)
    with pytest.raises(ProblemError, match="No module named 'no_such_module_c9'") as e:
        import_problem(path)
    assert "provides it" in e.value.hint
    assert "einops" in (Path(__file__).parents[1] / "setup.cfg").read_text().split(
        "kernelbench =")[1].split("\n#")[0]  # the extra holds it


def test_syntax_error_in_a_problem(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("class Model(:\n")
    with pytest.raises(ProblemError, match="bad.py: syntax error at line 1"):
        load_file(bad)


def test_unknown_references_raise_not_found():
    with pytest.raises(ProblemNotFoundError):
        load_problem("problem://autoprofiler/v1/level1/no_such_problem")
    with pytest.raises(ProblemNotFoundError):
        load_problem("no_such_problem_anywhere")
    with pytest.raises(ProblemNotFoundError):
        load_file("missing/file.py")


def test_smoke_size_requires_smoke_sizes():
    with pytest.raises(ProblemError, match="SMOKE_SIZES"):
        import_problem(DATA / "problems" / "forward_raises.py", "smoke")


def test_smoke_sizes_naming_a_missing_constant_fail_at_every_size(tmp_path):
    """Found when the file is first listed (``problems --source`` imports it at full size),
    not only when a smoke run asks for it."""
    good = (DATA / "problems" / "relu_small.py").read_text()
    path = tmp_path / "gelu.py"
    path.write_text(good + "\nSMOKE_SIZES = {'dimm': 8}\n")
    with pytest.raises(ProblemError, match="SMOKE_SIZES names 'dimm', which the module lacks"):
        import_problem(path)
    path.write_text(good + "\nSMOKE_SIZES = [8]\n")
    with pytest.raises(ProblemError, match="SMOKE_SIZES is a list"):
        import_problem(path)


def test_corrupt_manifest_is_a_clear_error(monkeypatch, tmp_path):
    import autoprofiler_env.problems.loaders as loaders

    bad = tmp_path / "manifest.json"
    bad.write_text("{not json")
    monkeypatch.setattr(loaders, "MANIFEST_PATH", bad)
    with pytest.raises(ProblemError, match="corrupt suite manifest"):
        load_suite()
    json.loads((loaders.SUITE_DIR / "manifest.json").read_text())  # the real one is intact


def test_a_suite_problem_missing_from_the_manifest_is_said(monkeypatch):
    """A file added to the suite without regenerating the manifest has no split, so a split's
    listing leaves it out: the loader says so and names the command that adds it."""
    import autoprofiler_env.problems.loaders as loaders
    from autoprofiler_env.errors import AutoProfilerWarning

    manifest = loaders.read_manifest()
    key = sorted(manifest["problems"])[0]
    del manifest["problems"][key]
    monkeypatch.setattr(loaders, "read_manifest", lambda: manifest)
    with pytest.warns(AutoProfilerWarning, match=f"missing from the manifest.*{key}.*"
                                                 r"python -m autoprofiler_env\.problems\.manifest"):
        load_suite()
