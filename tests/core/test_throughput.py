"""The published-throughput benchmark in CI (benchmarks/realgpu/throughput.py, issue 24).

The whole benchmark runs here (about 2 s: the fit is a small least-squares problem). It holds:

- the FLOPs per token within 2 % of each source's own formula (issue 24's target, met);
- the coefficients in core/training/efficiency.py are the script's all-source fit;
- the leave-one-source-out error table no worse than it is today. Issue 24's targets
  (median |error| ≤ 10 %, met; worst ≤ 25 % up to 8k, ≤ 35 % beyond, every scaling pair within 3
  points, not met): ``--check`` exits 1 and names the misses, which
  docs/TRAINING_TIME.md diagnoses. This test is the ratchet that keeps them from widening.
"""

from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path
from types import ModuleType

import pytest

from core.parallel.layout import layout
from core.plan import Attention, Float8, OptimizerImpl, PipelineSplit, Stack, Strategy
from core.training.efficiency import FITTED
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script(ROOT / "benchmarks" / "realgpu" / "throughput.py", "throughput_benchmark")


@pytest.fixture(scope="module")
def report(bench: ModuleType):  # type: ignore[no-untyped-def]
    return bench.build(bench.load())


def test_flops_per_token_are_within_two_percent_of_every_sources_formula(bench: ModuleType, report) -> None:  # type: ignore[no-untyped-def]
    assert len(report.flops) >= 8
    for source, ratios in report.flops.items():
        assert max(abs(r - 1) for r in ratios) < 0.02, source
    # Every held-out source that publishes TFLOP/s or MFU is checked against its own formula; the others publish
    # tokens/s, samples/s or a step time only (HELD_OUT_TOKENS_ONLY), and every held-out source is one or the other.
    assert set(report.flops) & bench.HELD_OUT_SOURCES == bench.HELD_OUT_FLOPS_CHECKED
    assert bench.HELD_OUT_FLOPS_CHECKED | bench.HELD_OUT_TOKENS_ONLY == bench.HELD_OUT_SOURCES
    assert not bench.HELD_OUT_FLOPS_CHECKED & bench.HELD_OUT_TOKENS_ONLY
    # Each checked source's every scored figure is compared (none falls out of source_flops).
    for source in bench.HELD_OUT_FLOPS_CHECKED:
        scored = [r for r in report.held_out if r.case.record["source_id"] == source]
        assert len(report.flops[source]) == len(scored) > 0, source


def test_internlm_flops_are_its_megatron_formula_with_the_checkpoint_factor(bench: ModuleType, report) -> None:  # type: ignore[no-untyped-def]
    # InternLM/InternLM@c18bec93 internlm/utils/common.py L218-248 get_megatron_flops, per token: (4 with
    # model.checkpoint, else 3) x l((8 + 4 x 3/2 x mlp_ratio) h^2 + 4 s h) + 6 h V; configs/7B_sft.py: 32 layers,
    # hidden 4096, MLP_RATIO 8/3, VOCAB_SIZE 103168, SEQ_LEN 2048 (the FLOPS tables' rows).
    layers, h, v, s = 32, 4096, 103168, 2048
    records = {r["id"]: r for r in bench.load()["figures"] if r["source_id"] == "internlm"}
    for suffix, factor in (("8gpu-mb8-mn1-ac", 4), ("8gpu-mb2-mn4-noac", 3)):
        record = records[f"internlm-7b-a100-{suffix}"]
        per_token = factor * layers * ((8 + 4 * 3 / 2 * 8 / 3) * h * h + 4 * s * h) + 6 * h * v
        assert record["derived"]["source_formula_flops_per_token"] == pytest.approx(per_token, rel=1e-12)
        ours, theirs = bench.source_flops(bench.case_of(record))
        # What is left is the MLP's width: the formula's 8/3 x 4096 unrounded, the model's 11,008 (rounded up to a
        # multiple of 256, internlm/model/linear.py L143), 3 matrices of h x f, 6 FLOPs a weight, x 4/3 recomputed.
        rounding = 18 * layers * h * (11008 - 8 / 3 * h) * factor / 3
        assert ours - rounding == pytest.approx(theirs, rel=1e-9)
    # Read without the checkpoint factor, the recomputing rows read 0.76 (the sibling's note): with it, 22 rows.
    assert len(report.flops["internlm"]) == 22
    assert all(r == pytest.approx(1.0046, abs=2e-4) for r in report.flops["internlm"])


def test_colossal_ai_flops_are_megatrons_gpt_formula_on_the_shape_it_assumes(bench: ModuleType, report) -> None:  # type: ignore[no-untyped-def]
    # examples/language/performance_evaluator.py L158-163 (hpcaitech/ColossalAI@e5fdefa6), per token with -g:
    # 24 x 4 x l h^2 (1 + s/(6h) + V/(16 l h)) = 96 l h^2 + 16 l s h + 6 V h. The 7B: 32 x 4096, vocab 32000,
    # sequence 4096 (benchmark.py MODEL_CONFIGS '7b', the table's 4096 column).
    records = _colossal(bench)
    seven = records["colossalai-h200-7b-8gpu-zero2-b36"]
    per_token = 96 * 32 * 4096**2 + 16 * 32 * 4096 * 4096 + 6 * 32000 * 4096
    assert seven["derived"]["source_formula_flops_per_token"] == per_token
    for r in records.values():
        dims = r["model_dims"]
        h, layers, s, v = dims["hidden"], dims["layers"], r["seq_len"], dims["vocab"]
        per_token = 24 * 4 * layers * h * h * (1 + s / (6 * h) + v / (16 * layers * h))
        assert r["derived"]["source_formula_flops_per_token"] == pytest.approx(per_token, rel=1e-12)
    # The formula reads no kv heads and no MLP width: ours counted on the MHA, 4h-MLP shape it assumes agrees to
    # the float; the 70B's own shape (GQA, SwiGLU 28,672) is 12.75 h^2 a block, not 12: ours on it reads 1.058.
    assert len(report.flops["colossalai"]) == 3
    assert all(r == pytest.approx(1.0, rel=1e-9) for r in report.flops["colossalai"])
    from dataclasses import replace

    from core.plan import Method
    from core.training.flops import token_flops

    case = bench.case_of(records["colossalai-b200-70b-16gpu-tp2pp4-zero1-b128"])
    real = token_flops(replace(case.plan, method=Method.FULL, checkpointing=False)).model
    theirs = case.record["derived"]["source_formula_flops_per_token"]
    assert bench._once_more_forward(case, real) / theirs == pytest.approx(1.058, abs=1e-3)


def test_nanotron_flops_are_its_get_flops(report) -> None:  # type: ignore[no-untyped-def]
    # src/nanotron/models/llama.py L1100-1168 get_flops (c2528430): the Megatron count, head once, no recompute;
    # all 26 scored cells, tied (source_formula_flops_per_token_all_params) or not.
    assert len(report.flops["nanotron"]) == 26
    assert all(r == pytest.approx(1.0, rel=1e-9) for r in report.flops["nanotron"])


def test_the_coefficients_in_core_are_the_all_source_fit(report) -> None:  # type: ignore[no-untyped-def]
    assert set(report.all_sources) == set(FITTED)
    for name, value in report.all_sources.items():
        assert FITTED[name] == pytest.approx(round(value, 4), abs=1e-4), name


