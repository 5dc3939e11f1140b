"""The recorded dataset and its replay: RL training, tree learning and the benchmark run on a
CPU from it. Schema and file format: :mod:`.format`; answering queries: :mod:`.replay`;
building from GPU recordings: :mod:`.build`."""

from autoprofiler_env.dataset.format import SCHEMA, DatasetFile, Outcome, ProblemRecord
from autoprofiler_env.dataset.replay import Dataset

__all__ = ["SCHEMA", "Dataset", "DatasetFile", "Outcome", "ProblemRecord"]
