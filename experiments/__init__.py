"""The command line (``autoprofiler``), experiment scripts and GPU device scripts."""
