"""Unsloth's memory rules (docs/UNSLOTH.md), each against the arithmetic of its source:

- U = unslothai/unsloth @ 015bdef0d94a241bcd94eec7a405b1700632180d,
- Z = unslothai/unsloth-zoo @ ce232d6cef9cb8cd34cd3727906131622177436b.

Offloaded checkpointing (Z unsloth_zoo/gradient_checkpointing.py, U unsloth/models/_utils.py
apply_unsloth_gradient_checkpointing), the fused cross-entropy's token chunks (Z
unsloth_zoo/fused_losses/cross_entropy_loss.py get_chunk_size), the fast LoRA kernels' saved tensors
(U unsloth/kernels/fast_lora.py, patch_peft_model in unsloth/models/llama.py), the RMSNorm kernel
(U unsloth/kernels/rms_layernorm.py) and the 4-bit dequantisation buffer (U unsloth/kernels/utils.py
fast_dequantize). Dimensions are the catalogue's (resources/models.json)."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from core.breakdown import BucketKey
from core.catalogue import find_model
from core.cli.app import main as cli_main
from core.estimate import estimate
from core.evidence import confidence
from core.files import planfile
from core.files.launch import Target, export
from core.files.runconfig import ConfigKind, loads_run_config
from core.plan import CheckpointPolicy, LoraSettings, Method, Optimizer, Plan, Preset, Workload
from core.training.activations import layer_activations, loss_memory, unsloth_ce_chunks, unsloth_kernels
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]

ALL_LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
GiB = 1024**3


def notebook(model: str = "llama-3.1-8b", **changes: object) -> Plan:
    """The notebooks' recipe (NB Llama3.1_(8B)-Alpaca.ipynb): QLoRA r 16 on the seven projections,
    dropout 0, batch 2 × 2048, adamw_8bit, the bf16 model, Unsloth's checkpointing."""
    base = Plan(
        model=find_model(model).spec,
        method=Method.QLORA,
        preset=Preset.TRAINER_BF16,
        lora=LoraSettings(rank=16, targets=ALL_LINEAR),
        optimizer=Optimizer.ADAMW_8BIT,
        checkpointing=True,
        checkpoint_policy=CheckpointPolicy.UNSLOTH,
        unsloth=True,
        workload=Workload(micro_batch=2, seq_len=2048),
    )
    return base.with_changes(**changes)


def terms(plan: Plan, key: BucketKey = BucketKey.ACTIVATIONS) -> dict[str, float]:
    est = estimate(plan)
    return {t.label: t.bytes for ph in est.phases for t in ph.bucket(key).terms}


# ---- offloaded checkpointing -------------------------------------------------------------
def test_offloaded_checkpointing_keeps_the_last_block_input_and_two_reload_buffers() -> None:
    # N·d·2 = 4,096 × 4,096 × 2 B: the last block's input (LAST_GC_INDEX) and GPU_BUFFERS plus
    # GPU_BUFFERS_B (double buffering, the upper bound); not L = 32 block inputs.
    kept = terms(notebook())
    one = 2 * 2048 * 4096 * 2
    assert kept["last block's input, kept on the GPU (Unsloth checkpointing)"] == one
    assert kept["reload buffers of Unsloth checkpointing (double buffering: upper bound)"] == 2 * one
    assert not any(label.startswith("block inputs kept by checkpointing") for label in kept)
    full = terms(notebook(checkpoint_policy=CheckpointPolicy.FULL))
    assert full["block inputs kept by checkpointing"] == 32 * one


def test_offloaded_checkpointing_puts_every_block_input_in_pinned_host_memory() -> None:
    # At 32,768 tokens the 32 pinned buffers (CPU_BUFFERS, one per block) outweigh the checkpoint
    # the host loaded (freed before training): the node's peak is theirs.
    host = estimate(notebook(workload=Workload(micro_batch=1, seq_len=32_768))).host
    found = [t for t in host.terms if t.label.startswith("block inputs offloaded by Unsloth checkpointing")]
    assert len(found) == 1 and found[0].bytes == 32 * 32_768 * 4096 * 2


def test_below_512_tokens_unsloth_checkpoints_plainly() -> None:
    # apply_unsloth_gradient_checkpointing: max_seq_length < 512 returns True (plain checkpointing).
    kept = terms(notebook(workload=Workload(micro_batch=2, seq_len=511)))
    assert kept["block inputs kept by checkpointing"] == 32 * 2 * 511 * 4096 * 2
    assert not any("Unsloth checkpointing" in label for label in kept)
    assert any("Unsloth checkpointing" in label for label in terms(notebook(workload=Workload(2, 512))))


def test_an_input_of_2_mib_or_less_stays_on_the_gpu() -> None:
    # MINIMUM_SIZE = 2 MiB / 2 B = 1,048,576 elements, offloaded only when larger: Llama 3.2 1B
    # (d 2,048) at batch 1 × 512 tokens is exactly 1,048,576 elements, at 520 tokens more.
    at = terms(notebook("llama-3.2-1b", workload=Workload(micro_batch=1, seq_len=512)))
    assert at["block inputs kept by checkpointing"] == 16 * 512 * 2048 * 2
    above = terms(notebook("llama-3.2-1b", workload=Workload(micro_batch=1, seq_len=520)))
    assert above["last block's input, kept on the GPU (Unsloth checkpointing)"] == 520 * 2048 * 2


