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
    ``<<`` may still be given again: that is how a merge is overridden."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    again = key in seen
                except TypeError:  # an unhashable key: PyYAML's own error names it
                    continue
                if again:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping", node.start_mark,
                        f"found the key {key!r} twice in one mapping: give it once",
                        key_node.start_mark)
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


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
