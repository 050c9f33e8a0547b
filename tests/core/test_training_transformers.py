"""The transformers release of a training run, as far as its causal-LM loss keeps the logits
(``training_transformers``, issue 22).

Sources, each the released wheel on PyPI (``pip download transformers==X --no-deps``):

- 4.31.0 - 4.45.0 ``models/llama/modeling_llama.py`` ``LlamaForCausalLM.forward``: ``logits =
  logits.float()`` (4.45.0: ``self.lm_head(...).float()``), then ``shift_logits = logits[..., :-1,
  :].contiguous()`` before ``CrossEntropyLoss()``; ``CausalLMOutputWithPast(logits=logits)`` returns the
  float32 tensor;
- 4.46.0 - 4.48.0 ``loss/loss_utils.py`` ``ForCausalLMLoss``: ``logits = logits.float()`` on a local, then
  the same ``shift_logits = logits[..., :-1, :].contiguous()``; the model returns the lm_head's own logits;
- 4.49.0, 4.50.0, 5.0.0 ``ForCausalLMLoss``: ``labels = nn.functional.pad(labels, (0, 1),
  value=ignore_index)``, ``logits = logits.view(-1, vocab_size)``: no shifted copy.

Llama-2-7B: vocabulary 32,000 (meta-llama/Llama-2-7b-hf config.json). llama-recipes' PR #41 run (the
held-out record ``llamarecipes-pr41-7b-lora-4xa100-40-final-active``): batch 4 × 2,048 tokens, transformers
4.31.0.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.catalogue import find_model
from core.cli.app import main as cli_main
from core.estimate import estimate
from core.files import planfile
from core.files.launch import SERVING_TARGETS, Target, export
from core.files.planfile import PlanFileError
from core.inputs import input_at
from core.plan import Method, Plan, Preset, TransformersLoss, Workload
from core.training.activations import loss_memory
from tests.scripts import load_script

FOLDER = Path(__file__).resolve().parents[2] / "benchmarks" / "realgpu"

# Batch 4 × 2,048 tokens × 32,000: N·V = 262,144,000.
NV = 4 * 2_048 * 32_000
OLD, MIDDLE, NEW = TransformersLoss.V4_31_TO_4_45, TransformersLoss.V4_46_TO_4_48, TransformersLoss.V5_ON


def _plan(release: TransformersLoss = NEW, **changes: object) -> Plan:
    return Plan(
        model=find_model("llama-2-7b").spec,
        method=Method.LORA,
        workload=Workload(micro_batch=4, seq_len=2_048),
        checkpointing=True,
        training_transformers=release,
    ).with_changes(**changes)


def test_the_newest_release_is_the_default_and_keeps_what_the_loss_kept_before() -> None:
    assert input_at("training_transformers").default is NEW
    assert Plan(model=find_model("llama-2-7b").spec).training_transformers is NEW
    # 16-bit logits, their float32 upcast, the float32 log-softmax: no shifted copy.
    assert [t.bytes for t in loss_memory(_plan(NEW)).forward] == [NV * 2, NV * 4, NV * 4]


def test_4_46_to_4_48_copy_the_upcast_logits_shifted() -> None:
    forward = loss_memory(_plan(MIDDLE)).forward
    assert [t.bytes for t in forward] == [NV * 2, NV * 4, NV * 4, NV * 4]
    assert "shifted" in forward[2].label


def test_4_31_to_4_45_rebind_the_logits_to_float32_and_copy_them_shifted() -> None:
    forward = loss_memory(_plan(OLD)).forward
    # float32 logits (the 16-bit ones freed), the shifted float32 copy, the float32 log-softmax:
    # one float32 N·V more and one 16-bit N·V less than the newest release.
    assert [t.bytes for t in forward] == [NV * 4, NV * 4, NV * 4]
    assert sum(t.bytes for t in forward) - sum(t.bytes for t in loss_memory(_plan(NEW)).forward) == NV * 2


def test_a_float32_model_gains_the_shifted_copy_only() -> None:
    fp32 = {"preset": Preset.FP32}
    new, old = loss_memory(_plan(NEW, **fp32)).forward, loss_memory(_plan(OLD, **fp32)).forward
    assert [t.bytes for t in new] == [NV * 4, NV * 4]
    assert [t.bytes for t in old] == [NV * 4, NV * 4, NV * 4]


def test_the_backward_start_is_the_same_in_every_release() -> None:
    backward = {release: loss_memory(_plan(release)).backward for release in TransformersLoss}
    assert all([t.bytes for t in b] == [NV * 4] * 3 for b in backward.values())


def test_the_release_moves_the_forward_peak_by_its_copies() -> None:
    # Under checkpointing the loss sits on top of the forward's smaller live set: llama-recipes'
    # peak is the forward's end (the held-out record's phase "forward + loss").
    new, old = (next(p for p in estimate(_plan(r)).worst.phases if str(p.kind) == "forward") for r in (NEW, OLD))
    assert old.allocated_bytes - new.allocated_bytes == NV * 2


@pytest.mark.parametrize(
    "changes", [{"fused_loss": True}, {"chunked_loss": True}, {"compiled_loss": True}, {"flash_loss": True}]
)
def test_the_release_does_not_matter_under_other_loss_code(changes: dict[str, object]) -> None:
    assert loss_memory(_plan(OLD, **changes)) == loss_memory(_plan(NEW, **changes))
    assert not input_at("training_transformers").matters(_plan(**changes))
    assert input_at("training_transformers").matters(_plan())


def test_a_loops_own_16_bit_loss_is_not_transformers_loss() -> None:
    half = {"preset": Preset.PURE_BF16, "loss_16bit": True}
    assert loss_memory(_plan(OLD, **half)) == loss_memory(_plan(NEW, **half))
    assert not input_at("training_transformers").matters(_plan(**half))


def test_the_command_line_sets_it(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["estimate", "--model", "llama-2-7b", "--method", "lora", "--micro-batch", "4", "--seq", "2048"]
    # A loop that keeps the output holds float32 logits up to 4.45, the 16-bit ones from 4.46.
    args.append("--loop-keeps-output")
    peaks = {}
    for release in ("5.0+", "4.31-4.45"):
        assert cli_main([*args, "--training-transformers", release, "--json"]) == 0
        peaks[release] = json.loads(capsys.readouterr().out)["peak_bytes"]
    assert peaks["4.31-4.45"] - peaks["5.0+"] == NV * 2


def test_a_plan_file_keeps_it_and_an_older_file_reads_as_the_newest() -> None:
    plan = _plan(OLD)
    document = planfile.plan_to_dict(plan)
    assert planfile.loads(json.dumps(document)) == plan
    del document["plan"]["training_transformers"]
    assert planfile.loads(json.dumps(document)) == _plan(NEW)


def test_a_plan_file_refuses_a_release_line_it_does_not_know() -> None:
    document = planfile.plan_to_dict(_plan())
    document["plan"]["training_transformers"] = "4.30"
    with pytest.raises(PlanFileError, match="plan.training_transformers"):
        planfile.loads(json.dumps(document))


def test_the_mapping_reads_each_records_release() -> None:
    # The records' versions.transformers (benchmarks/realgpu/memory_figures.json): llama-recipes ">=4.31.0",
    # ms-swift ">=4.33,<4.37", Liger's example 4.43.3, IBM's fms-acceleration 4.48.1, PEFT's method
    # comparison 5.13.1; Answer.AI's names none (its README's pin and date: a 4.37 release).
    mapping = load_script(FOLDER / "mapping.py", "realgpu_mapping_training_transformers")
    figures = json.loads((FOLDER / "memory_figures.json").read_text())["figures"]
    releases: dict[str, set[TransformersLoss]] = {}
    for figure in figures:
        if (mapped := mapping.map_figure(figure)).plan is not None:
            releases.setdefault(figure["source_id"], set()).add(mapped.plan.training_transformers)
    assert releases["llama-recipes-fsdp-2023"] == {OLD}
    assert releases["ms-swift-benchmark-2024-01"] == {OLD}
    assert releases["liger-hf-example-2024-08"] == {OLD}
    assert releases["answerai-fsdp-qlora-bench-2024-03"] == {OLD}
    assert releases["ibm-fms-acceleration-a100-2025-02"] == {MIDDLE}
    assert releases["peft-method-comparison-metamathqa"] == {NEW}
    assert releases["torchtune-readme-flags-2024-11"] == {NEW}


def test_every_training_export_lists_an_older_release_it_cannot_pin() -> None:
    """The release is the package installed where the run starts, not a trainer key: a plan for an
    older line is listed by every training target; the newest (the default) is not."""
    training = [t for t in Target if t not in SERVING_TARGETS]
    assert all(export(_plan(OLD), t).cannot("method.training_transformers") for t in training)
    assert not any(export(_plan(NEW), t).cannot("method.training_transformers") for t in training)