# ---- the fused cross-entropy --------------------------------------------------------------
@pytest.mark.parametrize(
    ("tokens", "chunks"),
    [
        # N·V·4 B against 4 GiB: 4,096 × 128,256 × 4 = 2.10e9 fits one chunk.
        (4096, 1),
        # 8,192 × 128,256 × 4 = 4.20e9 ≤ 4 GiB (4.29e9): still one.
        (8192, 1),
        # 16,384 tokens: 8.41e9 / 4.29e9 = 1.96, rounded up to a multiple of 4.
        (16_384, 4),
        # Unsloth's README 70B context, 89,389 tokens: 45.86e9 / 4.29e9 = 10.7, up to 12.
        (89_389, 12),
    ],
)
def test_the_loss_splits_tokens_into_chunks_of_at_most_4_gib_of_float32_logits(tokens: int, chunks: int) -> None:
    assert unsloth_ce_chunks(tokens, 128_256) == chunks


def test_the_loss_keeps_the_input_gradient_and_one_chunk() -> None:
    plan = notebook()
    loss = loss_memory(plan)
    fwd = {t.label: t.bytes for t in loss.forward}
    nd = 4096 * 4096 * 2
    assert fwd["Unsloth fused loss: input gradient formed in the forward (kept)"] == nd
    chunk = next(b for label, b in fwd.items() if label.startswith("Unsloth fused loss: one chunk of 1 "))
    # One chunk of all 4,096 rows: bf16 logits, their float32 copy, log-softmax and two gradients.
    assert chunk == 4096 * 128_256 * (2 + 2 + 3 * 4)
    assert sorted(t.bytes for t in loss.backward) == [nd, nd]  # kept gradient + the scaled copy
    assert not any(label.startswith("logits") for label in terms(plan))


def test_cut_cross_entropy_comes_first() -> None:
    # Unsloth before 2025.8 (U 806bee2) called Cut Cross-Entropy: the plan's fused_loss.
    assert loss_memory(notebook(fused_loss=True)) == loss_memory(notebook(fused_loss=True, unsloth=False))


# ---- the fast LoRA kernels ------------------------------------------------------------------
def test_the_lora_kernels_keep_gate_and_up_and_no_rank_intermediates() -> None:
    plan = notebook()
    assert unsloth_kernels(plan) == frozenset({"qkv", "o", "mlp"})
    block = {t.label: t.bytes for t in layer_activations(plan, trainable_block=False).items}
    n, i = 4096, 14_336
    assert block["gate, up outputs (Unsloth LoRA_MLP; act(gate)·up recomputed)"] == 2 * n * i * 2
    assert block["MLP input (Unsloth LoRA_MLP keeps X)"] == n * 4096 * 2
    assert block["q/k/v input (Unsloth LoRA_QKV keeps X only)"] == n * 4096 * 2
    assert not any("LoRA A outputs" in label or "down-projection input" in label for label in block)
    # Fast_RMS_Layernorm keeps its input in bf16 and 1/rms in float32, not a float32 copy.
    assert block["attention norm: input (Unsloth RMSNorm kernel)"] == n * 4096 * 2
    plain = layer_activations(notebook(unsloth=False), trainable_block=False).bytes
    assert layer_activations(plan, trainable_block=False).bytes < plain


def test_any_lora_dropout_turns_the_kernels_off() -> None:
    plan = notebook(lora=LoraSettings(rank=16, targets=ALL_LINEAR, dropout=0.05))
    assert unsloth_kernels(plan) == frozenset()
    block = {t.label for t in layer_activations(plan, trainable_block=False).items}
    assert "LoRA A outputs (kept for B)" in block


def test_a_biased_qkv_gets_no_qkv_kernel() -> None:
    # Qwen2's q/k/v carry a bias: its notebook prints "28 layers with 0 QKV layers, 28 O layers
    # and 28 MLP layers"; the three q/k/v adapters keep their N·r intermediates.
    plan = notebook("qwen2.5-7b")
    assert unsloth_kernels(plan) == frozenset({"o", "mlp"})
    lora_a = next(t for t in layer_activations(plan, trainable_block=False).items if t.label.startswith("LoRA A"))
    assert lora_a.bytes == 3 * 4096 * 16 * 2  # q, k, v: N·r each, bf16 under autocast


def test_the_dequantisation_buffer_is_the_largest_4bit_matrix() -> None:
    # WEIGHT_BUFFERS grown to gate/up/down's 4,096 × 14,336 in bf16, ABSMAX_BUFFERS one float32 per 64.
    weights = terms(notebook(), BucketKey.WEIGHTS)
    el = 4096 * 14_336
    assert weights["Unsloth dequantisation buffer (largest 4-bit matrix, persistent)"] == el * 2 + el / 64 * 4
    assert not any("dequantisation" in label for label in terms(notebook(method=Method.LORA), BucketKey.WEIGHTS))


