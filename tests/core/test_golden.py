"""Every figure the estimator, the diagnosis and the command line give for the golden plans
is what ``tests/data/golden/digests.json`` recorded (see :mod:`tests.golden`).

A failure names the plans whose figures moved. When a change is meant to move them, rewrite
the digests with ``python -m tests.golden --update`` and say in the commit which figures
changed and why; to see what moved, ``python -m tests.golden --dump DIR`` on both commits and
diff the two folders.
"""

from __future__ import annotations

import json

from tests import golden


def test_every_golden_figure_is_unchanged() -> None:
    recorded = json.loads(golden.DIGESTS.read_text())
    now = golden.digests(golden.golden_plans())
    now.update({cli_id: {"output": golden.digest(text)} for cli_id, text in golden.cli_outputs()})
    assert now.keys() == recorded.keys(), "the golden plans changed: regenerate with --update"
    moved = {plan_id: sorted(k for k in now[plan_id] if now[plan_id][k] != recorded[plan_id].get(k)) for plan_id in now}
    moved = {
        plan_id: keys for plan_id, keys in moved.items() if keys or now[plan_id].keys() != recorded[plan_id].keys()
    }
    assert not moved, f"{len(moved)} plans' figures moved, e.g. {dict(list(moved.items())[:8])}"


def test_the_projection_sees_a_changed_figure() -> None:
    """The digest is over the figures themselves: one float off by one ulp changes it."""
    plan_id, plan = golden.golden_plans()[0]
    figures = golden.figures(plan_id, plan)
    key = "estimate.peak_bytes"
    changed = dict(figures, **{key: repr(float(figures[key]) * (1 + 2**-52))})
    assert golden.digest(changed) != golden.digest(figures)