def test_the_leave_one_source_out_errors_do_not_widen(bench: ModuleType, report) -> None:  # type: ignore[no-untyped-def]
    # Today's figures (docs/TRAINING_TIME.md), each with a little room for floating point; the
    # expert-parallel figures have their own (test_the_expert_parallel_figures_are_scored).
    summary = bench.summary([r for r in report.scored if bench.fitted_on(r.case)])
    assert summary["n"] >= 330
    # 9.38 -> 9.13 % with Meta's H100 at its quoted peak (below); 9.13 -> 7.12 % with the Megatron
    # stack's Hopper matmuls at TE's GEMM guide rate (NVIDIA -17.6 -> -5.8 % median signed).
    # 7.12 -> 7.07 % with the ring all-gather's real window; 7.07 -> 6.75 % with each matmul timed
    # in whole tiles and waves (core.training.gemm_shape; BigScience +44.0 -> +29.2 % median).
    # 6.75 -> 6.68 % with torch.compile's elementwise bytes counted from what inductor fuses and
    # timed at the pointwise rate, not fitted (torchtitan +10.8 -> +8.0 %, torchtune -13.2 -> -11.6 %).
    # 6.68 -> 6.68 % with eager attention's batched GEMMs at the matmul rate in whole tiles (only
    # BigScience runs eager attention: +27.6 % either way, its head dimension 150's waste replacing
    # the Ampere fused-attention coefficient its rows had set).
    # 6.68 -> 6.85 % with a fused attention kernel's backward timed at the five matmuls it runs
    # (2.5 x the forward, FlashAttention's own count, which the attention priors' rates are per
    # FLOP of): MosaicML's rows, mostly without recompute, take a larger backward share (-3.9 ->
    # -5.3 % median signed) than the refit gives back.
    # 6.85 -> 6.96 % with each source's FSDP reduce dtype read from its code (fms-fsdp's bfSixteen
    # and composer's PURE mode reduce in bf16, not float32: throughput.py _reduce_dtype): a
    # mapping made faithful, not a fit; IBM's eager 7B HSDP row on 96 H100s +29.1 -> +32.5 %.
    # 6.96 -> 6.84 % with Megatron's distributed optimizer gathering the bf16 model parameters
    # (param_and_grad_buffer.py start_param_sync), not 4 B ones: NVIDIA's family 6.3 -> 5.6 %
    # median, and the refit moves the shared coefficients.
    # 6.84 -> 6.64 % with Megatron's gradient buffer in bf16 where NVIDIA's performance recipes
    # set grad_reduce_in_fp32 = False (Megatron-Bridge's archive and Megatron-LM's Llama example:
    # throughput.py _grad_reduce_in_fp32): their reduce-scatters carry 2 B, not 4 B, a gradient
    # (B200 405B -7.6 -> -3.9 %), and the refit moves the shared coefficients.
    # 6.64 -> 6.66 % with an offloaded plan's CPU optimizer step timed (core.training.host.host_step)
    # and FSDP2's offload copies overlapped as its streams run them: torchtune's 70B CPU-offload row
    # (+17.2 -> +14.9 %) is in the other families' fits, and moves the shared Ampere coefficients.
    # 6.66 -> 6.59 % with torchtune's rows in pure bf16, as its recipes build the model (throughput.py
    # _preset): its optimizer state and FSDP reductions are 2 B, not 4 B (torchtune -12.0 -> -11.1 %).
    # 6.59 -> 6.70 % with the host step bounded by one thread a rank (torchrun's OMP_NUM_THREADS=1,
    # 18 GB/s a server thread: core.training.host.HOST_THREAD_STREAM_GBS): torchtune's 70B CPU-offload
    # row +38.4 -> +10.0 %, and, being fitted on by the other families, it moves the shared Ampere
    # coefficients (gemm:ampere/16-bit 1.3857 -> 1.3798): MosaicML's and IBM's medians move by 0.1.
    # A faithful step time, not a fit; the ratchet loosens by what the refit moved.
    # 6.70 -> 6.68 % with the eager stack's passes counted per kernel that runs: a LayerNorm is one
    # native kernel (2 passes, not a Python RMSNorm's 18: MPT's low_precision_layernorm), no head
    # transposes around a fused attention kernel (strided views), TinyLlama's hand-fused kernels
    # counted as fused (throughput.py _FUSED_KERNELS); the eager factor refits 0.45 -> 1.02, next to
    # the pointwise prior 1.09 (IBM +6.2 -> +1.7 % median signed, MosaicML -5.4 -> -6.5 %).
    # 6.68 -> 6.64 % with NCCL 2.18's 14 us network hop (resources/links.json; the 512-GPU pair 4.2 -> 3.9).
    # 6.64 -> 6.90 % (loosened, with the reason) with Transformer Engine's scaling recipe a plan input:
    # Megatron-Bridge's per-tensor rows run current scaling (6.77 bytes a cast element, TE's GEMM guide
    # on an H200) and Megatron-Core casts each weight once a step (is_first_microbatch): both read from
    # the sources, neither fitted; NVIDIA's family 4.92 -> 5.45 %, and the refit of the shared
    # coefficients moves the other families (docs/TRAINING_TIME.md, "Transformer Engine's scaling recipes").
    # 6.90 -> 6.98 % (loosened, with the reason) with gradient accumulation outside the weight-gradient
    # matmul timed (core.training.speed.grad_accum_bytes: Megatron-DeepSpeed has no accumulation fusion,
    # the prequel runs held 16-bit gradients): BigScience's rows +23..26 -> +19..22 %, and, being in the
    # other families' fits, they leave the shared Ampere matmul a little faster (1.3765 -> 1.3652).
    # 6.97 -> 7.07 % (loosened, with the reason) with torchao's float8 table added (pytorch/ao@36027d82
    # docs/source/workflows/training.md: three Llama3-8b rows on Meta's H100, left out with torchtitan):
    # new figures, +8.6 / +12.4 / +12.7 %, above the median; the refit moves the shared coefficients
    # (worst <= 8k 28.06 -> 28.05 %).
    # 7.07 -> 6.39 % with MPT's fused Wqkv in the MosaicML rows' model (read from source: one d x 3d GEMM).
    # 6.39 -> 6.51 % (loosened, with the reason) with each source's optimizer as its code ran it (throughput.py
    # _optimizer_plan: torchtitan's Apr-Dec 2024 code foreach, composer's DecoupledAdamW and TinyLlama's for-loop,
    # fms-fsdp's and OLMo-core's foreach, their clipping and weight decay): read from source, not fitted. MosaicML
    # 6.3 -> 6.8 %, IBM 4.4 -> 4.7 %, torchtitan 7.0 -> 6.7 % (docs/TRAINING_TIME.md, "The optimizer each fitted
    # source ran").
    # 6.51 -> 6.55 % (loosened, with the reason) with Transformer Engine's context-parallel ring timed beside its
    # fused kernels under Megatron (core.training.speed TE_RING_*: its copies and merges, read at TE 7d576ed2,
    # not fitted): NeMo 24.07's Llama 3 8B CP 2 row +23.1 -> +20.3 %, Megatron-LM's +9.5 -> +7.0 %, the 405B CP 2
    # rows 0.5-0.6 points slower; the refit of the shared coefficients moves rows near the median by hundredths
    # (docs/TRAINING_TIME.md, "Transformer Engine's context-parallel ring").
    assert summary["median"] <= 6.56
    # 47.0 -> 48.6 % with Transformer Engine's fp8 rate taken from its source (not fitted on
    # NVIDIA's rows, whose miss then moves into the shared Hopper coefficients); 48.6 -> 50.2 %
    # and 78.4 -> 79.1 % with the data-parallel contention (the same BigScience and
    # context-parallel rows: the other families' fit leaves Ampere's matmuls and Hopper's
    # attention a little faster once part of the FSDP rows' time is contention); 50.2 -> 50.4 %
    # with the prequel runs' ALiBi (their slurm script), which drops their rotary traffic;
    # 50.4 -> 50.1 % and 79.1 -> 66.6 % with Meta's 500 W H100 timed inside its quoted peak
    # interval (test_metas_grand_teton_h100_is_timed_between_the_sxm_and_nvl_peaks); 50.1 -> 45.3 %
    # and 66.6 -> 68.2 % with the Megatron stack's Hopper matmuls at TE's GEMM guide rate: NVIDIA's
    # residual no longer lands on the shared coefficients (BigScience +48.8 -> +44.0 %), which had
    # also slowed torchtitan's context-parallel rows when torchtitan was left out.
    # 45.3 -> 30.3 % and 68.2 -> 68.5 % with tile and wave quantization: BigScience's 14,400-wide
    # layers at 2,048 tokens a micro-batch run 3-5 waves of tiles on 108 SMs, the last partly empty;
    # the refit leaves Hopper's shared coefficients a little faster for torchtitan's CP rows.
    # 30.4 -> 28.8 % and 68.5 -> 67.7 % with torch.compile's counted bytes (the refit moves the
    # shared coefficients: BigScience +29.2 -> +27.6 %).
    # 28.8 -> 29.4 % and 67.7 -> 54.6 % with the fused backward's five matmuls (above): the
    # context-parallel rows' attention is ~90 % of their step (torchtitan's 8B CP 8 +67.7 ->
    # +54.6 %); the refit leaves the shared Hopper matmul and byte coefficients a little faster,
    # so BigScience (Megatron-DeepSpeed's eager attention, not a fused kernel) +27.6 -> +28.2 %.
    # 54.6 -> 54.62 % with the sources' FSDP reduce dtypes (above): the refit's Hopper coefficients;
    # 29.4 -> 29.13 % and 54.62 -> 54.75 % with Megatron's bf16 parameter all-gather (the refit:
    # BigScience's prequel 200B row, torchtitan's 8B CP 8 row).
    # 29.13 -> 29.10 % and 54.75 -> 54.89 % with Megatron's bf16 gradient buffer (above): a
    # faithful mapping, not a fit; the refit leaves the shared Hopper attention coefficient a
    # little faster (3.1952 -> 3.1940), so torchtitan's 8B CP 8 row at 262k +54.8 -> +54.9 %.
    # 29.10 -> 29.16 % with the host optimizer step (above): the refit, BigScience's worst row.
    # 29.16 -> 38.43 % with torchtune's rows in pure bf16 (above): its 70B CPU-offload row's host step
    # halves with its bytes (5.9 -> 3.0 s), +14.9 -> +38.4 %, now the worst. Its recipe runs torch's
    # fused CPU AdamW under torchrun, whose default OMP_NUM_THREADS=1 leaves each rank one core; no
    # source here gives a per-core rate, so that is not modelled (docs/TRAINING_TIME.md).
    # 38.43 -> 28.63 % with the one-thread-a-rank host step (above): that row +10.0 %; the worst is
    # BigScience's prequel 200B row again.
    # 28.63 -> 27.17 % and 54.90 -> 53.98 % with the eager passes per kernel (above): BigScience's
    # prequel rows +28.6 -> +26.0 % (the Megatron factor refits as NVIDIA's fused attention sheds
    # its transposes), the worst is MosaicML's 70B on 64 A100 40GB (-27.2 %); torchtitan's 8B CP 8
    # row +54.9 -> +54.0 %.
    # 27.17 -> 27.26 % with TE's scaling recipes (current scaling's casts, the weights cast once a step
    # under Megatron-Core): the refit of the shared coefficients moves MosaicML's 70B on 64 A100 40GB.
    # 27.26 -> 28.06 % with the gradient accumulation passes (above): BigScience's prequel rows leave the
    # worst ten (+25.6 -> +22.4 % the worst), and the refit of the shared Ampere coefficients takes
    # MosaicML's 70B on 64 A100 40GB +27.3 -> +28.1 %.
    # 28.06 -> 28.88 % (loosened, with the reason) with MPT's fused Wqkv: a faithful model of the MosaicML rows
    # (mosaicml/examples 71dd21bd attention.py L267; llm-foundry b2a43a147 attention.py L518) whose faster fused
    # GEMM takes the already too-fast 70B on 64 A100 40GB row +28.05 -> +28.87 %, while the median falls
    # 7.07 -> 6.39 % and the worst beyond 8k 54.09 -> 53.77 % (docs/TRAINING_TIME.md, "MPT's fused Wqkv").
    assert summary["worst_short"] <= 28.88
    # 53.98 -> 54.03 % with TE's scaling recipes (the refit moves torchtitan's 8B CP 8 row); 54.09 % with
    # the gradient accumulation passes (the refit).
    # 53.77 % with MPT's fused Wqkv (the refit).
    assert summary["worst_long"] <= 53.78
    # NVIDIA's dense rows (its expert-parallel ones are checked in the next test): 18.3 % before
    # the guide's rate.
    nvidia = [
        abs(r.error) for r in report.scored if r.case.family == "NVIDIA" and r.case.plan.parallel.expert_parallel == 1
    ]
    # 4.90 -> 4.86 % with the bf16 gradient buffer NVIDIA's recipes ran (above).
    # 4.86 -> 4.87 % with the host optimizer step of offloaded plans (the refit, above).
    # 4.87 -> 4.88 % with no head transposes around Transformer Engine's fused attention (above).
    # 4.88 -> 4.90 % with NCCL 2.18's 14 us network hop (resources/links.json; the refit).
    # 4.90 -> 4.99 % with TE's scaling recipes (Megatron-Bridge's current scaling dearer, NeMo 24.07's and
    # Megatron-LM's delayed-scaling rows' weights cast once a step; docs/TRAINING_TIME.md).
    assert statistics.median(nvidia) <= 4.99
    families = {r.case.family for r in report.scored}
    assert len(families) >= 8  # at least 6 independent sources (issue 24): 8 families scored


def test_the_expert_parallel_figures_are_scored(bench: ModuleType, report) -> None:  # type: ignore[no-untyped-def]
    # Megatron-Bridge's 21 MoE figures (Qwen3-30B-A3B, gpt-oss-120b, EP 8-64) are plans now,
    # scored leave one source out (NVIDIA's fit leaves them out) and fitted on by nothing
    # (throughput.fitted_on): median 10.8 %, 77.5 % without the all-to-all (docs/TRAINING_TIME.md);
    # 10.8 -> 11.3 % with a fused attention backward timed at its five matmuls (the refit leaves the
    # shared Hopper coefficients a little faster, and these rows are mostly predicted too fast).
    rows = [r for r in report.scored if r.case.plan.parallel.expert_parallel > 1]
    # 21 -> 15 with the six records whose recipe is not what their table states listed not comparable
    # (test_the_moe_rows_whose_recipe_is_not_their_tables_are_not_comparable).
    assert len(rows) == 15
    assert not any(bench.fitted_on(r.case) for r in rows)
    # 11.3 -> 17.3 % with the experts' gradients reduced, and their parameters gathered, over the
    # expert-data-parallel group (Megatron-Core's expert buffers): gpt-oss-120b's EP 8 rows on 64
    # GPUs move each rank's 1/8 of the experts (14.3e9 parameters) over 8 ranks one per node, one
    # NIC each, where the whole model's 64-rank ring had 8 NICs a node (+7 -> -17 % on B200).
    # 17.3 -> 11.3 % with Megatron's distributed optimizer gathering the bf16 model parameters, not
    # 4 B ones (param_and_grad_buffer.py start_param_sync): those rows' expert all-gather halves.
    # 11.2 -> 10.8 % with the bf16 gradient buffer gpt-oss-120b's and Qwen3's recipes set
    # (cfg.ddp.grad_reduce_in_fp32 = False at every release's tag): the B200 gpt-oss EP 8 rows' slow
    # expert reduction halves (26.02.01 -10.0 -> -3.2 %, 26.04 -5.3 -> +1.8 %), though 25.11's, whose
    # table says EP 8 where its tag ran EP 64, goes +20.2 -> +39.6 %.
    # 10.83 -> 10.85 % with the host optimizer step of offloaded plans (the refit of the shared
    # coefficients: torchtune's 70B CPU-offload row is fitted on).
    # 10.85 -> 10.48 % with torchtune's rows in pure bf16 (the refit of the shared coefficients).
    # 10.48 -> 10.70 % with the one-thread-a-rank host step (the refit of the shared coefficients).
    # 10.70 -> 12.40 % (loosened, with the reason; 10.48 -> 12.19 % on its own) with the MoE token permutes timed
    # (core.training.speed.moe_permute_bytes, from Transformer Engine's permutation kernels and
    # Megatron-Core's alltoall dispatcher): the rows at the median are gpt-oss-120b's H100 rows,
    # which ran the alltoall dispatcher and were already predicted too slow (-10.5 -> -12.2 %); their
    # permute and sort kernels run in the source, so the time is charged. The rows it was for move
    # the other way: the four worst Qwen3-30B-A3B rows +249.9 / +235.7 / +174.0 / +155.9 % ->
    # +221.9 / +208.9 / +161.5 / +135.6 %; the HybridEP rows, whose permutes are inside the
    # dispatch kernels, do not move.
    # 12.41 -> 12.57 % and 221.95 -> 223.97 % with no head transposes around a fused attention
    # kernel (test_the_leave_one_source_out_errors_do_not_widen): these rows' attention is Transformer
    # Engine's fused kernel, so their step loses those copies; the worst is the same B200 row.
    # 12.19 -> 9.86 % and 221.7 -> 135.4 % with the step no faster than the host issues its MoE layers
    # (core.training.speed.MEGATRON_MOE_LAYER_HOST_S, 8.55 ms a layer from Megatron-LM's own CI, not
    # from these rows): the micro-batch-1 rows whose device work per layer is shorter than that move
    # (B200 25.11 / 26.02 +221.7 / +208.7 -> +7.2 / +2.9 %, H100 26.02.01 +54.5 -> +10.0 %, 26.02
    # +161.3 -> +94.9 %); the rows whose device takes longer (micro-batch 4, EP 16 across nodes,
    # gpt-oss-120b) do not. The worst is now 25.11's H100 row (+135.4 %: its table's layout is not
    # its tag's, and its device step, 12.7 ms a layer, is longer than the host's).
    # Merged (both): 10.01 % and 137.18 % (the worst the same 25.11 H100 row, +135.4 -> +137.2 % once its
    # fused attention lost its transposes).
    # 10.01 -> 7.24 % and 137.18 -> 29.72 % with those six out (25.11 H100 Qwen3 +137.2, 26.02 H100
    # Qwen3 +94.9, 25.11 B200 gpt-oss +37.7, 25.11 H100 gpt-oss -23.2, 26.02.01 H100 Qwen3 +10.0,
    # 26.02.01 B200 gpt-oss -4.9 %); the worst is now 26.02.01's micro-batch-4 B200 Qwen3 row.
    # 29.72 -> 24.10 % with Transformer Engine's MXFP8 recipe timed as its own (its block-scaled GEMM
    # 1.051 x the per-tensor one, its casts 5.87 bytes an element: TE's GEMM guide, B300): the three
    # micro-batch-4 B200 Qwen3 rows +29.7 / +28.9 / +27.6 -> +24.1 / +23.3 / +22.1 %; the median unmoved.
    assert statistics.median(abs(r.error) for r in rows) <= 7.25
    # 24.10 -> 24.11 % with NCCL 2.18's 14 us network hop (the refit).
    # 24.11 -> 24.97 % with the MXFP8 weights cast once a step under Megatron-Core (is_first_microbatch:
    # the micro-batch-4 B200 Qwen3 rows, predicted too fast already, get faster).
    # 24.97 -> 25.51 % with the gradient accumulation passes: BigScience's rows, fitted on for NVIDIA,
    # leave the shared Megatron elementwise factor lower (0.545 -> 0.526).
    # 25.51 -> 24.37 % with HybridEP's dispatch and combine timed at its measured algorithm bandwidth
    # inside a B200 node (535.94 / 530.86 GB/s for the distinct tokens a rank receives, deep_ep's
    # Hybrid-EP document), not NCCL's all-to-all of every copy at an assumed bus bandwidth: the
    # micro-batch-4 B200 Qwen3 rows +25.5 / +24.7 / +23.5 -> +24.4 / +23.6 / +22.3 %.
    # 24.37 -> 24.42 % (loosened, with the reason) with Megatron's router left in 16 bits under TE fp8
    # (router_gating_linear is no TE linear: no fp8 GEMM, no cast): the same rows get 0.05 points faster.
    assert max(abs(r.error) for r in rows) <= 24.42
    # The two-node EP 16 rows: 8,826-8,960 published, 8,728 predicted (+150 % without the traffic
    # that crosses the nodes' NICs); 8,628 with the fused backward's five matmuls (-3.7 % the worst);
    # -3.7..-5.1 % once their per-tensor fp8 runs current scaling (Megatron-Bridge's H100_FP8_CS_V1
    # configs), whose amax pass TE's GEMM guide measures at 6.77 bytes a cast element, not 4.
    for r in rows:
        if r.case.plan.parallel.expert_parallel == 16:
            assert abs(r.error) < 5.2, r.case.id
    # No expert-parallel row is left out for its layout.
    assert not [why for _, source, why in report.skipped if "expert" in why]


