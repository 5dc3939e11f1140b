"""Kernel problems in KernelBench format: the project's suite and loaders for any directory."""

from autoprofiler_env.problems.loaders import (
    LEVELS,
    SPLITS,
    SUITE_URI_PREFIX,
    load_directory,
    load_file,
    load_problem,
    load_suite,
    scan_directory,
)
from autoprofiler_env.problems.problem import SIZES, Problem, Size, import_problem

__all__ = [
    "LEVELS", "SIZES", "SPLITS", "SUITE_URI_PREFIX", "Problem", "Size", "import_problem",
    "load_directory", "load_file", "load_problem", "load_suite", "scan_directory",
]
