"""The recorded dataset and its replay: RL training, tree learning and the benchmark run on a
CPU from it. Schema and file format: :mod:`.format`; answering queries: :mod:`.replay`;
building from GPU recordings: :mod:`.build`; the shipped datasets by name: :mod:`.names`;
train / val / test splits and recording orders: :mod:`.splits`."""

from autoprofiler_env.dataset.format import SCHEMA, DatasetFile, Outcome, ProblemRecord
from autoprofiler_env.dataset.names import SHIPPED, resolve_dataset
from autoprofiler_env.dataset.replay import Dataset

__all__ = ["SCHEMA", "SHIPPED", "Dataset", "DatasetFile", "Outcome", "ProblemRecord",
           "resolve_dataset"]
