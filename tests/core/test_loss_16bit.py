"""A loop's own F.cross_entropy on a 16-bit model's logits (``loss_16bit``, issue 22).

Sources: rasbt/LLMs-from-scratch 908dd2f ch05/10_llm-training-speed (``calc_loss_batch``:
``torch.nn.functional.cross_entropy(logits.flatten(0, 1), target_batch.flatten())`` on a model cast with
``.to(torch.bfloat16)``, no autocast); PyTorch's aten cross-entropy is ``log_softmax`` then ``nll_loss``,
``_log_softmax`` saving its result (tools/autograd/derivatives.yaml) and each kernel writing the input's
dtype; under autocast ``log_softmax`` and ``nll_loss`` are on CUDA autocast's float32 list (PyTorch's
"Automatic Mixed Precision" docs, "CUDA Ops that can autocast to float32"), so there the loss upcasts as
transformers' ForCausalLMLoss does (``logits.float()``). GPT-2 small: vocabulary 50,257, width 768
(openai-community/gpt2 config.json).
"""

from __future__ import annotations

import json

import pytest

from core.catalogue import find_model
from core.cli.app import main as cli_main
from core.dtypes import Autocast
from core.estimate import estimate
from core.files import planfile
from core.files.planfile import PlanFileError
from core.inputs import input_at, loss_16bit_matters
from core.plan import Method, Plan, Preset, Workload
from core.training.activations import loss_memory

# Batch 8 × 1,024 tokens × 50,257: the N·V of LLMs-from-scratch's GPT-2 runs before its change 9.
NV = 8 * 1_024 * 50_257


def _plan(**changes: object) -> Plan:
    return Plan(
        model=find_model("gpt2").spec,
        method=Method.FULL,
        preset=Preset.PURE_BF16,
        workload=Workload(micro_batch=8, seq_len=1_024),
    ).with_changes(**changes)


def test_the_loss_on_16bit_logits_keeps_16bit_log_probabilities_and_gradients() -> None:
    half, upcast = loss_memory(_plan(loss_16bit=True)), loss_memory(_plan())
    # The forward: the bf16 logits, then the log-softmax in bf16 (no float32 copy).
    assert [t.bytes for t in half.forward] == [NV * 2, NV * 2]
    assert [t.bytes for t in upcast.forward] == [NV * 2, NV * 4, NV * 4]
    # The backward's start: the kept log-softmax, the gradient into it and the logits' gradient.
    assert [t.bytes for t in half.backward] == [NV * 2] * 3
    assert [t.bytes for t in upcast.backward] == [NV * 4] * 3
    assert all("16-bit" in t.label for t in half.backward)


def test_the_backward_peak_falls_by_three_float32_halves() -> None:
    half, upcast = estimate(_plan(loss_16bit=True)), estimate(_plan())
    assert half.peak_phase == upcast.peak_phase == "backward"
    assert upcast.peak_bytes - half.peak_bytes == 3 * NV * 2


@pytest.mark.parametrize(
    "changes",
    [
        {"preset": Preset.TRAINER_BF16},  # autocast: F.cross_entropy runs in float32 anyway
        {"preset": Preset.FP32},  # float32 logits
        {"fused_loss": True},
        {"chunked_loss": True},
        {"compiled_loss": True},
        {"flash_loss": True},
        {"litgpt": True},
    ],
)
def test_it_changes_nothing_where_the_logits_are_not_a_16bit_loop_s(changes: dict[str, object]) -> None:
    plan = _plan(**changes)
    assert not input_at("loss_16bit").matters(plan)
    assert loss_memory(plan.with_changes(loss_16bit=True)) == loss_memory(plan)


def test_it_matters_only_without_autocast_on_a_16bit_model() -> None:
    assert input_at("loss_16bit").matters(_plan())
    assert _plan().autocast is Autocast.NONE
    lora = Plan(model=find_model("gpt2").spec, method=Method.LORA, preset=Preset.PURE_BF16)
    assert input_at("loss_16bit").matters(lora)  # the frozen bf16 head makes bf16 logits


def test_the_command_line_sets_it(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["estimate", "--model", "gpt2", "--preset", "pure-bf16", "--micro-batch", "8", "--seq", "1024", "--json"]
    assert cli_main(args) == 0
    plain = json.loads(capsys.readouterr().out)
    assert cli_main([*args, "--loss-16bit"]) == 0
    half = json.loads(capsys.readouterr().out)
    assert plain["peak_bytes"] - half["peak_bytes"] == 3 * NV * 2


def test_a_plan_file_keeps_it_and_an_older_file_reads_as_the_upcast() -> None:
    plan = _plan(loss_16bit=True)
    document = planfile.plan_to_dict(plan)
    assert planfile.loads(json.dumps(document)) == plan
    del document["plan"]["loss_16bit"]
    assert planfile.loads(json.dumps(document)) == _plan()


def test_a_plan_file_refuses_a_value_that_is_not_a_switch() -> None:
    document = planfile.plan_to_dict(_plan())
    document["plan"]["loss_16bit"] = "sometimes"
    with pytest.raises(PlanFileError, match="plan.loss_16bit"):
        planfile.loads(json.dumps(document))


def test_a_soft_capped_head_with_a_kernel_the_estimate_does_not_take_still_gets_the_16bit_switch() -> None:
    # Gemma 2 2B (resources/models.json, google/gemma-2-2b config.json: final_logit_softcapping 30.0):
    # on a soft-capped head loss_memory counts the eager cross-entropy in place of flash-attn's or the
    # compiled one, so the loop's 16-bit loss must matter there too, not be hidden as "own loss code".
    gemma = Plan(
        model=find_model("gemma-2-2b").spec,
        method=Method.FULL,
        preset=Preset.PURE_BF16,
        workload=Workload(micro_batch=1, seq_len=512),
    )
    nv = 512 * gemma.model.vocab_size
    for kernel in ("flash_loss", "compiled_loss"):
        plan = gemma.with_changes(**{kernel: True})
        assert loss_16bit_matters(plan)
        half = loss_memory(plan.with_changes(loss_16bit=True))
        full = loss_memory(plan)
        # The log-softmax in bf16 instead of the float32 upcast and its float32 log-softmax.
        assert sum(t.bytes for t in full.forward) - sum(t.bytes for t in half.forward) == nv * (4 + 4 - 2)
    # On a head without soft-capping the kernel is the loss: the switch does not matter.
    assert not loss_16bit_matters(_plan(flash_loss=True))
