"""The replay backend's memo: an outcome per (problem, section set), computed once per
signature (the sections that bear on the choice, and the first in the dataset's order)."""

import numpy as np

from autoprofiler_env.envs.backends import ReplayBackend


def test_a_sets_signature_gives_its_own_outcome(study_dataset):
    """On random sets of every size, the outcome through the signature is the outcome of the
    set itself (merged whole, the optimizer run on it)."""
    backend = ReplayBackend(str(study_dataset))
    rng = np.random.default_rng(0)
    sections, checked, shared = backend.sections, 0, 0
    for uri in backend.problems(None):
        bearing = backend._bearing(uri)
        assert bearing and bearing <= set(sections)
        for _ in range(40):
            chosen = frozenset(s for s in sections if rng.random() < rng.random())
            direct = backend._compute_finish(uri, chosen)
            assert backend.finish(uri, tuple(chosen)) == direct, (uri, sorted(chosen))
            checked += 1
            shared += chosen != ((chosen & bearing) | set(backend.dataset.canonical(chosen)[:1]))
    assert checked == 40 * len(backend.problems(None)) and shared > checked // 4
