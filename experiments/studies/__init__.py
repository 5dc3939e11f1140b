"""One-off GPU studies: each measured something once (on the H200) and wrote its data under
``docs/data/``; the docs quote them. Nothing in the product imports them, and the product's
tests read only their recorded data; ``tests/studies/`` tests the studies' own code.

- ``profile_study``: every action section of 12 problems profiled alone, and ncu's sets;
- ``build_catalogue``: the section catalogue from an ncu probe and the profile study;
- ``transform_study``: every transformation of the catalogue on the recording's problems;
- ``fidelity``: replay against live, per (problem, section set);
- ``rejudge``: the recorded pairs judged again by the current judge;
- ``report``: the data report (docs/report.md) from a dataset.
"""
