"""Builds the stored section catalogue from what a GPU machine measured.

    python -m experiments.studies.build_catalogue PROBE_DIR [STUDY_DIR]

PROBE_DIR is the unpacked output of experiments/device/probe_ncu.sh (ncu's lists, its
.section files, passes per section); STUDY_DIR the profiler study's runs
(docs/data/profile_study_h200), for the metrics each section returns.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from autoprofiler_env.profiler.catalogue import DATA_DIR, build


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    data = build(Path(argv[0]), Path(argv[1]) if len(argv) == 2 else None)
    out = DATA_DIR / f"sections-ncu-{data['ncu_version']}.json"
    out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"{len(data['sections'])} sections, sets {', '.join(data['sets'])}: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
