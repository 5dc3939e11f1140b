"""The shipped datasets, by name, and the one function that turns a name or a path into a
dataset file (:func:`resolve_dataset`). Everything that takes a dataset (the environment's
``dataset`` kwarg, every command's ``--dataset``, ``autoprofiler dataset info``) takes either.

=============== ====================================== =========================================
name            file (``autoprofiler_env/dataset/data``) what
=============== ====================================== =========================================
``suite``       ``h200-reference.json.gz``             the project's 96 problems (the default)
``kernelbench`` ``h200-kernelbench.json.gz``           KernelBench levels 1-3, recorded from a
                                                       checkout (docs/kernelbench.md)
=============== ====================================== =========================================

>>> resolve_dataset("suite")            # the shipped file's path
>>> resolve_dataset("runs/my.json.gz")  # a path is a path
>>> resolve_dataset(None)               # the default: the suite's
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from autoprofiler_env.errors import DatasetNotShippedError, UnknownDatasetError

DATA_DIR = Path(__file__).parent / "data"


@dataclass(frozen=True)
class ShippedDataset:
    """A dataset the package ships, by name: its file in :data:`DATA_DIR`, what it holds, and
    how it is made (said by :class:`DatasetNotShippedError` while the file is missing)."""

    name: str
    file: str
    about: str
    how: str

    @property
    def path(self) -> Path:
        return DATA_DIR / self.file


SHIPPED: dict[str, ShippedDataset] = {d.name: d for d in (
    ShippedDataset("suite", "h200-reference.json.gz",
                   "the project's suite of 96 problems, recorded on an H200 (docs/dataset.md)",
                   "restore it from git (docs/dataset.md says how it was recorded)"),
    ShippedDataset("kernelbench", "h200-kernelbench.json.gz",
                   "KernelBench levels 1-3, recorded on an H200 from a KernelBench checkout "
                   "(docs/kernelbench.md)",
                   "record it on a GPU (`autoprofiler record --source KERNELBENCH_DIR --out "
                   "REC`, experiments/device/record_kernelbench_h200.sh), then build it "
                   "(`autoprofiler dataset build --recording REC --source KERNELBENCH_DIR "
                   "--complete --out autoprofiler_env/dataset/data/h200-kernelbench.json.gz`); "
                   "docs/kernelbench.md"),
)}
DEFAULT_NAME = "suite"
"""The dataset used where none is named. The suite's stays the default until the KernelBench
one is complete (docs/kernelbench.md)."""


def resolve_dataset(name_or_path: str | Path | None = None) -> Path:
    """The dataset file that ``name_or_path`` names: a shipped dataset's name (a key of
    :data:`SHIPPED`), else a path; None is :data:`DEFAULT_NAME`. A path is returned as given
    (loading it says whether it exists); a name wins over a file of the same name in the
    working directory.

    Raises:
        DatasetNotShippedError: a shipped name whose file this install does not hold yet (the
            message says how to record and build it).
        UnknownDatasetError: a string that is neither a shipped name nor an existing file,
            and not path-like (no folder and no file suffix): a misspelt name, most likely.
    """
    if name_or_path is None:
        name_or_path = DEFAULT_NAME
    if isinstance(name_or_path, str) and name_or_path in SHIPPED:
        shipped = SHIPPED[name_or_path]
        if not shipped.path.is_file():
            raise DatasetNotShippedError(
                f"the dataset {shipped.name!r} ({shipped.about}) is not shipped in this "
                f"install yet (no {shipped.file}): {shipped.how}")
        return shipped.path
    path = Path(name_or_path)
    if not isinstance(name_or_path, str) or path.exists() or len(path.parts) != 1:
        return path
    named = [d for d in SHIPPED.values() if path.name in (d.file, d.file.split(".")[0])]
    if named:  # a shipped file's own name, not in the working directory: its name
        raise UnknownDatasetError(
            f"no dataset file {str(name_or_path)!r} here: the shipped "
            f"{named[0].file} is named {named[0].name!r} (dataset={named[0].name!r}, "
            f"--dataset {named[0].name})")
    if not path.suffix:
        raise UnknownDatasetError(
            f"no dataset named {str(name_or_path)!r}: the shipped ones are "
            f"{', '.join(SHIPPED)} (`autoprofiler dataset info --dataset NAME`); or give a "
            "dataset file's path")
    return path
