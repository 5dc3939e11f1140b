"""The one YAML reader of the configs (autoprofiler_env.configfile.read_yaml)."""

import pytest

from autoprofiler_env.configfile import read_yaml
from autoprofiler_env.errors import ConfigError


def test_a_key_given_twice_is_refused_at_any_depth_with_its_line(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("a: 1\nb:\n  c: 2\n  d: 3\n  c: 4\n")
    with pytest.raises(ConfigError, match=r"c.yaml: not valid YAML \(line 5\): found the key "
                                          r"'c' twice in one mapping: give it once"):
        read_yaml(path)
    path.write_text("a: 1\nb: [{c: 2}, {c: 3}]\n")  # one key per mapping: no repeat
    assert read_yaml(path) == {"a": 1, "b": [{"c": 2}, {"c": 3}]}


def test_a_merged_key_may_be_given_again_as_yaml_overrides_a_merge(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("base: &b {lr: 0.1, n: 2}\nrun:\n  <<: *b\n  lr: 0.5\n")
    assert read_yaml(path) == {"base": {"lr": 0.1, "n": 2}, "run": {"lr": 0.5, "n": 2}}
    # an anchored mapping that overrides its own merge, merged again where PyYAML builds it
    # first: building merges into it in place (reviewed: its override was taken for a repeat)
    path.write_text("base: &base {lr: 0.1}\na: {b: {c: &x {<<: *base, lr: 0.2}}}\n"
                    "d: {<<: *x}\n")
    assert read_yaml(path) == {"base": {"lr": 0.1}, "a": {"b": {"c": {"lr": 0.2}}},
                               "d": {"lr": 0.2}}


def test_an_unreadable_file_says_what_it_is(tmp_path):
    with pytest.raises(ConfigError, match=r"nope.yaml: cannot read the experiment config"):
        read_yaml(tmp_path / "nope.yaml", "experiment config")
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"name: caf\xe9\n")
    with pytest.raises(ConfigError, match=r"latin1.yaml: cannot read the config"):
        read_yaml(path)


def test_the_training_and_experiment_errors_are_one_class():
    from agents.rl.config import ConfigError as training
    from experiments.experiment import ConfigError as experiment

    assert training is experiment is ConfigError