def test_the_micro_batch_1_moe_rows_run_at_the_hosts_pace(report) -> None:  # type: ignore[no-untyped-def]
    # Megatron-Bridge's B200 Qwen3-30B-A3B rows at micro-batch 1 (25.11: 9,299, 26.02: 9,691 tokens/s
    # a GPU) take 9.2 / 8.8 ms a layer forward and backward; the device's modelled work is 2.8 ms
    # (+221.7 / +208.7 % before). At the host's 8.55 ms a MoE layer (Megatron-LM's CI) they are
    # within 8 % (26.02.01's H100 row at micro-batch 1, +10.0 %, is not comparable: its tag ran EP 16).
    errors = {r.case.id: r.error for r in report.scored}
    assert abs(errors["mbridge-25.11-pretrain-b200-qwen3_30b_a3b-fp8-mx-8gpu-tp1pp1cp1-mbs1"]) < 8.0
    assert abs(errors["mbridge-26.02-pretrain-b200-qwen3_30b_a3b-mxfp8-8gpu-tp1pp1cp1-mbs1"]) < 8.0
    # Where the device's work per layer is longer than the host's, the floor does not bind: the
    # micro-batch-4 B200 rows (HybridEP, attention graphed) keep their +26-29 % (+27.6-29.7 % once
    # their fused attention lost its head transposes, branch h24c; +22.1-24.1 % with the MXFP8
    # recipe's GEMM and casts timed as its own, branch h26mxfp8: still predicted too fast).
    # +22.9-25.0 % with the MXFP8 weights cast once a step (Megatron-Core's is_first_microbatch).
    # +22.3-24.4 % with HybridEP's measured bandwidth inside the node (comm.HYBRIDEP_ALGBW_GB_S);
    # +22.4-24.4 % with the router in 16 bits (speed.megatron_router).
    for release in ("26.02.01", "26.04", "26.04.01"):
        assert 22.0 < errors[f"mbridge-{release}-pretrain-b200-qwen3_30b_a3b-mxfp8-8gpu-tp1pp1cp1-mbs4"] < 24.45


def test_each_expert_parallel_record_says_what_its_releases_recipe_ran(bench: ModuleType, report) -> None:  # type: ignore[no-untyped-def]
    # The archive's tables give the layout, not the recipe: each MoE record quotes its release's
    # scripts/performance configs at the release's Megatron-Bridge tag (docs/TRAINING_TIME.md, "The
    # Megatron-Bridge MoE rows"), and says whether the tag's layout is the table's.
    tags = {"25.11": "v0.2.0", "26.02": "v0.3.0", "26.02.01": "v0.3.1", "26.04": "v0.4.0", "26.04.01": "v0.4.2"}
    tags["26.06"] = "v0.5.0"
    recipes: dict[str, str] = {}
    for record in bench.load()["figures"]:
        if (record.get("ep") or 1) > 1 and "tokendrop" not in record["model"]:
            lines = [a for a in record["assumptions"] if a.startswith("recipe at the release's tag")]
            assert len(lines) == 1, record["id"]
            assert f"Megatron-Bridge@{tags[record['id'].split('-')[1]]} " in lines[0], record["id"]
            assert ("Agrees with the table's layout" in lines[0]) != ("DISAGREES with the table" in lines[0])
            recipes[record["id"]] = lines[0]
    assert len(recipes) == 21
    # The two worst rows (25.11 and 26.02 B200 Qwen3-30B-A3B at micro-batch 1) ran the alltoall
    # dispatcher with CUDA graphs over the router and its preprocessing only, not over attention
    # (v0.2.0 / v0.3.0 qwen3 workload configs); the releases after ran HybridEP at micro-batch 4
    # with attention graphed too (v0.3.1, PR #2499).
    for release in ("25.11", "26.02"):
        line = next(v for k, v in recipes.items() if k.startswith(f"mbridge-{release}-pretrain-b200-qwen3"))
        assert '"alltoall"' in line and 'cuda_graph_scope=["moe_router", "moe_preprocess"]' in line
    line = recipes["mbridge-26.02.01-pretrain-b200-qwen3_30b_a3b-mxfp8-8gpu-tp1pp1cp1-mbs4"]
    assert '"hybridep"' in line and 'cuda_graph_scope=["attn", "moe_router", "moe_preprocess"]' in line
    # Five records' tables state another layout than their tag's configs set: none is scored.
    assert sum("DISAGREES" in v for v in recipes.values()) == 5
    scored = {r.case.id for r in report.scored}
    assert not [k for k, v in recipes.items() if "DISAGREES" in v and k in scored]
    # Each row is planned with the token dispatcher its recipe line names: the flex backend where the
    # tag sets one (DeepEP at 26.02 on H100, HybridEP after), alltoall where it sets none.
    for r in report.scored:
        if r.case.id in recipes:
            dispatcher = r.case.plan.parallel.moe_dispatcher.value
            if dispatcher == "alltoall":
                assert '"alltoall"' in recipes[r.case.id] or "flex" not in recipes[r.case.id], r.case.id
            else:
                assert dispatcher in recipes[r.case.id].lower(), r.case.id
    # The one DeepEP row (26.02 H100) is not comparable: its container had no DeepEP.
    dispatchers = [r.case.plan.parallel.moe_dispatcher.value for r in report.scored if r.case.id in recipes]
    assert (dispatchers.count("deepep"), dispatchers.count("hybridep")) == (0, 7)


# The Megatron-Bridge MoE records whose figure is not what their stated recipe produces
# (docs/TRAINING_TIME.md, "The Megatron-Bridge MoE rows that are not comparable").
NOT_THE_TABLES_RECIPE = {
    # 26.02: v0.3.0 asks DeepEP; docs/releases/known-issues.md at v0.3.0: not in the 26.02 container.
    "mbridge-26.02-pretrain-h100-qwen3_30b_a3b-fp8-16gpu-tp1pp2cp1-mbs1": "DeepEP is not supported in the current",
    # The table's layout is not its tag's config (v0.2.0 / v0.3.1 scripts/performance/configs).
    "mbridge-25.11-pretrain-h100-qwen3_30b_a3b-fp8-cs-16gpu-tp1pp2cp1-mbs2": "QWEN3_30B_A3B_H100_FP8_CS_BASE_CONFIG",
    "mbridge-25.11-pretrain-b200-gptoss120b-bf16-64gpu-tp1pp1cp1-mbs4": "GPT_OSS_120B_B200_BF16_BASE_CONFIG runs EP 64",
    "mbridge-25.11-pretrain-h100-gptoss120b-bf16-64gpu-tp1pp4cp1-mbs4": "GPT_OSS_120B_H100_BF16_BASE_CONFIG runs micro",
    "mbridge-26.02.01-pretrain-h100-qwen3_30b_a3b-fp8-16gpu-tp1pp2cp1-mbs1": "FP8_CS_V1 runs EP 16 and PP 1",
    "mbridge-26.02.01-pretrain-b200-gptoss120b-bf16-64gpu-tp1pp1cp1-mbs4": "B200_BF16_V1 / V2 run EP 64",
}


def test_the_moe_rows_whose_recipe_is_not_their_tables_are_not_comparable(report) -> None:  # type: ignore[no-untyped-def]
    # Before: all six scored at their table's layout (+137.2, +94.9, +37.7, -23.2, +10.0, -4.9 %).
    skipped = {i: why for i, _, why in report.skipped}
    for key, cited in NOT_THE_TABLES_RECIPE.items():
        assert key in skipped and skipped[key].startswith("not comparable: "), key
        assert cited in skipped[key], key
    assert not NOT_THE_TABLES_RECIPE.keys() & {r.case.id for r in report.scored}


def test_a_records_accumulation_follows_the_quoted_global_batch(bench: ModuleType) -> None:
    # Megatron-Bridge 25.11, H100 gpt-oss-120b: GBS 512, MBS 4, PP 4 on 64 GPUs is DP 16, so 8
    # micro-batches a step; the record's grad_accum 2 divided by the GPUs instead.
    # (The record is not comparable, its tag's MBS is 1: its layout is planned here without that mark.)
    record = next(
        r
        for r in bench.load()["figures"]
        if r["id"] == "mbridge-25.11-pretrain-h100-gptoss120b-bf16-64gpu-tp1pp4cp1-mbs4"
    )
    plan = bench.case_of({**record, "not_comparable_reason": None}).plan
    assert plan.parallel.data_parallel == 16 and plan.workload.grad_accum == 8


def test_the_corpus_has_the_issues_breadth(report) -> None:  # type: ignore[no-untyped-def]
    # At least 50 figures from at least 6 independent sources, each with its layout.
    assert len(report.scored) >= 50
    assert len({r.case.record["source_id"] for r in report.scored}) >= 6
    # 63 pairs listed; 42 change the GPU count only (21 also change the micro-batch or the
    # accumulation with the global batch: test_a_scaling_pair_changes_the_gpu_count_and_nothing_else),
    # of which 2 are unlisted (test_a_pair_whose_figures_cannot_both_be_its_plan_is_unlisted_with_the_arithmetic).
    assert len(report.pairs) >= 40


