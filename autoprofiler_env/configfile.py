"""Reading a YAML config file (a training config, an experiment config): one reader, one
error (:class:`~autoprofiler_env.errors.ConfigError`) naming the file and the line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from autoprofiler_env.errors import ConfigError


class _UniqueKeys(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a mapping that gives one key twice (PyYAML keeps the
    last silently: a second ``agents:`` would drop the first's agents). Keys merged in with
    ``<<`` may still be given again: that is how a merge is overridden. The whole document is
    checked before anything is built: building a mapping merges into it in place, after
    which its overrides would look like repeats."""

    def construct_document(self, node):
        self._check_keys(node, set())
        return super().construct_document(node)

    def _check_keys(self, node, seen: set) -> None:
        if id(node) in seen:  # an alias: checked where its anchor is
            return
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            keys = set()
            for key_node, value_node in node.value:
                if key_node.tag != "tag:yaml.org,2002:merge" and isinstance(
                        key_node, yaml.ScalarNode):
                    key = self.construct_object(key_node)
                    if key in keys:
                        raise yaml.constructor.ConstructorError(
                            "while constructing a mapping", node.start_mark,
                            f"found the key {key!r} twice in one mapping: give it once",
                            key_node.start_mark)
                    keys.add(key)
                self._check_keys(key_node, seen)
                self._check_keys(value_node, seen)
        elif isinstance(node, yaml.SequenceNode):
            for item in node.value:
                self._check_keys(item, seen)


def read_yaml(path: str | Path, what: str = "config") -> Any:
    """The content of the YAML file ``path`` (``what`` it is, for the messages).

    Raises:
        ConfigError: the file cannot be read, is not YAML (the line is named), gives a key
            twice in one mapping, or holds a number Python cannot read.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        reason = getattr(e, "strerror", None) or e
        raise ConfigError(f"{path}: cannot read the {what} ({reason})") from None
    try:
        return yaml.load(text, Loader=_UniqueKeys)  # noqa: S506 (a safe loader)
    except yaml.YAMLError as e:
        where = getattr(e, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        raise ConfigError(f"{path}: not valid YAML{line}: "
                          f"{getattr(e, 'problem', None) or e}") from None
    except ValueError as e:  # a number too long for Python's int (over 4,300 digits)
        raise ConfigError(f"{path}: not a config Python can read ({e})") from None
