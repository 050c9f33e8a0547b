"""Launch configs out: the plan handed over as the config or command of the tool that runs it.

:func:`export` writes one target's text and lists the plan fields the target cannot express,
each with why; nothing is written to disk here (the caller saves the text through the one
atomic writer). One module per target, each citing the tool version whose keys it writes:

======================  ==========================================  ==================================
target                  module                                      read back by
======================  ==========================================  ==================================
trl                     :mod:`~core.files.launch.hf_trainer`         :mod:`core.files.runconfig.hf`
axolotl                 :mod:`~core.files.launch.axolotl`            :mod:`core.files.runconfig.axolotl`
llamafactory            :mod:`~core.files.launch.llamafactory`       :mod:`core.files.runconfig.llamafactory`
torchtune               :mod:`~core.files.launch.torchtune`          :mod:`core.files.runconfig.torchtune`
torchtitan              :mod:`~core.files.launch.torchtitan`         :mod:`core.files.runconfig.torchtitan`
megatron-bridge         :mod:`~core.files.launch.megatron`           :mod:`core.files.runconfig.megatron`
deepspeed               :mod:`~core.files.launch.deepspeed`          its ``read_deepspeed`` (and the
                                                                     trainers' ``deepspeed`` key)
accelerate              :mod:`~core.files.launch.accelerate`         its ``read_accelerate_config``
accelerate-launch       :mod:`~core.files.launch.accelerate`         its ``read_accelerate_launch``
torchrun                :mod:`~core.files.launch.torchrun`           its ``read_torchrun``
vllm                    :mod:`~core.files.launch.vllm`               its ``read_vllm``
llama-server            :mod:`~core.files.launch.llamacpp`           its ``read_llama_server``
sglang                  :mod:`~core.files.launch.sglang`             its ``read_sglang``
ollama                  :mod:`~core.files.launch.ollama`             its ``read_ollama``
======================  ==========================================  ==================================
"""

from __future__ import annotations

from dataclasses import replace

from core.files.launch.accelerate import export_accelerate_config, export_accelerate_launch
from core.files.launch.axolotl import export_axolotl
from core.files.launch.common import (
    SERVING_TARGETS,
    TARGET_LABELS,
    TARGET_SUFFIXES,
    Export,
    Target,
    Unexpressed,
    serving_target,
)
from core.files.launch.deepspeed import export_deepspeed
from core.files.launch.hf_trainer import export_trl
from core.files.launch.llamacpp import export_llama_server
from core.files.launch.llamafactory import export_llamafactory
from core.files.launch.megatron import export_megatron_bridge
from core.files.launch.ollama import export_ollama
from core.files.launch.sglang import export_sglang
from core.files.launch.torchrun import export_torchrun
from core.files.launch.torchtitan import export_torchtitan
from core.files.launch.torchtune import export_torchtune
from core.files.launch.vllm import export_vllm
from core.plan import Plan, training_refusal

__all__ = [
    "SERVING_TARGETS",
    "TARGET_LABELS",
    "TARGET_SUFFIXES",
    "Export",
    "Target",
    "Unexpressed",
    "export",
    "serving_target",
]

DEFAULT_COMMAND = ("train.py",)


def export(
    plan: Plan, target: Target | str, *, model_ref: str | None = None, command: tuple[str, ...] = DEFAULT_COMMAND
) -> Export:
    """``plan`` as ``target``'s text, with the fields the target cannot express.

    ``model_ref`` names the model where the plan's is not a catalogue model (a Hub id from the
    cache, a local folder); ``command`` is what ``torchrun`` / ``accelerate launch`` start (the
    script and its arguments). Raises ValueError for a target name that is not one of
    :class:`Target`; never for a plan. A training target for a model whose training step this
    planner does not estimate (core.plan.training_refusal) is still written, and says so under "model".
    """
    kind = Target(target)
    result = _export(plan, kind, model_ref, command)
    refusal = training_refusal(plan)
    if kind in SERVING_TARGETS or refusal is None:
        return result
    note = f"the planner does not estimate this model's training step, so nothing here was judged to fit: {refusal}"
    said = " ".join([*(u.why for u in result.unexpressed if u.field == "model"), note])
    kept = tuple(u for u in result.unexpressed if u.field != "model")
    return replace(result, unexpressed=(Unexpressed("model", said), *kept))


def _export(plan: Plan, kind: Target, model_ref: str | None, command: tuple[str, ...]) -> Export:
    if kind is Target.TORCHRUN:
        return export_torchrun(plan, command)
    if kind is Target.ACCELERATE_LAUNCH:
        return export_accelerate_launch(plan, command)
    if kind is Target.ACCELERATE:
        return export_accelerate_config(plan)
    if kind is Target.DEEPSPEED:
        return export_deepspeed(plan)
    writers = {
        Target.TRL: export_trl,
        Target.AXOLOTL: export_axolotl,
        Target.LLAMA_FACTORY: export_llamafactory,
        Target.TORCHTUNE: export_torchtune,
        Target.TORCHTITAN: export_torchtitan,
        Target.MEGATRON_BRIDGE: export_megatron_bridge,
        Target.VLLM: export_vllm,
        Target.LLAMA_SERVER: export_llama_server,
        Target.SGLANG: export_sglang,
        Target.OLLAMA: export_ollama,
    }
    return writers[kind](plan, model_ref)
