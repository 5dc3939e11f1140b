"""autoprofiler-env: a Gymnasium environment and toolkit for learning what to profile."""

__version__ = "0.1.0"