def test_the_backward_forms_one_mlp_gradient_and_one_dequantised_weight() -> None:
    acts = terms(notebook())
    label = next(t for t in acts if t.startswith("gradients through a block's MLP (Unsloth LoRA_MLP"))
    el = 4096 * 14_336
    assert acts[label] >= 4096 * 14_336 * 2 + el * 2 + el / 64 * 4


# ---- inputs: the window's row, the command line, plan files, exports -----------------------
def test_plan_files_round_trip_and_old_files_read_without_unsloth() -> None:
    plan = notebook()
    again = planfile.loads(planfile.dumps(plan))
    assert again.unsloth and again.checkpoint_policy is CheckpointPolicy.UNSLOTH
    document = json.loads(planfile.dumps(notebook(unsloth=False, checkpoint_policy=CheckpointPolicy.FULL)))
    del document["plan"]["unsloth"]
    assert planfile.loads(json.dumps(document)).unsloth is False


def test_the_command_line_sets_both(capsys: object) -> None:
    args = ["estimate", "--model", "llama-3.1-8b", "--method", "qlora", "--lora-targets", "all-linear"]
    args += ["--micro-batch", "2", "--seq", "2048", "--checkpointing", "--json"]
    assert cli_main(args) == 0
    plain = json.loads(capsys.readouterr().out)  # type: ignore[attr-defined]
    assert cli_main([*args, "--unsloth", "--checkpoint-policy", "unsloth"]) == 0
    ours = json.loads(capsys.readouterr().out)  # type: ignore[attr-defined]
    assert ours["peak_bytes"] != plain["peak_bytes"]


@pytest.mark.parametrize("target", [Target.TRL, Target.AXOLOTL, Target.TORCHTUNE, Target.TORCHTITAN])
def test_exports_that_cannot_run_unsloth_list_it(target: Target) -> None:
    fields = {u.field for u in export(notebook(), target).unexpressed}
    assert "method.unsloth" in fields and "method.checkpoint_policy" in fields


def test_llamafactory_writes_use_unsloth_and_reads_it_back() -> None:
    exported = export(notebook(), Target.LLAMA_FACTORY)
    fields = {u.field for u in exported.unexpressed}
    assert "use_unsloth: true" in exported.text
    assert "method.unsloth" not in fields and "method.checkpoint_policy" not in fields
    run = loads_run_config(exported.text.encode(), "a.yaml", ConfigKind.LLAMA_FACTORY)
    assert run.settings.unsloth is True and run.settings.checkpoint_policy == "unsloth"
    full = export(notebook(checkpoint_policy=CheckpointPolicy.FULL), Target.LLAMA_FACTORY)
    assert "method.checkpoint_policy" in {u.field for u in full.unexpressed}


def test_an_unsloth_plan_says_it_was_never_validated() -> None:
    # No scored real-GPU figure is of an Unsloth plan (the notebooks' are upper-bound checks).
    text = confidence(notebook()).text
    assert "never validated against a real GPU" in text and "Unsloth FastLanguageModel" in text


# ---- the evidence: Unsloth's figures in benchmarks/realgpu -----------------------------------
def _mapping() -> ModuleType:
    return load_script(ROOT / "benchmarks" / "realgpu" / "mapping.py", "realgpu_mapping_unsloth")


def test_unsloth_figures_map_to_unsloth_plans_by_release() -> None:
    mapping = _mapping()
    corpus = json.loads((ROOT / "benchmarks" / "realgpu" / "memory_figures.json").read_text())
    mapped = {f["id"]: mapping.map_figure(f) for f in corpus["figures"] if f["id"].startswith("unsloth")}
    readme = mapped["unsloth-readme-ctx-llama33-70b-a100-80-unsloth"]
    assert readme.scored and readme.plan.unsloth and readme.plan.fused_loss  # Dec 2024: Cut Cross-Entropy
    assert readme.plan.checkpoint_policy is CheckpointPolicy.UNSLOTH and not readme.plan.activation_offload
    new = mapped["unsloth-nb-llama33-70b-a100-80"].plan  # Unsloth 2025.9.1: its own fused loss
    assert new.unsloth and not new.fused_loss and new.workload.micro_batch == 2
    assert mapped["unsloth-nb-qwen3-14b-alpaca-t4"].plan.fused_loss  # 2025.4.4: Cut Cross-Entropy
    notebooks = [m for i, m in mapped.items() if i.startswith("unsloth-nb-")]
    assert notebooks and not any(m.scored for m in notebooks)  # padded batches: upper-bound checks only


def test_a_release_before_cut_cross_entropy_is_not_expressed() -> None:
    mapping = _mapping()
    assert mapping._unsloth_era({"versions": {"unsloth": "2024.8"}}) == "fast-ce"
    assert mapping._unsloth_era({"versions": {"unsloth": "2025.8.5"}}) == "2025.8"
    assert mapping._unsloth_era({"versions": {"unsloth": "2025.9.1"}}) == "fused"
    assert mapping._unsloth_era({"versions": {}}) == ""