def test_check_mode_names_the_missed_targets(bench: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--check"]) == 1
    out = capsys.readouterr().out
    # The median target (10 %) is met since the FlashAttention 1 / Triton and learned-position
    # rules (9.5 %; 9.4 % with the ring-attention, rowwise and Jean Zay rules); the worst-case
    # targets are not.
    missed = out.split("Targets missed", 1)[1]
    assert "worst |error|" in missed and "median |error|" not in missed


def test_the_model_beats_the_rule_it_replaced_on_the_same_figures(bench: ModuleType, report) -> None:  # type: ignore[no-untyped-def]
    # The rule before issue 24 (6·P / 8·P FLOPs, one 40 % utilisation) on the same figures:
    # median 29.0 %, worst 104.7 % up to 8k and 1,023 % beyond (the attention it left out).
    # (The rule before could not plan expert parallel: the same figures are the others.)
    same = {r.case.id for r in report.before}
    before, after = bench.summary(report.before), bench.summary([r for r in report.scored if r.case.id in same])
    assert before["n"] == after["n"]
    assert before["median"] > 25.0 and after["median"] < before["median"] / 2
    assert after["worst_short"] < before["worst_short"] and after["worst_long"] < before["worst_long"] / 5


def test_mosaicmls_2023_tables_ran_the_triton_kernel_and_its_2024_table_flash_attention_2(report) -> None:  # type: ignore[no-untyped-def]
    # llm-foundry's submit_benchmarks.py defaults to --attn_impl triton (mosaicml/llm-foundry@
    # b2a43a147); the Jan-2024 sweep.py passes flash for 1b/3b/7b/70b, triton for 13b/30b (5e85bd62d).
    kernels = {s.case.id: s.case.plan.attention for s in report.scored}
    assert kernels["mosaic-a10080gb-amp_bf16-125m-s65536-g8-mb1"] is Attention.FLASH1
    assert kernels["mosaic-h10080gb-amp_bf16-7b-s2048-g256-mb6"] is Attention.SDPA
    assert kernels["mosaic-h10080gb-amp_bf16-13b-s2048-g256-mb16"] is Attention.FLASH1
    # The rule's effect on the record that was 182 % too fast (docs/TRAINING_TIME.md, before).
    worst = {s.case.id: s.error for s in report.scored}
    assert abs(worst["mosaic-a10080gb-amp_bf16-350m-s65536-g8-mb1"]) < 40.0


def test_megatron_deepspeed_waits_for_every_tensor_parallel_all_reduce(report) -> None:  # type: ignore[no-untyped-def]
    # BigScience's 2022 Megatron-DeepSpeed predates Megatron's --tp-comm-overlap (Megatron-Core,
    # Transformer Engine userbuffers, 2023); NeMo's recipes turn it on.
    plans = {s.case.id: s.case.plan for s in report.scored}
    assert not plans["bigscience-prequel-bf16-200b-160gpu"].parallel.tp_overlap
    assert plans["nemo2407-pretrain-gpt3-175b-128gpu"].parallel.tp_overlap


def test_bloom_176b_and_the_prequel_test_models_are_alibi_models(report) -> None:  # type: ignore[no-untyped-def]
    # BLOOM-176B: --position-embedding-type alibi (bigscience-workshop/bigscience@39ed8110482e9
    # train/tr11-176B-ml/README.md L338-341; record bloom-176b-384gpu's alibi_note). The
    # chronicles-prequel logs do not state their position encoding; the slurm script committed the
    # day of their logs (bigscience-workshop/bigscience@217dc6c train/tr11-200B-ml/tr11-200B-ml.slurm,
    # the same layout) passes --position-embedding-type alibi.
    models = {s.case.id: s.case.plan.model for s in report.scored}
    assert models["bloom-176b-384gpu"].alibi
    assert not models["bloom-176b-384gpu"].learned_positions
    assert models["bigscience-prequel-bf16-200b-160gpu"].alibi
    assert models["bigscience-prequel-fp16-20b-8gpu"].alibi


def test_bigscience_runs_are_laid_out_as_jean_zay_and_2022_megatron_deepspeed_ran_them(report) -> None:  # type: ignore[no-untyped-def]
    # Jean Zay's A100 nodes: 4 Omni-Path links per 8 GPUs (bigscience-workshop/bigscience@39ed811
    # jz/hpc-specs.md); Megatron-DeepSpeed in Feb-Mar 2022 had no sequence parallelism (Korthikanti
    # et al., arXiv:2205.05198, May 2022): each pipeline stage sends its whole activation on.
    rows = [r for r in report.scored if r.case.record["source_id"] == "bigscience-bloom"]
    assert len(rows) == 7
    for row in rows:
        parallel = row.case.plan.parallel
        assert parallel.inter_link == "opa-100-4-per-node"
        assert not parallel.sequence_parallel
    others = [r for r in report.scored if r.case.record["source_id"] == "torchtitan"]
    assert all(r.case.plan.parallel.sequence_parallel for r in others)


def test_a_scaling_pair_changes_the_gpu_count_and_nothing_else(bench: ModuleType, report) -> None:  # type: ignore[no-untyped-def]
    # MosaicML's tables pick the largest micro-batch that fits each GPU count (llm-foundry
    # scripts/train/benchmarking/README.md @4952183): 70b on 32 H100s runs micro-batch 2, on 64
    # micro-batch 8. Such a "pair" compares two plans, not two GPU counts.
    refused = {(a, b): why for a, b, why in report.not_pairs}
    why = refused[("mosaic-h10080gb-amp_bf16-70b-s2048-g32-mb2", "mosaic-h10080gb-amp_bf16-70b-s2048-g64-mb8")]
    assert "accumulation 16 vs 4" in why
    assert "micro_batch 1 vs 2" in refused[("nemo2407-pretrain-gpt3-175b-128gpu", "nemo2407-pretrain-gpt3-175b-512gpu")]
    kept = {(a, b) for a, b, _, _ in report.pairs}
    # Strong scaling (the global batch kept, the accumulation halved) is a pair.
    assert ("bigscience-prequel-bf16-200b-80gpu", "bigscience-prequel-bf16-200b-160gpu") in kept
    assert not kept & set(refused)
    assert len(kept) + len(refused) == 63
    by_id = {s.case.id: s.case for s in report.scored}
    assert all(bench.scaling_difference(by_id[a], by_id[b]) is None for a, b in kept)
    # Any two figures can be asked, whatever their layouts (a 64-GPU layout of TP 4 × PP 4 does
    # not fit on 8 GPUs: the rule names the differences, it builds no plan).
    why = bench.scaling_difference(by_id["nemo2407-lora-llama2-70b-8gpu"], by_id["nemo2407-pretrain-llama2-70b-64gpu"])
    assert "method lora vs full" in why and "parallel.tensor_parallel 2 vs 4" in why


def test_a_pair_whose_figures_cannot_both_be_its_plan_is_unlisted_with_the_arithmetic(
    bench: ModuleType, report
) -> None:  # type: ignore[no-untyped-def]
    # MosaicML's A100 40GB 1b rows on 32, 64 and 128 GPUs are one sweep line ("-g 32 64 128
    # --microbatch_size 10 --accum 1", mosaicml/llm-foundry@9fa3ceb9a examples/llm/throughput/
    # sweep.sh L119); its table (README.md @4952183) has 15,555 / 19,001 / 18,647 T/s/GPU: the
    # smallest run 18 % slower per GPU than the larger ones, which no communication cost can make
    # (the same per-GPU work, more bytes and ring steps as the GPU count grows). The H100 760m rows
    # (sweep.sh @5e85bd62d L14, L28-32): 8 GPUs at accumulation 2, 63,147; 16 and 32 at 1, 68,551
    # and 67,971, the one-node run slower though its collectives stay on NVLink.
    data = bench.load()
    unlisted = bench.unlisted_pairs(data)
    by_id = {s.case.id: s for s in report.scored}
    a100 = ("mosaic-a10040gb-bf16-1b-s2048-g32-mb10", "mosaic-a10040gb-bf16-1b-s2048-g64-mb10")
    h100 = ("mosaic-h10080gb-amp_bf16-760m-s2048-g8-mb24", "mosaic-h10080gb-amp_bf16-760m-s2048-g16-mb24")
    assert set(unlisted) == {a100, h100}
    listed = {tuple(p) for p in data["scaling_pairs"]}
    for a, b in unlisted:
        # Each is listed, and would be a scaling pair: the unlisting, not the layout, refuses it.
        assert (a, b) in listed and bench.scaling_difference(by_id[a].case, by_id[b].case) is None
        # The published figures fall as the GPU count falls, the reverse of any communication cost.
        assert by_id[a].published < by_id[b].published
        record = next(u for u in data["unlisted_pairs"] if tuple(u["pair"]) == (a, b))
        assert "sweep.sh" in record["arithmetic"] and "README.md" in record["arithmetic"]
    refused = {(a, b): why for a, b, why in report.not_pairs}
    assert refused[a100].startswith("unlisted") and "18 %" in refused[a100]
    assert refused[h100].startswith("unlisted")
    kept = {(a, b) for a, b, _, _ in report.pairs}
    assert not kept & set(unlisted)
    # Their neighbours of the same recipe stay pairs, and both rows of each stay scored.
    assert ("mosaic-a10040gb-bf16-1b-s2048-g64-mb10", "mosaic-a10040gb-bf16-1b-s2048-g128-mb10") in kept
    assert ("mosaic-h10080gb-amp_bf16-760m-s2048-g16-mb24", "mosaic-h10080gb-amp_bf16-760m-s2048-g32-mb24") in kept
    assert all(x in by_id for pair in unlisted for x in pair)
    # The ratchet: 40 pairs, three outside 3 points: MosaicML's H100 1b g256 -> g512 (3.98, the
    # model's miss: docs/TRAINING_TIME.md "Scaling pairs and data-parallel contention"; 4.2 before
    # NCCL 2.18's 14 us network hop, resources/links.json), and torchtitan's 8B 8 -> 128 GPUs eager (3.5) and
    # compiled (3.2), 2.5 / 2.1 before their Dec-2024 code's foreach AdamW was read (throughput.py _optimizer_plan):
    # its step over an eighth of the model is slower on 8 GPUs than over a 128th on 128, so the model's loss per GPU
    # from 8 to 128 is smaller still than the published 2.7 % (docs/TRAINING_TIME.md, "The optimizer each fitted
    # source ran").
    points = {(a, b): 100 * abs(q - p) for a, b, p, q in report.pairs}
    assert max(points.values()) <= 4.0
    assert {k for k, v in points.items() if v > 3.0} == {
        ("mosaic-h10080gb-amp_bf16-1b-s2048-g256-mb12", "mosaic-h10080gb-amp_bf16-1b-s2048-g512-mb12"),
        ("tt-202412-8b-8gpu-eager", "tt-202412-8b-128gpu-eager"),
        ("tt-202412-8b-8gpu-compile", "tt-202412-8b-128gpu-compile"),
    }


def test_llm_foundrys_shard_grad_op_gathers_once_per_micro_batch_beside_the_compute(report) -> None:  # type: ignore[no-untyped-def]
    # FSDP1's SHARD_GRAD_OP "unshards before the forward, does not reshard them after the forward"
    # (torch/distributed/fsdp/api.py ShardingStrategy): not DeepSpeed's ZeRO-2, whose reduction
    # waits after the backward.
    plans = {s.case.id: s.case.plan for s in report.scored}
    par = plans["mosaic-h10080gb-amp_bf16-1b-s2048-g512-mb12"].parallel
    assert par.strategy is Strategy.FSDP and not par.reshard_after_forward
    assert plans["mosaic-h10080gb-amp_bf16-7b-s2048-g512-mb6"].parallel.reshard_after_forward


def test_weak_scaling_loses_what_the_overlapped_data_parallel_traffic_contends_for(report) -> None:  # type: ignore[no-untyped-def]
    # MosaicML's H100 7b (FULL_SHARD, micro-batch 6) loses 3.4 % per GPU from 128 to 256 GPUs
    # and 4.4 % from 256 to 512; torchtitan's 8b 2.7 % from 8 to 128. With every overlapped
    # gather hidden the model lost none (3.3, 4.3 and 3.2 points off); with NCCL's kernels
    # contending for the SMs they run beside (core.parallel.comm._contended) each is within 3 —
    # torchtitan's within 3.6 since its Dec-2024 foreach AdamW slows the 8-GPU run's step more than the 128-GPU
    # run's (2.5 -> 3.5 points; test_a_pair_whose_figures_cannot_both_be_its_plan_is_unlisted_with_the_arithmetic).
    points = {(a, b): 100 * abs(predicted - published) for a, b, published, predicted in report.pairs}
    for a, b in (
        ("mosaic-h10080gb-amp_bf16-7b-s2048-g128-mb6", "mosaic-h10080gb-amp_bf16-7b-s2048-g256-mb6"),
        ("mosaic-h10080gb-amp_bf16-7b-s2048-g256-mb6", "mosaic-h10080gb-amp_bf16-7b-s2048-g512-mb6"),
        ("mosaic-h10080gb-amp_bf16-3b-s2048-g256-mb8", "mosaic-h10080gb-amp_bf16-3b-s2048-g512-mb8"),
    ):
        assert points[(a, b)] <= 3.0, (a, b)
    assert points[("tt-202412-8b-8gpu-eager", "tt-202412-8b-128gpu-eager")] <= 3.6


def test_metas_grand_teton_h100_is_timed_between_the_sxm_and_nvl_peaks(bench: ModuleType, report) -> None:  # type: ignore[no-untyped-def]
    # pytorch/torchtitan@820504e benchmarks/llama3_h100_202412_torchtitan.md: "96GB HBM2e with 2.4
    # TB/sec peak memory bandwidth", "the default 500W power limit", and (footnote 2) "the actual
    # peak TFLOPs number is between SXM and NVL, and we don't know its exact value". The catalogue's
    # datasheet peaks: h100-sxm 989.4 and h100-nvl 835.5 dense bf16 TFLOP/s (fp8 1978.9 / 1670.5).
    cases = {s.case.id: s.case for s in report.scored}
    meta = bench.card_of(cases["tt-202412-8b-cp8-s262144"])
    assert meta.peak_tflops("bf16") == pytest.approx((989.4 + 835.5) / 2)
    assert meta.peak_tflops("fp8") == pytest.approx((1978.9 + 1670.5) / 2)
    assert meta.memory_bandwidth_gb_s == 2400.0
    # docs/performance.md at 3faaa1a says the same of its 95 GB card (the 405B rows).
    assert bench.card_of(cases["tt-h100-405b-128gpu-float8"]).peak_tflops("bf16") == pytest.approx(912.45)
    # Another source's H100 is the datasheet's SXM card.
    nvidia = bench.card_of(cases["nemo2407-pretrain-gpt3-175b-128gpu"])
    assert nvidia.peak_tflops("bf16") == 989.4 and nvidia.memory_bandwidth_gb_s == 3350


def test_parts_take_a_figures_step_apart_at_the_coefficients_it_is_scored_with(bench: ModuleType, report) -> None:  # type: ignore[no-untyped-def]
    # pytorch/torchtitan@820504e benchmarks/llama3_h100_202412_torchtitan.md Table 2: "FSDP 1, CP 8 | 262144 |
    # 548", one sequence on 8 GPUs, so 262,144 ÷ 8 ÷ 548 = 59.80 s a step.
    lines = bench.parts_lines(report, "tt-202412-8b-cp8-s262144")
    assert lines[0].startswith("tt-202412-8b-cp8-s262144: published 548.0")
    assert "step 59.80 s published" in lines[0]
    seconds = {line[:44].strip(): float(line[44:].split()[0]) for line in lines[1:]}
    # Attention is the step's largest part at 262,144 tokens, and the parts (the optimizer, the exposed and the
    # contended data-parallel traffic with them; no pipeline, no tensor parallel) add up to the predicted step.
    assert next(iter(seconds)) == "attention:hopper/flash"
    assert seconds["pipeline bubble (× the compute)"] == 0.0
    table = report.tables["torchtitan (+ Trainy)"]
    row = next(r for r in report.scored if r.case.id == "tt-202412-8b-cp8-s262144")
    step = bench.predicted_step(bench.prepare(row.case), table)
    summary = [key for key in seconds if " " in key]  # the bubble and the three communication rows
    assert len(summary) == 4
    total = sum(v for k, v in seconds.items() if k not in summary) + seconds["exposed communication, host step"]
    total += seconds["overlapped DP traffic (× dp_contention)"] * bench.coefficient("dp_contention", table)
    assert total == pytest.approx(step, abs=0.01)
    assert bench.parts_lines(report, "no such figure") == []


def test_each_sources_fsdp_reduces_in_the_dtype_its_code_sets(bench: ModuleType) -> None:
    """fms-fsdp's bfSixteen policy (fms-fsdp@4ffb9bd fms_fsdp/policies/mixed_precision.py) and
    composer's PURE mode (composer v0.17.0 mosaic_fsdp_utils.py get_mixed_precision) reduce in
    bf16; composer's DEFAULT reduces in float32. Before, every row reduced in float32."""
    from core.dtypes import MpDtype

    records = bench.load()["figures"]
    wanted = {
        "ibm-fms-fsdp": MpDtype.BF16,
        ("mosaicml-llm-foundry", "PURE"): MpDtype.BF16,
        ("mosaicml-llm-foundry", "DEFAULT"): MpDtype.FP32,
    }
    seen = set()
    for record in records:
        mode = (record.get("co_reported") or {}).get("mp_mode")
        key = record["source_id"] if record["source_id"] == "ibm-fms-fsdp" else (record["source_id"], mode)
        if key not in wanted or record.get("not_comparable_reason"):
            continue
        assert bench.case_of(record).plan.parallel.fsdp_reduce_dtype is wanted[key], record["id"]
        seen.add(key)
    assert seen == set(wanted)
    # TinyLlama: Lightning 2.1.2's "bf16-mixed" FSDP policy (TinyLlama@8148930 requirements.txt;
    # lightning 2.1.2 fabric/plugins/precision/fsdp.py): float32 parameters gathered, bf16 reduce.
    tiny = next(r for r in records if r["source_id"] == "tinyllama")
    layout = bench.case_of(tiny).plan.parallel
    assert (layout.fsdp_param_dtype, layout.fsdp_reduce_dtype) == (MpDtype.FP32, MpDtype.BF16)


def test_torchtune_rows_train_in_pure_bf16_as_its_recipes_build_the_model(bench: ModuleType) -> None:
    """torchtune builds the model under ``training.set_default_dtype(self._dtype)`` with no autocast and
    no FSDP ``MixedPrecisionPolicy`` (pytorch/torchtune@015b39c recipes/full_finetune_distributed.py
    ``_setup_model``); every row's config says ``dtype: bf16``. Before, they were mapped to autocast
    over float32 masters, and their FSDP rows reduced in float32."""
    from core.dtypes import MpDtype
    from core.inputs import Preset

    rows = [r for r in bench.load()["figures"] if r["source_id"] == "torchtune" and not r.get("not_comparable_reason")]
    assert len(rows) == 15
    for record in rows:
        plan = bench.case_of(record).plan
        assert plan.preset is Preset.PURE_BF16, record["id"]
        assert plan.parallel.fsdp_reduce_dtype is MpDtype.BF16, record["id"]


def test_tinyllamas_hand_fused_kernels_are_counted_as_fused_passes(bench: ModuleType, report) -> None:  # type: ignore[no-untyped-def]
    # jzhang38/TinyLlama@8148930 README.md: "fused layernorm. fused swiglu. fused cross entropy loss.
    # fused rotary positional embedding." (FlashAttention's and xformers' kernels, no torch.compile):
    # each reads its inputs and writes its outputs once, the compiled stack's count, not eager's chains.
    row = next(r for r in report.scored if r.case.id == "tinyllama-a100-40g")
    assert row.case.plan.stack is Stack.COMPILE
    # Fast-LLM's Triton kernels (held out) are timed the same way (test_throughput_h80_held_out.py).
    assert bench._FUSED_KERNELS == {"tinyllama": Stack.COMPILE, "fast-llm": Stack.COMPILE}
    # -8.6 % as eager PyTorch (its one row held the eager factor down for every other family); -1.8 %.
    assert abs(row.error) < 2.0


def test_the_cpu_offload_row_is_timed_with_its_host_step(bench: ModuleType, report) -> None:  # type: ignore[no-untyped-def]
    """torchtune's 70B full fine-tune (fsdp_cpu_offload: True, fused AdamW on the CPU; recipes/configs/
    llama3_1/70B_full.yaml) waits for its host optimizer step: 14 B of bf16 state a parameter through the
    DGX A100's node, 2.97 s at its DRAM's rate; under torchrun (OMP_NUM_THREADS=1) each rank's pass runs on
    one thread, 8 × 18 GB/s (core.training.host.HOST_THREAD_STREAM_GBS): 6.86 s of the predicted step."""
    from core.params import param_counts
    from core.training.host import host_step

    row = next(r for r in report.scored if r.case.id == "torchtune-70b-full-finetune-8xa100")
    host = host_step(row.case.plan, param_counts(row.case.plan))
    assert host is not None and host.seconds == pytest.approx(123.47e9 / 18e9, abs=0.01)
    # +17.2 % before the host step (autocast mapping), +14.9 % with it; +38.4 % in pure bf16, its recipe's;
    # +10.0 % with one thread a rank; +11.1 % when the eager passes are counted per kernel (the refit of
    # the eager factor, 0.45 -> 1.02, leaves the other families' Ampere matmul coefficient a little faster).
    assert row.error < 11.8  # 11.2 before the gradient accumulation passes' refit (+11.2 -> +11.7 %)


def test_megatron_bridge_mxfp8_rows_run_the_mxfp8_recipe(bench: ModuleType) -> None:
    # The archive's precision column names the recipe: "MXFP8" (26.02 on) and "FP8-MX" (25.11) are
    # Transformer Engine's MXFP8BlockScaling; "FP8-CS (FP8-MX)" scores the per-tensor figure first
    # (Megatron-Bridge@4ab94dfad docs/performance-summary-archive.md, 25.11 DGX-B200).
    records = {r["id"]: r for r in bench.load()["figures"]}
    mx = records["mbridge-26.04-pretrain-b200-qwen3_30b_a3b-mxfp8-8gpu-tp1pp1cp1-mbs4"]
    assert bench.case_of(mx).plan.float8 is Float8.TE_MXFP8
    assert (
        bench.case_of(records["mbridge-25.11-pretrain-b200-qwen3_30b_a3b-fp8-mx-8gpu-tp1pp1cp1-mbs1"]).plan.float8
        is Float8.TE_MXFP8
    )
    cs = records["mbridge-25.11-pretrain-b200-llama3_8b-fp8-csfp8-mx-8gpu-tp1pp1cp1-mbs2"]
    assert bench.case_of(cs).plan.float8 is Float8.TE_CURRENT


def test_each_source_runs_its_transformer_engine_recipe(bench: ModuleType) -> None:
    # Megatron-Bridge's performance scripts run per-tensor fp8 as current scaling ("fp8_cs" ->
    # bf16_with_fp8_current_scaling_mixed, NVIDIA-NeMo/Megatron-Bridge v0.2.0 .. v0.5.0
    # scripts/performance/utils/precision.py); NeMo 24.07 and Megatron-LM's Llama example run delayed
    # scaling (Megatron-Core's fp8_recipe default "delayed"). Before, every per-tensor row was "te".
    records = {r["id"]: r for r in bench.load()["figures"]}
    assert bench.case_of(records["mbridge-26.04-pretrain-h100-llama3_70b-fp8-64gpu-tp4pp8cp1-mbs1"]).plan.float8 is (
        Float8.TE_CURRENT
    )
    assert bench.case_of(records["nemo2407-pretrain-llama3-8b-8gpu"]).plan.float8 is Float8.TE
    assert bench.case_of(records["megatronlm-llama-llama3-8b-8gpu"]).plan.float8 is Float8.TE


def test_mxfp8_over_per_tensor_fp8_matches_the_archives_pairs(bench: ModuleType) -> None:
    # Not fitted on: the 25.11 DGX-B200 table gives both recipes on one layout, "FP8-CS (FP8-MX)"
    # (Megatron-Bridge@4ab94dfad docs/performance-summary-archive.md): Llama 3 8B 30,624 (29,521)
    # tokens/s a GPU, 1.037 x; Llama 3.1 405B, 1.059 x. The model's MXFP8 step over its
    # per-tensor one on the same plans (the GEMM 1.051 x, the casts 5.87 against 4 bytes, from TE's
    # guide on a B300): 1.049 and 1.059. Before, one Transformer Engine recipe: 1.000.
    for name in ("llama3_8b-fp8-csfp8-mx-8gpu-tp1pp1cp1-mbs2", "llama31_405b-fp8-csfp8-mx-128gpu-tp4pp8cp2-mbs1"):
        record = next(r for r in bench.load()["figures"] if r["id"] == f"mbridge-25.11-pretrain-b200-{name}")
        case = bench.case_of(record)
        mx = dataclasses.replace(case, plan=dataclasses.replace(case.plan, float8=Float8.TE_MXFP8))
        ratio = bench.predicted_step(bench.prepare(mx), FITTED) / bench.predicted_step(bench.prepare(case), FITTED)
        published = record["value"] / record["co_reported"]["alt_in_parentheses_tokens_per_s"]
        # 1.049 / 1.059 -> 1.015 / 1.024 (loosened 0.015 -> 0.04, with the reason) once the per-tensor
        # side runs current scaling at the H200's 6.77 bytes a cast element and both recipes cast their
        # weights once a step: the pair moves away from the published 1.037 / 1.059. TE's guide on the
        # B300 has current scaling dearer still (7.5 bytes), so the archive's MXFP8 is slower than the
        # casts the guide measures explain (docs/TRAINING_TIME.md).
        assert abs(ratio - published) < 0.04, (name, ratio, published)


def test_torchaos_float8_table_is_scored_on_metas_h100_with_torchtitan_and_its_mi300x_rows_listed(
    bench: ModuleType,
    report,  # type: ignore[no-untyped-def]
) -> None:
    # pytorch/ao@36027d82 docs/source/workflows/training.md L56-75: Llama3-8b on 8xH100 and on 8xMI300X,
    # batch 1, 8192 tokens, torch.compile, FSDP2, per-op SAC; bf16 6150, tensorwise 7689.5, rowwise
    # 6768 median tokens/s (H100). The PyTorch team ran it with torchtitan on Meta's H100.
    scored = {s.case.id: s for s in report.scored if s.case.record["source_id"] == "torchao-float8"}
    assert sorted(scored) == [f"torchao-h100-8b-8gpu-compile-{r}" for r in ("bf16", "fp8-rowwise", "fp8-tensorwise")]
    assert scored["torchao-h100-8b-8gpu-compile-fp8-tensorwise"].published == pytest.approx(7689.5)
    assert {s.case.family for s in scored.values()} == {"torchtitan (+ Trainy)"}  # left out together
    for name, recipe in (("bf16", Float8.NONE), ("fp8-rowwise", Float8.ROWWISE), ("fp8-tensorwise", Float8.TENSORWISE)):
        case = scored[f"torchao-h100-8b-8gpu-compile-{name}"].case
        assert (
            case.plan.float8 is recipe
            and case.plan.parallel.gpus_per_node == 8
            and case.plan.parallel.tensor_parallel == 1
            and case.plan.workload.seq_len == 8192
        )
        assert bench.card_of(case).peak_tflops("bf16") == pytest.approx((989.4 + 835.5) / 2)  # Meta's H100
    # The MI300X rows: no coefficients for that card, so listed as not comparable, not scored.
    mi300x = [s for s in report.skipped if s[0].startswith("torchao-mi300x-")]
    assert len(mi300x) == 4 and all("card not modelled" in why for _, _, why in mi300x)


def _held_out_and_fitted(bench: ModuleType):  # type: ignore[no-untyped-def]
    """Every expressible figure prepared, split into the held-out sources' and the others'."""
    cases = []
    for record in bench.load()["figures"]:
        try:
            cases.append(bench.case_of(record))
        except bench.NotExpressible:
            continue
    held = [bench.prepare(c) for c in cases if bench.held_out(c)]
    others = [bench.prepare(c) for c in cases if not bench.held_out(c)]
    return held, others


def test_the_held_out_sources_take_no_part_in_any_fit(bench: ModuleType, report) -> None:  # type: ignore[no-untyped-def]
    # InternLM and VectorLM (issue 24's held-out evidence): no coefficient is tuned on them. The fit
    # with their figures handed in is the fit without them, to the bit, and so are the
    # leave-one-source-out fits (no family of theirs is left out: they are in no family's table).
    held, others = _held_out_and_fitted(bench)
    assert {p.case.record["source_id"] for p in held} == bench.HELD_OUT_SOURCES
    assert bench.fit(others + held) == bench.fit(others) == report.all_sources
    one = next(p for p in held if p.case.record["source_id"] == "internlm")
    assert bench.fit([*others, one]) == report.all_sources
    assert not {r.case.record["source_id"] for r in report.scored} & bench.HELD_OUT_SOURCES
    assert set(report.tables) == {r.case.family for r in report.scored}


def test_the_held_out_sources_are_scored_with_the_all_source_fit(bench: ModuleType, report) -> None:  # type: ignore[no-untyped-def]
    # 22 InternLM figures (doc/en/train_performance.md, the two FLOPS tables: InternLM-7B on 8 to 1024
    # A100 80GB), 18 VectorLM figures (docs/reference_throughput.md: Llama-3-8B on 1, 2, 4 A100 80GB,
    # full-rank and LoRA, 2k to 8k) and 12 FlagPerf figures (PaddlePaddle LLaMA-7B/13B on 8 A100, ZeRO-1/2,
    # TP 2, PP 4); InternLM's 32-figure throughput table ran unpacked samples (pack_sample_into_one=False):
    # listed as not comparable.
    held = {r.case.id: r for r in report.held_out}
    sources = [r.case.record["source_id"] for r in report.held_out]
    assert (
        sources.count("internlm") == 22 and sources.count("vectorlm") == 18 and sources.count("flagperf-paddle") == 12
    )
    unpacked = [s for s in report.skipped if s[1] == "internlm"]
    assert len(unpacked) == 32 and all("pack_sample_into_one=False" in why for _, _, why in unpacked)
    for p in _held_out_and_fitted(bench)[0]:
        step = bench.predicted_step(p, report.all_sources)
        assert held[p.case.id].predicted == pytest.approx(p.case.per_gpu(step))
    # Each row's plan is the source's layout: InternLM ZeRO-1 over 4 accumulated micro-batches, float32
    # masters, flash-attn 1 and its fused loss; VectorLM FSDP1 in pure bf16 with every layer recomputed.
    from core.plan import Preset

    internlm = held["internlm-7b-a100-1024gpu-mb2-mn4-noac"].case.plan
    assert internlm.parallel.strategy is Strategy.ZERO1 and internlm.parallel.nodes == 128
    assert internlm.workload.grad_accum == 4 and internlm.preset is Preset.FP32_AUTOCAST_BF16
    assert internlm.attention is Attention.FLASH1 and internlm.flash_loss and internlm.model.fused_qkv
    # HybridZeroOptimizer's zero_overlap_communication=True: DeepSpeed ZeRO-1's overlap_comm.
    assert internlm.parallel.zero_overlap_comm
    vectorlm = held["vectorlm-llama3-8b-lora-a100x4-s8192-b2"].case.plan
    assert vectorlm.parallel.strategy is Strategy.FSDP and vectorlm.preset is Preset.PURE_BF16
    assert vectorlm.checkpointing and vectorlm.lora.rank == 8 and vectorlm.lora.targets == ("q_proj", "v_proj")
    # Today's scores (docs/TRAINING_TIME.md, "Held-out sources"): recorded, not a target. These five sources' 81
    # figures; Qwen's fine-tuning profile, Answer.AI's note and optimum-benchmark's reports (2026-12-05) and prime-rl's
    # baselines (2026-12-07) have their own tests (test_qwen_*, test_answerai_*, test_optimum_*, test_prime_rl_*).
    five = ("internlm", "vectorlm", "flagperf-paddle", "colossalai", "nanotron")
    s = bench.summary([r for r in report.held_out if r.case.record["source_id"] in five])
    # 10.1 % before InternLM's rows reduced under the backward (parallel.zero_overlap_comm); 7.7 % on these 52
    # before Colossal-AI's three rows and nanotron's 26 joined (test_colossal_ai_*, test_nanotron_*), 10.0 % on the
    # 81 before branch h38ds gave ZeRO plans under 16-bit autocast 16-bit weights and gradients (DeepSpeed's engine
    # cast, core.roles.deepspeed_cast_weights), which InternLM's bf16 model and Paddle's fp16 O2 run too; 8.9 % before
    # an all-reduce across nodes ran as NCCL's tree where its tuner would (core/parallel/comm.py Links.all_reduce);
    # 9.0 % before nanotron's blocks were dealt to its stages by compute (parallel.stage_split, branch h83tput).
    assert s["n"] == 81 and s["median"] == pytest.approx(8.9, abs=0.1)
    paddle = held["flagperf-paddle-llama1-7b-a10080gb-8gpu-tp2pp4-stage1-mb4"].case.plan
    assert paddle.parallel.pipeline_parallel == 4 and paddle.parallel.tensor_parallel == 2
    assert not paddle.parallel.sequence_parallel and paddle.preset is Preset.FP16_AMP
    assert paddle.parallel.stage_split is PipelineSplit.EVEN  # nanotron's split by compute is nanotron's alone


# Colossal-AI's README benchmark table, held out (docs/TRAINING_TIME.md, "Colossal-AI's README table, held out"):
# hpcaitech/ColossalAI@e5fdefa6cfc89341fe52628e51327703c62b0c66 README.md "### Colossal-AI Benchmark", four rows,
# Llama-like 7B and 70B (examples/language/llama/benchmark.py MODEL_CONFIGS) at sequence 4096 on 8 or 16 H200 / B200,
# throughput in samples/s of the whole run. Three are scored; the 70B ZeRO-2 row on H200 is not comparable (its
# published peak is more than the card holds).
COLOSSAL_SCORED = (
    "colossalai-h200-7b-8gpu-zero2-b36",
    "colossalai-b200-7b-8gpu-tp2pp4-zero1-b128",
    "colossalai-b200-70b-16gpu-tp2pp4-zero1-b128",
)
COLOSSAL_NOT_COMPARABLE = "colossalai-h200-70b-16gpu-zero2-b48"


def _colossal(bench: ModuleType) -> dict[str, dict]:  # type: ignore[type-arg]
    return {r["id"]: r for r in bench.load()["figures"] if r["source_id"] == "colossalai"}


def test_colossal_ai_table_is_recorded_with_its_own_tflops_arithmetic(bench: ModuleType) -> None:
    records = _colossal(bench)
    assert sorted(records) == sorted((*COLOSSAL_SCORED, COLOSSAL_NOT_COMPARABLE))
    # The table's TFLOPS/GPU column is Colossal-AI's PerformanceEvaluator Megatron formula with the recompute
    # factor 4 (examples/language/performance_evaluator.py on_step_end, at e5fdefa6): 24 * 4 * b * s * l * h^2
    # * (1 + s/(6h) + V/(16 l h)) per data-parallel rank's batch, over the step and the model-parallel size.
    # Recomputed from the samples/s alone it gives the column within 0.1 %, so -g (checkpointing) was on.
    for r in records.values():
        dims, gpus, dp = r["model_dims"], r["gpus"], r["dp"]
        h, layers, s, b = dims["hidden"], dims["layers"], r["seq_len"], r["co_reported"]["batch_size_per_dp"]
        step = b * dp / r["value"]
        flops = 24 * 4 * b * s * layers * h * h * (1 + s / (6 * h) + dims["vocab"] / (16 * layers * h))
        published = r["co_reported"]["tflops_per_gpu_megatron_formula"]
        assert flops / step / (gpus // dp) / 1e12 == pytest.approx(published, rel=1e-3)
        assert r["checkpointing"] == "full" and r["quote"] and r["location"].startswith("hpcaitech/ColossalAI@e5fdefa6")


def test_colossal_ai_samples_per_second_become_the_step_the_plan_is_timed_against(bench: ModuleType) -> None:
    # 17.13 samples/s with 36 rows on each of 8 data-parallel ranks: 288 / 17.13 = 16.81 s a step.
    case = bench.case_of(_colossal(bench)["colossalai-h200-7b-8gpu-zero2-b36"])
    assert case.observed_step == pytest.approx(36 * 8 / 17.13)
    assert case.per_gpu(case.observed_step) == pytest.approx(17.13 * 4096 / 8)


def test_colossal_ai_rows_are_planned_as_its_plugin_ran_them(bench: ModuleType) -> None:
    records = _colossal(bench)
    zero2 = bench.case_of(records["colossalai-h200-7b-8gpu-zero2-b36"]).plan
    assert zero2.parallel.strategy is Strategy.ZERO2 and zero2.workload.micro_batch == 36
    assert zero2.workload.grad_accum == 1 and zero2.checkpointing and zero2.stack is Stack.EAGER
    # HybridParallelPlugin's overlap_communication=True (hybrid_parallel_plugin.py L1033): reduced under the backward.
    assert zero2.parallel.zero_overlap_comm and zero2.attention is Attention.SDPA
    # reduce_bucket_size = zero_bucket_size_in_m (12) * 1024 * 1024 elements (hybrid_parallel_plugin.py L1030, L1244).
    assert zero2.parallel.zero_bucket_elements == 12 * 1024 * 1024
    pp = bench.case_of(records["colossalai-b200-70b-16gpu-tp2pp4-zero1-b128"]).plan
    assert (pp.parallel.tensor_parallel, pp.parallel.pipeline_parallel, pp.parallel.data_parallel) == (2, 4, 2)
    assert pp.parallel.strategy is Strategy.ZERO1 and not pp.parallel.sequence_parallel
    assert not pp.parallel.tp_overlap and (pp.workload.micro_batch, pp.workload.grad_accum) == (1, 128)
    # Under a pipeline the plugin reduces after the whole schedule (execute_pipeline: optimizer.no_sync(), then
    # sync_dp_grads; hybrid_parallel_plugin.py L1403-1431 at e5fdefa6): nothing hides the reduction.
    assert not pp.parallel.zero_overlap_comm
    assert pp.hardware.gpu == "b200"  # the README's prose, not its GPU column (the record's first assumption)
    with pytest.raises(bench.NotExpressible, match="more than the card holds"):
        bench.case_of(records[COLOSSAL_NOT_COMPARABLE])


def test_colossal_ai_is_held_out_and_scored_with_the_all_source_fit(bench: ModuleType, report) -> None:  # type: ignore[no-untyped-def]
    assert "colossalai" in bench.HELD_OUT_SOURCES
    held = {r.case.id: r for r in report.held_out if r.case.record["source_id"] == "colossalai"}
    assert sorted(held) == sorted(COLOSSAL_SCORED)
    assert not any(r.case.record["source_id"] == "colossalai" for r in report.scored)
    # Today's errors (docs/TRAINING_TIME.md): recorded, not a target; all within the issue's 25 %.
    errors = {k: round(r.error, 1) for k, r in held.items()}
    assert errors == pytest.approx(
        {
            "colossalai-h200-7b-8gpu-zero2-b36": -11.9,
            # The B200 rows' SDPA on cuDNN (planned at 2.14+): -6.9 and +12.6 % at the flash rate before
            # (docs/TRAINING_TIME.md, "Which backend PyTorch's SDPA runs, by release and card").
            "colossalai-b200-7b-8gpu-tp2pp4-zero1-b128": -3.6,
            "colossalai-b200-70b-16gpu-tp2pp4-zero1-b128": 15.2,
        },
        abs=0.15,
    )


# nanotron's README benchmark figure, held out (docs/TRAINING_TIME.md, "nanotron's benchmark figure, held out"):
# huggingface/nanotron@c252843039cc167ff8d6894b87172af4637eb14b docs/benchmark_summary.svg, the Ultra-Scale
# Playbook's best layout per model size (1.34B, 3.57B, 8.86B, 80B) and node count (1 to 64 nodes of 8 H100), its MFU
# and memory: 26 cells (the 80B on 1 and 2 nodes has none). Sequence 4096, 1M-token steps
# (scripts/scaling_benchmarks.py).
NANOTRON_1N_1B = "nanotron-h100-1p34b-1n-dp4tp1pp2-gas16-mbs4-zero1"


def _nanotron(bench: ModuleType) -> dict[str, dict]:  # type: ignore[type-arg]
    return {r["id"]: r for r in bench.load()["figures"] if r["source_id"] == "nanotron"}


def test_nanotron_figure_is_recorded_cell_by_cell_with_its_layouts(bench: ModuleType) -> None:
    records = _nanotron(bench)
    assert len(records) == 26
    sizes = [r["model_dims"]["params"] for r in records.values()]
    # estimate_num_params (scripts/scaling_benchmarks.py) gives the chart's labels 1.34, 3.57, 8.86 and 80.0 (billions).
    assert sorted({round(p / 1e9, 2) for p in sizes}) == [1.34, 3.57, 8.86, 79.99]
    for r in records.values():
        # Every cell's layout fills its nodes of 8 and makes 256 sequences of 4096 tokens (~1M) a step.
        assert r["dp"] * r["tp"] * r["pp"] == r["gpus"] == 8 * r["nodes"]
        assert r["dp"] * r["grad_accum"] * r["micro_batch"] == 256 and r["seq_len"] == 4096
    # The 1-node 1.34B cell: 'DP: 4 TP: 1 PP: 2', 'GAS: 16 MBS: 4', 'ZeRO-1', MFU 44.32, 41.76GB.
    one = records[NANOTRON_1N_1B]
    assert one["value"] == 44.32 and one["co_reported"]["memory"] == "41.76GB"


def test_nanotron_mfu_becomes_tokens_per_second_by_the_sources_flops(bench: ModuleType) -> None:
    # src/nanotron/models/llama.py get_flops (c2528430): 3 x (l(8h^2 + 6hf + 4sh) + 2hV) a token for MHA; the
    # 1.34B: 16 layers x 2048, ffn 8192, vocab 131072, s 4096.
    record = _nanotron(bench)[NANOTRON_1N_1B]
    per_token = 3 * (16 * (8 * 2048**2 + 6 * 2048 * 8192 + 4 * 4096 * 2048) + 2 * 2048 * 131072)
    assert record["source_flops_per_token"] == per_token
    case = bench.case_of(record)
    assert case.per_gpu(case.observed_step) == pytest.approx(44.32 / 100 * 989e12 / per_token)
    ours, theirs = bench.source_flops(case)
    assert ours == pytest.approx(theirs, rel=1e-3)  # the plan's model is nanotron's: tied, SwiGLU at ffn 4·d


def test_nanotron_rows_are_planned_as_its_trainer_ran_them(bench: ModuleType) -> None:
    records = _nanotron(bench)
    small = bench.case_of(records[NANOTRON_1N_1B]).plan
    # The 1.34B is SwiGLU with an ffn of exactly 4·d (model_dims.gated), tied (intermediate_size < 10,000), with
    # nanotron's merged qkv_proj and gate_up_proj (models/llama.py L384, L223).
    assert small.model.gated_mlp and small.model.tie_embeddings and small.model.fused_qkv and small.model.fused_gate_up
    assert small.parallel.strategy is Strategy.ZERO1 and small.parallel.zero_overlap_comm  # helpers.py L432-434
    # One reduce-scatter per DDP bucket: ddp_bucket_cap_mb 25 (MiB) of float32 gradients (trainer.py L851).
    assert small.parallel.zero_bucket_elements == 25 * 1024 * 1024 // 4
    assert (small.parallel.pipeline_parallel, small.workload.grad_accum, small.workload.micro_batch) == (2, 16, 4)
    # build_model deals the blocks by compute cost (src/nanotron/models/base.py L190-237): layer 4h² + 3fh =
    # 67,108,864, head Vh = 268,435,456, half the total 671,088,640 reached after the 10th layer but not exceeded,
    # so the 11th goes to the first rank too: 11 blocks, then 5 with the head (core.pipeline).
    assert small.parallel.stage_split is PipelineSplit.COMPUTE
    assert [(s.layers, s.head) for s in layout(small).stages] == [(11, False), (5, True)]
    assert small.stack is Stack.EAGER and not small.checkpointing and small.attention is Attention.SDPA
    tp = bench.case_of(records["nanotron-h100-8p86b-32n-dp32tp8pp1-gas1-mbs8-zero0"]).plan
    # tp_mode REDUCE_SCATTER with tp_linear_async_communication: sequence parallel, the all-gather beside the matmul.
    assert tp.parallel.sequence_parallel and tp.parallel.tp_overlap and tp.parallel.strategy is Strategy.DDP
    assert not tp.model.tie_embeddings


def test_nanotron_is_held_out_and_scored_with_the_all_source_fit(bench: ModuleType, report) -> None:  # type: ignore[no-untyped-def]
    assert "nanotron" in bench.HELD_OUT_SOURCES
    held = {r.case.id: r for r in report.held_out if r.case.record["source_id"] == "nanotron"}
    assert len(held) == 26 and not any(r.case.record["source_id"] == "nanotron" for r in report.scored)
    # Today's scores (docs/TRAINING_TIME.md): recorded, not a target. The one-node 1.34B reads 29 % slow (the eager
    # stack's elementwise passes and matmul rate against nanotron's fused kernels); the 64-node 1.34B, one 2048-token
    # micro-batch a GPU a step, reads 1.7 times fast (+154.2 % before its ZeRO-1 reduced in 25 MiB buckets; -33.1 and
    # +79.7 % and a median of 18.3 % before branch h38ds's 16-bit ZeRO weights and gradients; -32.5 and +88.4 %, median
    # 15.8 %, before branch h83tput dealt nanotron's blocks to its stages by compute, 11 + 5 and the head, not 8 + 8).
    assert held[NANOTRON_1N_1B].error == pytest.approx(-28.7, abs=0.15)
    assert held["nanotron-h100-1p34b-64n-dp128tp2pp2-gas1-mbs2-zero1"].error == pytest.approx(68.3, abs=0.15)
    # The 8.86B on one node, PP 4: 9 / 9 / 8 / 6 blocks and the head (-23.0 % split 8 / 8 / 8 / 8).
    assert held["nanotron-h100-8p86b-1n-dp2tp1pp4-gas128-mbs1-zero1"].error == pytest.approx(-14.7, abs=0.15)
    # The 8.86B's DDP over 128 ranks on 64 nodes: its 338 buckets as NCCL's tree, which its tuner would pick
    # (core/parallel/comm.py Links.all_reduce), −50.3 % when every bucket paid the ring's 254 steps.
    assert held["nanotron-h100-8p86b-64n-dp128tp4pp1-gas1-mbs2-zero0"].error == pytest.approx(-3.9, abs=0.15)
    s = bench.summary(list(held.values()))
    assert s["median"] == pytest.approx(15.7, abs=0.1)


# Qwen's (v1) README, "Profiling of Memory and Speed" (QwenLM/Qwen@2df8e8ac450fa185c421a08b0090ef81826caa6e, table since
# e8e15962, 2023-11-30; docs/TRAINING_TIME.md, "Qwen's fine-tuning profile, held out"): finetune.py (Hugging Face
# Trainer + PEFT) on one A100-SXM4-80G, batch 1 x accumulation 8, sequence 256 to 8192, s/it a cell. 81 cells; the 18
# LoRA cells of the 1.8B, 7B and 14B on one GPU are scored, the rest are listed with what the plan cannot express.
QWEN = "qwen-finetune-profile"


def _qwen(bench: ModuleType) -> dict[str, dict]:  # type: ignore[type-arg]
    return {r["id"]: r for r in bench.load()["figures"] if r["source_id"] == QWEN}


def test_qwen_profile_is_recorded_cell_by_cell(bench: ModuleType) -> None:
    records = _qwen(bench)
    # 14 rows x 6 lengths, less the 7B full-parameter row's three '-' cells (2,048 to 8,192: out of memory).
    assert len(records) == 14 * 6 - 3
    for r in records.values():
        # Every sample right-padded to model_max_length (finetune.py L165): 8 micro-batches of seq_len tokens a step.
        assert r["micro_batch"] == 1 and r["grad_accum"] == 8 and r["metric"] == "step_time_s"
        assert r["global_batch_tokens"] == 8 * r["dp"] * r["seq_len"]
        assert r["value"] == float(r["quote"].split(" / ")[1].split("s/it")[0])
    # The README's 7B LoRA cell at 8192: '36.6G / 21.3s/it', 65,536 tokens a step: 3,077 tokens/s.
    seven = records["qwen-7b-lora-a100x1-s8192"]
    assert seven["value"] == 21.3 and seven["derived"]["tokens_per_s_per_gpu"] == pytest.approx(65536 / 21.3, abs=0.1)
    scored = sorted(i for i, r in records.items() if not r["not_comparable_reason"])
    # LoRA and, since branch h60mts (PEFT's modules_to_save in the plan), LoRA (emb).
    lora = [f"qwen-{m}-lora{e}-a100x1-s{s}" for m in ("1p8b", "7b", "14b") for s in QWEN_LENGTHS for e in ("", "-emb")]
    assert scored == sorted(lora)


QWEN_LENGTHS = (256, 512, 1024, 2048, 4096, 8192)


def test_qwen_rows_the_plan_cannot_express_say_why(report) -> None:  # type: ignore[no-untyped-def]
    why = [w for _, source, w in report.skipped if source == QWEN]
    # Q-LoRA: a GPTQ int4 base (GPTQConfig, finetune.py L313), not bitsandbytes; full and 72B LoRA: DeepSpeed
    # ZeRO-3; LoRA (multinode): two nodes of two GPUs. LoRA (emb), modules_to_save wte / lm_head, is scored since
    # branch h60mts (test_qwen_lora_emb_rows_train_both_copies_and_are_scored_held_out).
    assert len(why) == 81 - 36
    assert sum("modules_to_save" in w for w in why) == 0 and sum("GPTQ" in w for w in why) == 24
    assert sum("ZeRO-3" in w for w in why) == 9 + 6 and sum("two servers" in w for w in why) == 6


def test_qwen_rows_are_planned_as_finetune_py_ran_them(bench: ModuleType) -> None:
    from core.plan import OptimizerImpl, Preset

    plan = bench.case_of(_qwen(bench)["qwen-7b-lora-a100x1-s2048"]).plan
    # finetune.py's LoraArguments: r 64, alpha 16, dropout 0.05, c_attn / c_proj / w1 / w2 = every linear (L53-58).
    assert (plan.lora.rank, plan.lora.alpha, plan.lora.dropout) == (64, 16.0, 0.05) and len(plan.lora.targets) == 7
    # Qwen's remote code casts the model to bf16; --bf16 True: Trainer(bf16=True) on a bf16 model. adamw_torch (L42):
    # torch's foreach AdamW in PyTorch 2.0; Trainer's max_grad_norm 1.0; flash-attn 2; --gradient_checkpointing.
    assert plan.preset is Preset.TRAINER_BF16 and plan.optimizer_impl is OptimizerImpl.FOREACH and plan.grad_clip
    assert plan.attention is Attention.FLASH and plan.checkpointing and plan.stack is Stack.EAGER
    # c_attn: one fused q/k/v linear with bias (modeling_qwen.py QWenAttention); Qwen-7B's 7.72 billion parameters.
    assert plan.model.fused_qkv and plan.model.qkv_bias and not plan.model.tie_embeddings
    assert plan.model.architecture_params() == pytest.approx(7.72e9, rel=0.005)
    assert (plan.workload.micro_batch, plan.workload.grad_accum, plan.workload.seq_len) == (1, 8, 2048)


def test_qwen_is_held_out_and_scored_with_the_all_source_fit(bench: ModuleType, report) -> None:  # type: ignore[no-untyped-def]
    assert QWEN in bench.HELD_OUT_SOURCES
    held = {r.case.id: r for r in report.held_out if r.case.record["source_id"] == QWEN}
    assert len(held) == 36 and not any(r.case.record["source_id"] == QWEN for r in report.scored)
    held = {i: r for i, r in held.items() if "-emb-" not in i}  # the 18 LoRA rows (LoRA (emb): the next test)
    # Today's scores (docs/TRAINING_TIME.md): recorded, not a target. From 512 tokens up the 7B and 14B read within
    # 8 %; the short runs, +421.5 % (1.8B) and +53.4 % (7B) at 256 tokens while the time model counted no host time
    # for a dense eager plan, are paced by the host issuing its kernels (core.training.speed.eager_host_kernels:
    # 309 a block of 5 adapted linears, checkpointed, × 15.5 µs from the serving fit; branch h54host), and the
    # embedding, head and loss kernels of each micro-batch (40 for a frozen base: eager_outside_kernels, branch h55step:
    # 8.7 → 7.9 % and −2.3 → −3.0 %).
    assert bench.summary(list(held.values()))["median"] == pytest.approx(6.2, abs=0.1)
    assert all(abs(held[f"qwen-{m}-lora-a100x1-s{s}"].error) < 8.0 for m in ("7b", "14b") for s in QWEN_LENGTHS[1:])
    assert held["qwen-1p8b-lora-a100x1-s256"].error == pytest.approx(7.9, abs=0.15)
    assert held["qwen-7b-lora-a100x1-s256"].error == pytest.approx(-3.0, abs=0.15)


def test_qwen_lora_emb_rows_train_both_copies_and_are_scored_held_out(bench: ModuleType, report) -> None:  # type: ignore[no-untyped-def]
    from core.inputs import ModulesToSave

    # finetune.py L331-334: a base (not Chat) model trains modules_to_save ["wte", "lm_head"] beside the adapters.
    plan = bench.case_of(_qwen(bench)["qwen-7b-lora-emb-a100x1-s2048"]).plan
    assert plan.lora.modules_to_save is ModulesToSave.BOTH and plan.lora.rank == 64
    held = {r.case.id: r for r in report.held_out if "-lora-emb-" in r.case.id}
    # Today's scores (branch h60mts, docs/TRAINING_TIME.md): recorded, not a target. The 18 cells as their LoRA
    # rows read: the 7B and 14B within 12.3 %, the 1.8B's long runs fast by up to 23.5 % (its LoRA rows: 24.5 %).
    assert len(held) == 18
    assert bench.summary(list(held.values()))["median"] == pytest.approx(7.25, abs=0.1)
    assert all(abs(held[f"qwen-{m}-lora-emb-a100x1-s{s}"].error) < 12.5 for m in ("7b", "14b") for s in QWEN_LENGTHS)
    assert held["qwen-7b-lora-emb-a100x1-s512"].error == pytest.approx(0.0, abs=0.15)


def test_qwens_short_runs_take_the_same_time_a_block_whatever_the_models_size(bench: ModuleType) -> None:
    # At 256 tokens the published step is 1.0 / 1.2 / 1.6 s for 24 / 32 / 40 blocks: 5.2 / 4.7 / 5.0 ms a block a
    # micro-batch, though the 14B's block holds 6.3 times the 1.8B's weights. Time a block, not its FLOPs: the host
    # issuing eager PyTorch's kernels (PEFT's adapters, the recomputed forward), which the time model now counts
    # (core.training.speed.eager_host_kernels, from kernel counts and the serving fit, not from these figures).
    short = [_qwen(bench)[f"qwen-{m}-lora-a100x1-s256"] for m in ("1p8b", "7b", "14b")]
    per_block = [r["value"] / (8 * r["model_dims"]["layers"]) for r in short]
    assert all(4.5e-3 < t < 5.5e-3 for t in per_block), per_block


# Answer.AI's "Benchmarking QLoRA+FSDP" (AnswerDotAI/fsdp_qlora@05ed9f2a60f96a0795cb082bceab70a9b19fd213
# benchmarks_03_2024.md, run Feb-Mar 2024 with train.py as of d7818ec8; docs/TRAINING_TIME.md, "Answer.AI's
# fsdp_qlora note, held out"): 1,024 fixed-length dummy samples a run, the run's seconds a cell. 33 cells: the 2x RTX
# 3090 rig's 13 and the one run with activation offload are listed, 19 are scored.
ANSWERAI = "answerai-fsdp-qlora"


def _answerai(bench: ModuleType) -> dict[str, dict]:  # type: ignore[type-arg]
    return {r["id"]: r for r in bench.load()["figures"] if r["source_id"] == ANSWERAI}


def test_answerai_note_is_recorded_as_tokens_over_the_runs_seconds(bench: ModuleType) -> None:
    records = _answerai(bench)
    assert len(records) == 33
    for r in records.values():
        # --dataset dummy --dataset_samples 1024: every sample truncated to context_length tokens.
        assert r["derived"]["tokens"] == 1024 * r["seq_len"]
        assert r["value"] == pytest.approx(r["derived"]["tokens"] / r["co_reported"]["time_s"], abs=0.01)
    # The note's own check: Mistral 7B v0.2 at 24,576 tokens, 7,809 s on two 4090s, '1,615 tokens/second' a GPU.
    mistral = records["answerai-4090ws-mistral-7b-v0p2-qlora-fsdp-offload-2x4090-b1-s24576"]
    assert mistral["derived"]["tokens_per_s_per_gpu"] == pytest.approx(1615, rel=0.005)
    rig = [r for r in records.values() if r["gpu_catalogue_id"] == "rtx-3090"]
    assert len(rig) == 13 and all("power limited to 280W" in r["not_comparable_reason"] for r in rig)


def test_answerai_rows_are_planned_as_train_py_ran_them(bench: ModuleType) -> None:
    from core.plan import Method, OptimizerImpl, Preset, Quant

    records = _answerai(bench)
    qlora = bench.case_of(records["answerai-4090ws-llama2-7b-qlora-fsdp-offload-2x4090-b12-s2048"]).plan
    # --precision bf16: a bf16 model, no MixedPrecision policy; AdamW(fused=False); LoRA r 64, alpha 16, dropout 0.1 on
    # k/q/v/up/down/gate (train.py L528-531, L459-461, L965-968, L1000-1001); Linear4bit NF4; CPUOffload.
    assert qlora.method is Method.QLORA and qlora.quant is Quant.NF4 and qlora.preset is Preset.PURE_BF16
    assert qlora.optimizer_impl is OptimizerImpl.FOREACH and not qlora.grad_clip and qlora.checkpointing
    assert (qlora.lora.rank, qlora.lora.alpha, qlora.lora.dropout) == (
        64,
        16.0,
        0.1,
    ) and "o_proj" not in qlora.lora.targets
    assert qlora.parallel.strategy is Strategy.FSDP and qlora.parallel.offload.value == "params"
    ddp = bench.case_of(records["answerai-4090ws-llama2-7b-lora-ddp-2x4090-b4-s2048"]).plan
    assert ddp.parallel.strategy is Strategy.DDP and ddp.method is Method.LORA and ddp.workload.micro_batch == 4
    # The hardware table's 70B runs aim at an effective batch of 32: 4 H100 x 8 is one micro-batch a step.
    h100 = bench.case_of(records["answerai-cloud-llama2-70b-qlora-fsdp-4xh100-b8-s2048"]).plan
    assert h100.workload.grad_accum == 1 and h100.parallel.gpus_per_node == 4


def test_answerai_is_held_out_and_scored_with_the_all_source_fit(bench: ModuleType, report) -> None:  # type: ignore[no-untyped-def]
    assert ANSWERAI in bench.HELD_OUT_SOURCES
    held = {r.case.id: r for r in report.held_out if r.case.record["source_id"] == ANSWERAI}
    assert len(held) == 19 and not any(r.case.record["source_id"] == ANSWERAI for r in report.scored)
    # Today's scores (docs/TRAINING_TIME.md): recorded, not a target. Every two-4090 run at 2,048 tokens (7B LoRA and
    # QLoRA, DDP and FSDP, offloaded or not; Yi 34B; Llama-2 70B offloaded) within 7 %.
    on_4090 = [r for i, r in held.items() if "-2x4090-" in i and i.endswith("-s2048")]
    assert len(on_4090) == 10 and all(abs(r.error) < 7.0 for r in on_4090)
    assert bench.summary(list(held.values()))["median"] == pytest.approx(6.4, abs=0.1)
    # The two RTX 6000 Ada rows read 2.5 times fast (docs/TRAINING_TIME.md: not explained by the card's datasheet
    # rates nor by its PCIe traffic, which the plan times).
    # 146.7 -> 146.9 % with the refit on the fitted sources' optimizers as they ran (throughput.py _optimizer_plan).
    assert held["answerai-cloud-llama2-70b-qlora-fsdp-2x6000ada-b2-s2048"].error == pytest.approx(146.9, abs=0.15)


# Hugging Face optimum-benchmark's examples/training-llamas reports (huggingface/optimum-benchmark@3c753205,
# A100-SXM4-80GB, Dec 2023; @6052c978, RTX 4090, Aug 2023; docs/TRAINING_TIME.md, "optimum-benchmark's Trainer runs,
# held out"): Trainer on Llama-2 7B / 13B at 256 tokens, batch 1 to 16, samples/s over the steady steps. 39 rows; the
# 11 GPTQ rows are listed.
OPTIMUM = "hf-optimum-benchmark-llamas"


def test_optimum_benchmark_reports_are_recorded_row_by_row(bench: ModuleType) -> None:
    records = {r["id"]: r for r in bench.load()["figures"] if r["source_id"] == OPTIMUM}
    assert len(records) == 39 and sum(1 for r in records.values() if r["not_comparable_reason"]) == 11
    # full_report.csv (Llama-2-7b-hf, row 0): fp16+peft at batch 16, training.throughput(samples/s) 17.61553393108114.
    peft = records["optimum-bench-a100-llama2-7b-peft-b16"]
    assert peft["value"] == pytest.approx(17.6155, abs=1e-4) and peft["seq_len"] == 256
    case = bench.case_of(peft)
    assert case.per_gpu(case.observed_step) == pytest.approx(17.6155 * 256, rel=1e-4)
    # The RTX 4090's runs loaded real weights: experiments/RTX4090-24GB/*/hydra_config.yaml at 6052c978 set
    # ``no_weights: false`` (model meta-llama/Llama-2-7b-hf, TheBloke/Llama-2-7B-GPTQ); the A100 reports of 3c753205
    # ran ``no_weights: true`` (randomised 16-bit weights; bitsandbytes' left as loaded). The records say which.
    for rid, record in records.items():
        said = [a for a in record["assumptions"] if a.startswith("model: no_weights")]
        assert len(said) == 1 and said[0].startswith(f"model: no_weights {'false' if '4090' in rid else 'true'}"), rid


def test_optimum_benchmark_rows_are_planned_as_its_trainer_ran_them(bench: ModuleType) -> None:
    from core.plan import OptimizerImpl, Quant

    records = {r["id"]: r for r in bench.load()["figures"] if r["source_id"] == OPTIMUM}
    plan = bench.case_of(records["optimum-bench-4090-llama2-7b-bnb-b4"]).plan
    # BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=float16): transformers' fp4 default, no double quant;
    # PEFT's default Llama targets at r 8; Trainer's adamw_torch and clipping; 4.33's eager attention; no checkpointing.
    assert plan.quant is Quant.FP4 and not plan.double_quant and plan.lora.targets == ("q_proj", "v_proj")
    assert plan.lora.rank == 8 and plan.optimizer_impl is OptimizerImpl.FOREACH and plan.grad_clip
    assert plan.attention is Attention.EAGER and not plan.checkpointing and plan.workload.micro_batch == 4


def test_optimum_benchmark_is_held_out_and_scored_with_the_all_source_fit(bench: ModuleType, report) -> None:  # type: ignore[no-untyped-def]
    assert OPTIMUM in bench.HELD_OUT_SOURCES
    held = {r.case.id: r for r in report.held_out if r.case.record["source_id"] == OPTIMUM}
    assert len(held) == 28 and not any(r.case.record["source_id"] == OPTIMUM for r in report.scored)
    # Today's scores (docs/TRAINING_TIME.md): recorded, not a target. The full 7B row read +118 % at batch 1 (not host
    # bound by the kernel count: 146 a block × 15.5 µs = 72 ms of its published 297 ms step) until the optimizer step
    # was timed as torch's foreach AdamW runs it with clipping: 21 passes of 2 B over 6.7e9 parameters, not the fused
    # count's 7 (core.training.speed.step_pass_bytes, branch h55step): +26.4 % at batch 1, within 7 % from batch 2.
    # LoRA's +69.4 % fell to +23.7 % with the host's pace (177 kernels a block, eager attention, no recompute: 2.7 ms
    # of the published 3.4 ms a block; branch h54host), +22.6 % with the embedding, head and loss kernels (h55step);
    # the RTX 4090's 4-bit rows read slow.
    # 12.40 -> 12.43 % with TE's context-parallel ring under Megatron: the all-source refit (Hopper's fused attention
    # coefficient 1.816 -> 1.808), not a rule of these rows.
    assert bench.summary(list(held.values()))["median"] == pytest.approx(12.4, abs=0.1)
    assert held["optimum-bench-a100-llama2-7b-full-b1"].error == pytest.approx(26.4, abs=0.15)
    assert all(abs(held[f"optimum-bench-a100-llama2-7b-full-b{b}"].error) < 7.0 for b in (2, 4, 8, 16))
    assert held["optimum-bench-a100-llama2-7b-peft-b1"].error == pytest.approx(22.6, abs=0.15)
    assert held["optimum-bench-a100-llama2-7b-peft-bnb-4bit-b4"].error == pytest.approx(-0.2, abs=0.15)
    assert held["optimum-bench-4090-llama2-7b-bnb-b4"].error == pytest.approx(-22.1, abs=0.15)


def test_each_fitted_source_runs_the_optimizer_its_code_ran(bench: ModuleType, report) -> None:  # type: ignore[no-untyped-def]
    # docs/TRAINING_TIME.md, "The optimizer each fitted source ran"; throughput.py _optimizer_plan cites each line.
    plans = {s.case.id: s.case.plan for s in report.scored}

    def settings(record_id: str) -> tuple[OptimizerImpl, bool, float]:
        plan = plans[record_id]
        return plan.optimizer_impl, plan.grad_clip, plan.weight_decay

    # torchtitan 9dec370a (Dec 2024) optimizer.py: fused=job_config.optimizer.fused (False unless given), foreach=not
    # fused, weight_decay 0.1; training.max_norm 1.0. 1ea476e9 (Apr 2024) train.py: foreach=True.
    assert settings("tt-202412-8b-8gpu-eager") == (OptimizerImpl.FOREACH, True, 0.1)
    assert settings("tt-a100-llama3-8b-op-sac") == (OptimizerImpl.FOREACH, True, 0.1)
    assert settings("tt-h100-405b-128gpu-none") == (OptimizerImpl.FOREACH, True, 0.1)
    # From 6e498855 (2025-02-24) implementation = "fused": the asyncTP file's, Trainy's and torchao's runs.
    assert settings("tt-asynctp-8b-64gpu-bf16-vanilla") == (OptimizerImpl.FUSED, True, 0.1)
    assert settings("trainy-h200-8b-32gpu") == (OptimizerImpl.FUSED, True, 0.1)
    assert settings("torchao-h100-8b-8gpu-compile-bf16") == (OptimizerImpl.FUSED, True, 0.1)
    # composer's DecoupledAdamW loops over the parameters; the MPT yamls: weight_decay 0.0, clipping norm 1.0.
    assert settings("mosaic-h10080gb-amp_bf16-70b-s2048-g512-mb8") == (OptimizerImpl.FORLOOP, True, 0.0)
    assert settings("tinyllama-a100-40g") == (OptimizerImpl.FORLOOP, True, 0.1)  # AdamW(..., foreach=False)
    assert settings("fms-eager-7b-a100-128gpu") == (OptimizerImpl.FOREACH, True, 0.1)
    assert settings("olmocore-h100-1b") == (OptimizerImpl.FOREACH, True, 0.1)
    # Megatron's fused Adam and conditional clipping: not mapped (the plan's defaults).
    assert settings("nemo2407-pretrain-llama3-8b-8gpu") == (OptimizerImpl.FUSED, False, 0.0)


def test_the_fused_optimizer_gains_no_more_than_torchtitan_measured(bench: ModuleType, report) -> None:  # type: ignore[no-untyped-def]
    # pytorch/torchtitan@6e498855 (#881, "use Fused AdamW as default"): fused over foreach AdamW on Llama 8B, FSDP
    # eager +2.24 %, FSDP compiled +1.63 %. The model's gain on the 202412 file's 8-GPU rows is below both: its foreach
    # step at the bandwidth is a floor (docs/TRAINING_TIME.md, "The optimizer each fitted source ran").
    by_id = {s.case.id: s for s in report.scored}
    for record_id, measured in (("tt-202412-8b-8gpu-eager", 2.24), ("tt-202412-8b-8gpu-compile", 1.63)):
        case = by_id[record_id].case
        fused = dataclasses.replace(case, plan=case.plan.with_changes(optimizer_impl=OptimizerImpl.FUSED))
        speeds = [c.per_gpu(bench.predicted_step(bench.prepare(c), FITTED)) for c in (case, fused)]
        gain = 100 * (speeds[1] / speeds[0] - 1)
        assert 0.5 < gain < measured, record_id
