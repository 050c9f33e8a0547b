"""The window's answer to "can this engine serve this model" is core.plan.serving_refusal's, word for word: an edit
of the engine is refused with the home's message, or taken (tests/core/test_one_answer_serving.py's table)."""

from __future__ import annotations

from typing import Any

import pytest

from core.plan import default_plan_on
from gui.controller import PlanController
from tests.core.test_one_answer_serving import CELLS, ENGINES, _cell


@pytest.mark.parametrize(("kind", "engine"), CELLS)
def test_an_engine_edit_is_refused_with_the_homes_words(qtbot: Any, kind: str, engine: str) -> None:
    model, inference, refusal = _cell(kind, engine)
    controller = PlanController(default_plan_on(model.spec, model.id))
    rejected: list[tuple[str, str]] = []
    controller.editRejected.connect(lambda key, message: rejected.append((key, message)))
    changes = ENGINES[engine][0]
    controller.update("inference.engine", lambda p: p.with_inference(**changes))
    if refusal is None:
        assert rejected == [] and controller.plan.inference == inference
    else:
        assert rejected == [("inference.engine", str(refusal))]
        assert controller.plan == default_plan_on(model.spec, model.id)  # the last valid plan stays
