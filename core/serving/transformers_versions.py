"""transformers by release: what Hugging Face generate's host does per decode step that depends on
the release (core.serving.hf_generate counts the torch calls of each code path).

Each rule was read in the released wheels on PyPI (``pip download transformers==X --no-deps``); a
wheel records no commit, so each rule cites the release, the file and the function. A range of
releases was read at both ends and found the same.

* **The MoE block's loop over every expert (4.45 - 4.51).** 4.45.0 ``MixtralSparseMoeBlock.forward``
  (``models/mixtral/modeling_mixtral.py``), 4.49.0's Mixtral and Qwen2-MoE blocks and 4.51.3's
  ``Qwen3MoeSparseMoeBlock``, ``MixtralSparseMoeBlock`` and ``Qwen2MoeSparseMoeBlock``: ``for expert_idx in
  range(self.num_experts)``, every expert whether a token routes to it or not.
* **4.52: Qwen3-MoE still over every expert, Mixtral and Qwen2-MoE over the experts hit.** 4.52.1
  and 4.52.4 (4.52.0 was not published): ``Qwen3MoeSparseMoeBlock.forward`` loops
  ``range(self.num_experts)``; ``MixtralSparseMoeBlock`` and ``Qwen2MoeSparseMoeBlock`` build
  ``expert_hitted = (expert_mask.sum(dim=(-1, -2)) > 0).nonzero(as_tuple=True)[0].tolist()`` and loop
  over it. Other MoE families are taken as Mixtral's block of the release.
* **The experts hit (4.53 - 4.57).** 4.53.0, 4.55.0 and 4.57.6, all three blocks: ``expert_hitted
  = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()`` (4.57: ``expert_hit``) and ``for
  expert_idx in expert_hitted``.
* **One grouped product (5.0 - 5.25).** 5.0.0, 5.18.0 and 5.25.0: the experts are one
  ``@use_experts_implementation`` module (``Qwen3MoeExperts``, ``MixtralExperts``,
  ``Qwen2MoeExperts``) whose forward is chosen by ``config._experts_implementation``;
  ``PreTrainedModel.get_correct_experts_implementation`` (``modeling_utils.py``) picks
  ``"grouped_mm"`` when none is requested, and ``integrations/moe.py``
  ``grouped_mm_experts_forward`` sorts the token-expert pairs, counts them with ``torch.histc``
  ("instead of bincount to avoid cuda graph issues") and runs two ``grouped_mm`` products: no
  Python loop over the experts and no host wait. Assumed: the PyTorch build has
  ``torch.nn.functional.grouped_mm`` or ``torch._grouped_mm`` for the card (``_can_use_grouped_mm``);
  otherwise the fallback ``grouped_mm_fallback`` loops over every expert after ``offs.tolist()``.
* **The fine-grained FP8 linear synchronises (to 5.3).** ``integrations/finegrained_fp8.py``
  ``FP8Linear.forward``: ``torch.cuda.synchronize()`` in 4.51.3, ``torch_accelerator_module.
  synchronize()`` in 4.52.4 - 4.57.6 and 5.0.0 - 5.3.0 (read in 5.0.0, 5.2.0, 5.3.0); gone in 5.4.0
  (read in 5.4.0, 5.5.0, 5.10.4, 5.14.0, 5.18.0, 5.25.0: ``fp8_linear`` through
  ``_apply_if_grad``).

The fine-grained FP8 integration is in the 4.49.0 wheel (``torch.cuda.synchronize(device=
input.device)``; 4.50.0 the same) and not in 4.48.3's: core.plan refuses FP8 weights under
Hugging Face generate before 4.49.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from core.plan import TransformersVersion
from core.serving import releases


class MoeLoop(StrEnum):
    EVERY_EXPERT = "a Python loop over every expert"
    QWEN3_EVERY_EXPERT = "Qwen3-MoE: every expert; Mixtral, Qwen2-MoE: the experts hit"
    EXPERTS_HIT = "a Python loop over the experts a token routes to"
    EXPERTS_HIT_LIST = "a Python loop over the experts a token routes to, as a list of ints (4.52)"
    GROUPED_MM = "one grouped product, no loop"


@dataclass(frozen=True)
class TransformersEra:
    name: str
    first: TransformersVersion
    last: TransformersVersion
    moe: MoeLoop
    fp8_synchronises: bool


V = TransformersVersion
ERAS: Final = (
    TransformersEra("4.45-4.51", V.V4_45, V.V4_51, MoeLoop.EVERY_EXPERT, True),
    TransformersEra("4.52", V.V4_52, V.V4_52, MoeLoop.QWEN3_EVERY_EXPERT, True),
    TransformersEra("4.53-4.57", V.V4_53, V.V4_57, MoeLoop.EXPERTS_HIT, True),
    TransformersEra("5.0-5.3", V.V5_0, V.V5_3, MoeLoop.GROUPED_MM, True),
    TransformersEra("5.4-5.25", V.V5_4, V.V5_25, MoeLoop.GROUPED_MM, False),
)
# The family whose 4.52 block still loops over every expert (ModelSpec.family is the model_type).
QWEN3_MOE_FAMILY: Final = "qwen3_moe"


def era_of(version: TransformersVersion) -> TransformersEra:
    return releases.era_of(version, ERAS)


def moe_loop(version: TransformersVersion, family: str) -> MoeLoop:
    """How the release runs an MoE block of the model family: over every expert, the experts hit,
    or one grouped product."""
    loop = era_of(version).moe
    if loop is MoeLoop.QWEN3_EVERY_EXPERT:
        return MoeLoop.EVERY_EXPERT if family == QWEN3_MOE_FAMILY else MoeLoop.EXPERTS_HIT_LIST
    return loop
