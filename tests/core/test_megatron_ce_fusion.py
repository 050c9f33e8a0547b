"""Megatron-Core's cross-entropy fusion (plan setting ``megatron_ce_fusion``; issue 22, item 4).

What each implementation keeps is read from the source Megatron-LM's CI ran, NVIDIA/Megatron-LM
d98e8a64: ``megatron/core/models/common/language_module/language_module.py``
``compute_language_model_loss`` picks ``tensor_parallel.vocab_parallel_cross_entropy`` (off),
``fusions/fused_cross_entropy.py`` (native: the same in-place steps, each function wrapped in
``jit_fuser`` = ``torch.compile``, ``megatron/core/jit.py``) or Transformer Engine's
``parallel_cross_entropy`` (te: NVIDIA/TransformerEngine 4329ff84 ``pytorch/triton/cross_entropy.py``,
the gradient written into the logits in the forward). Megatron-Bridge's keys are
``model.cross_entropy_loss_fusion`` / ``model.cross_entropy_fusion_impl``
(NVIDIA-NeMo/Megatron-Bridge 4ab94dfa: GPTModelProvider turns the fusion on; NVIDIA's performance
scripts set ``te``). The model is Llama 3.1 8B (vocabulary 128,256, meta-llama/Llama-3.1-8B
config.json).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from core.breakdown import BucketKey, StepPhase
from core.cli.app import main as cli_main
from core.estimate import estimate
from core.files import planfile
from core.files.launch import Target, export
from core.files.runconfig import loads_run_config, plan_from_run
from core.inputs import input_at
from core.plan import MegatronCeFusion, Plan, Preset, Stack
from core.presets import plan_for_model
from core.training.activations import loss_memory
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
NV = 4096 * 128_256  # 1 × 4,096 tokens × Llama 3.1's vocabulary
T = 2


def _plan(fusion: MegatronCeFusion = MegatronCeFusion.OFF, tp: int = 1, stack: Stack = Stack.MEGATRON) -> Plan:
    plan = plan_for_model("llama-3.1-8b", preset=Preset.PURE_BF16).with_workload(micro_batch=1, seq_len=4096)
    plan = plan.with_parallel(gpus_per_node=tp, tensor_parallel=tp)
    return plan.with_changes(stack=stack, megatron_ce_fusion=fusion)


def _loss(plan: Plan, kind: StepPhase) -> float:
    phase = next(p for p in estimate(plan).phases if p.kind is kind)
    return sum(
        t.bytes for t in phase.bucket(BucketKey.ACTIVATIONS).terms if "softmax" in t.label or "logits" in t.label
    )


@pytest.mark.parametrize("tp", [1, T])
def test_the_native_fused_loss_holds_one_float32_shard_more_in_the_backward(tp: int) -> None:
    # calculate_gradients under torch.compile: the indexed -= on a view of the saved softmax is an
    # out-of-place index_put beside it, then the multiply writes the softmax and the bf16 gradient.
    off, native = _plan(tp=tp), _plan(MegatronCeFusion.NATIVE, tp)
    assert _loss(native, StepPhase.FORWARD) == pytest.approx(_loss(off, StepPhase.FORWARD))
    assert _loss(off, StepPhase.BACKWARD_START) == pytest.approx(NV * (4 + 2) / tp)
    assert _loss(native, StepPhase.BACKWARD_START) == pytest.approx(NV * (4 + 4 + 2) / tp)


@pytest.mark.parametrize("tp", [1, T])
def test_transformer_engines_loss_keeps_only_the_16_bit_logits(tp: int) -> None:
    # cross_entropy_kernel stores the gradient into the bf16 logits, which are saved; no float32 copy.
    # The backward starts with that same tensor (no float32 N·V at all), so the estimate's backward
    # phase is the block's, not the loss's.
    te = _plan(MegatronCeFusion.TE, tp)
    assert _loss(te, StepPhase.FORWARD) == pytest.approx(NV * 2 / tp)
    memory = loss_memory(te)
    assert sum(t.bytes for t in memory.forward) == sum(t.bytes for t in memory.backward) == NV * 2
    assert estimate(te).peak_bytes < estimate(_plan(tp=tp)).peak_bytes


def test_it_matters_only_on_the_megatron_stack() -> None:
    matters = input_at("megatron_ce_fusion").matters
    assert matters(_plan()) and not matters(_plan(stack=Stack.EAGER))
    eager = _plan(MegatronCeFusion.TE, stack=Stack.EAGER)
    assert estimate(eager).peak_bytes == estimate(_plan(stack=Stack.EAGER)).peak_bytes


def test_plan_files_keep_it_and_older_files_read_as_off() -> None:
    plan = _plan(MegatronCeFusion.TE)
    assert planfile.loads(planfile.dumps(plan)).megatron_ce_fusion is MegatronCeFusion.TE
    document = json.loads(planfile.dumps(plan))
    del document["plan"]["megatron_ce_fusion"]
    assert planfile.loads(json.dumps(document)).megatron_ce_fusion is MegatronCeFusion.OFF


def test_the_command_line_sets_it(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["estimate", "--model", "llama-3.1-8b", "--stack", "megatron", "--seq", "4096", "--json"]
    assert cli_main(args) == 0
    off = json.loads(capsys.readouterr().out)
    assert cli_main([*args, "--megatron-ce-fusion", "te"]) == 0
    te = json.loads(capsys.readouterr().out)
    assert te["peak_bytes"] < off["peak_bytes"]


def _read(model: dict[str, object]) -> str | None:
    document = {"train": {"micro_batch_size": 1}, "model": model}
    return loads_run_config(yaml.safe_dump(document).encode(), "run_config.yaml").settings.megatron_ce_fusion


def test_the_megatron_bridge_importer_reads_the_switch_and_the_implementation() -> None:
    assert _read({"cross_entropy_loss_fusion": True, "cross_entropy_fusion_impl": "te"}) == "te"
    # ModelParallelConfig.cross_entropy_fusion_impl defaults to 'native' (model_parallel_config.py).
    assert _read({"cross_entropy_loss_fusion": True}) == "native"
    assert _read({"cross_entropy_loss_fusion": False, "cross_entropy_fusion_impl": "te"}) == "off"
    assert _read({"seq_length": 4096}) is None  # the recipe's: an override that does not say keeps the plan's


def test_the_megatron_bridge_export_writes_it_and_reads_back() -> None:
    for fusion in MegatronCeFusion:
        out = export(_plan(fusion, T), Target.MEGATRON_BRIDGE)
        model = yaml.safe_load(out.text)["model"]
        assert model["cross_entropy_loss_fusion"] is (fusion is not MegatronCeFusion.OFF)
        assert model.get("cross_entropy_fusion_impl") == (None if fusion is MegatronCeFusion.OFF else fusion.value)
        assert "method.megatron_ce_fusion" not in {u.field for u in out.unexpressed}
        run = loads_run_config(out.text.encode(), "run_config.yaml")
        assert plan_from_run(run, _plan(tp=T)).megatron_ce_fusion is fusion


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script(ROOT / "benchmarks" / "realgpu" / "memory.py", "realgpu_memory_ce_fusion")


def test_megatron_ci_fused_cross_entropy_case_is_scored(bench: ModuleType) -> None:
    # gpt3_mcore_te_tp2_pp2_cross_entropy_loss_fusion (--cross-entropy-loss-fusion, Megatron-LM rejects
    # te: arguments.py) against gpt3_mcore_te_tp2_pp2_resume_torch_dist, the same model and layout
    # without it: their golden peaks are 1,837,640,192 and 1,428,171,264 B (409 MB apart); one float32
    # logits shard is 4 × 1,024 tokens × 50,432 / 2 (GPT-2's vocabulary padded to 128 × TP) × 4 B = 413 MB.
    corpus = json.loads((ROOT / "benchmarks" / "realgpu" / "memory_figures.json").read_text())
    figures = {f["id"]: f for f in corpus["figures"]}
    fused = bench.map_figure(figures["megatron-ci-gpt3_mcore_te_tp2_pp2_cross_entropy_loss_fusion-peak"])  # type: ignore[attr-defined]
    plain = bench.map_figure(figures["megatron-ci-gpt3_mcore_te_tp2_pp2_resume_torch_dist-peak"])  # type: ignore[attr-defined]
    assert fused.expressible and fused.plan.megatron_ce_fusion is MegatronCeFusion.NATIVE
    assert plain.plan.megatron_ce_fusion is MegatronCeFusion.OFF
    shard = 4 * 1024 * 50_432 // 2 * 4
    gap = bench.score_one(fused, 0.0).predicted - bench.score_one(plain, 0.0).predicted  # type: ignore[attr-defined]
    assert gap == pytest.approx(shard, rel=1e-6)
    assert abs(bench.score_one(fused, 0.0).error_pct) < 1.0  # type: ignore[attr-defined]


def test_a_soft_capped_head_under_megatron_keeps_megatrons_loss_and_the_tanh() -> None:
    # Gemma 2 2B (google/gemma-2-2b config.json: final_logit_softcapping 30.0, vocabulary 256,000) under
    # Megatron-Bridge: Gemma2OutputLayer caps the logits (NVIDIA-NeMo/Megatron-Bridge d9f7643b
    # gemma2_provider.py, scale * tanh(logits / scale): tanh saves its result) and hands them to
    # Megatron's cross-entropy, so the fusion setting changes what the loss keeps, as on any model.
    base = plan_for_model("gemma-2-2b", preset=Preset.PURE_BF16).with_workload(micro_batch=1, seq_len=4096)
    assert base.model.final_softcap == 30.0
    nv = 4096 * base.model.vocab_size
    off = base.with_changes(stack=Stack.MEGATRON, megatron_ce_fusion=MegatronCeFusion.OFF)
    te = base.with_changes(stack=Stack.MEGATRON, megatron_ce_fusion=MegatronCeFusion.TE)
    for plan in (off, te):
        loss = loss_memory(plan)
        assert [t.bytes for t in loss.backward if "tanh" in t.label] == [nv * 2]
    # Transformer Engine's kernel writes the gradient into the 16-bit logits: no float32 softmax.
    assert not any(t.bytes == nv * 4 for t in loss_memory(te).backward)
    assert any(t.bytes == nv * 4 for t in loss_memory(off).backward)
    assert input_at("megatron_ce_fusion").matters(te)
