"""The PyTorch release and TORCH_NCCL_AVOID_RECORD_STREAMS as plan settings (issue 22,
core.parallel.state._release_cache; docs/REAL_GPU_MEMORY.md "The PyTorch release and
TORCH_NCCL_AVOID_RECORD_STREAMS").

Sources, read in PyPI's torch wheels (each wheel's torch/version.py names its commit):
- torch 2.4.0 (e4ee3be) ``torch/distributed/_composable/fsdp/_fsdp_collectives.py``
  ``foreach_reduce`` allocates the reduce-scatter input inside
  ``with torch.cuda.stream(reduce_scatter_stream)``; torch 2.7.1 (e2d141d)
  ``torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py`` allocates it on the current stream
  before ``reduce_scatter_stream.wait_stream(current_stream)`` (2.5.0 32f585d and 2.6.0 2236df1
  the same, read by branch h22g);
- the 2.4.0 and 2.7.1 wheels' ``torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp``:
  ``avoidRecordStreams_ = false`` unless TORCH_NCCL_AVOID_RECORD_STREAMS is set ("If set,
  ProcessGroupNCCL doesn't use recordStream calls"); the 2.8.0 wheel's (a1cb3cc) adds the
  ``TensorShelf`` stash and the ``asyncOp`` argument, and PyTorch then warns that the variable "is
  the default now" (torchtitan 681c66f drops it for that reason).
Llama 3.2 1B's shapes from its config.json (hidden 2,048, intermediate 8,192, 8 KV heads of 64)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.cli.app import main
from core.estimate import Estimate, estimate
from core.files import planfile
from core.files.launch import Target, export
from core.files.launch.accelerate import read_accelerate_launch
from core.files.launch.torchrun import read_torchrun
from core.inputs import input_at
from core.plan import Method, Plan, Preset, Strategy, TorchVersion
from core.presets import default_plan, plan_for_model
from tests.scripts import load_script

# Llama 3.2 1B (config.json): one block = q, o 2,048² + k, v 2,048 × 512 + gate, up, down
# 2,048 × 8,192 + two norms; its reduce-scatter input in bf16 (the policy unset: the gradients').
BLOCK = 2 * 2_048 * 2_048 + 2 * 2_048 * 512 + 3 * 2_048 * 8_192 + 2 * 2_048
INPUT_BYTES = BLOCK * 2
DEFAULT_STREAM = (
    "default stream's cache: the previous block's reduce-scatter input, held until its reduce-scatter ends "
    "(record_stream, torch 2.5-2.7)"
)
RS_INPUT = "reduce-scatter stream's cache: reduce-scatter input (one block, torch 2.4)"
RS_RECORDED = (
    "reduce-scatter stream's cache: the previous block's input, held for its reduce-scatter (record_stream, torch 2.4)"
)
FOLDER = Path(__file__).resolve().parents[2] / "benchmarks" / "realgpu"


def _fsdp(release: TorchVersion = TorchVersion.V2_14, avoid: bool = False, **parallel: object) -> Plan:
    plan = plan_for_model("llama-3.2-1b").with_changes(preset=Preset.TRAINER_BF16)  # bf16 weights and gradients
    plan = plan.with_workload(micro_batch=2, seq_len=2048).with_method(Method.FULL).on_gpus(8, Strategy.FSDP)
    if parallel:
        plan = plan.with_parallel(**parallel)
    return plan.with_input("hardware.torch_version", release).with_input("hardware.nccl_avoid_record_streams", avoid)


def _reserve(est: Estimate) -> dict[str, float]:
    return {t.label: t.bytes for t in est.buckets[-1].terms}


def test_the_default_is_the_newest_release_and_the_variable_changes_nothing_there() -> None:
    plan = _fsdp()
    assert plan.hardware.torch_version is TorchVersion.V2_14 and not plan.hardware.nccl_avoid_record_streams
    assert input_at("hardware.torch_version").default is TorchVersion.V2_14
    # 2.8 stashes (or runs on the current stream) instead of record_stream: setting it only warns; 2.14 keeps it
    # (the 2.14.1 wheel's _fully_shard files differ from 2.13.0's in spmd_types typing only).
    for release in (TorchVersion.V2_8, TorchVersion.V2_14):
        assert estimate(_fsdp(release, avoid=True)).reserved_bytes == estimate(_fsdp(release)).reserved_bytes
        assert not any("record_stream" in label or "torch 2.4" in label for label in _reserve(estimate(_fsdp(release))))
    assert estimate(_fsdp(TorchVersion.V2_8)).reserved_bytes == estimate(plan).reserved_bytes


def test_torch_2_5_to_2_7_without_the_variable_holds_one_more_block_input_in_the_default_stream() -> None:
    # ProcessGroupNCCL records its stream on the input; the freed block returns to the pool only
    # once that stream's event completes, and the next block's input is allocated first.
    base = estimate(_fsdp())
    recorded = estimate(_fsdp(TorchVersion.V2_5_TO_2_7))
    assert _reserve(recorded)[DEFAULT_STREAM] == pytest.approx(INPUT_BYTES)
    assert recorded.reserved_bytes - base.reserved_bytes == pytest.approx(INPUT_BYTES)
    assert recorded.peak_bytes == base.peak_bytes  # a freed block: reserved, not allocated
    # TORCH_NCCL_AVOID_RECORD_STREAMS=1 (torchtitan 9dec370 sets it): the input is stashed until
    # the streams are synced, then its block serves the default stream again.
    stashed = estimate(_fsdp(TorchVersion.V2_5_TO_2_7, avoid=True))
    assert stashed.reserved_bytes == base.reserved_bytes and DEFAULT_STREAM not in _reserve(stashed)


def test_torch_2_4_caches_the_input_for_the_reduce_scatter_stream_and_a_second_without_the_variable() -> None:
    base = estimate(_fsdp())
    stashed = estimate(_fsdp(TorchVersion.V2_4, avoid=True))
    assert _reserve(stashed)[RS_INPUT] == pytest.approx(INPUT_BYTES) and RS_RECORDED not in _reserve(stashed)
    assert stashed.reserved_bytes - base.reserved_bytes == pytest.approx(INPUT_BYTES)
    recorded = estimate(_fsdp(TorchVersion.V2_4))
    assert _reserve(recorded)[RS_RECORDED] == pytest.approx(INPUT_BYTES)
    assert recorded.reserved_bytes - base.reserved_bytes == pytest.approx(2 * INPUT_BYTES)


def test_a_pipelined_stage_holds_no_recorded_input_at_its_peak_but_2_4_keeps_its_stream_cache() -> None:
    # A pipelined stage reduce-scatters only after its last micro-batch's backward
    # (core.parallel.state._backward_reduction): the default-stream block a recorded input holds is
    # free again before the next step's peak backwards; 2.4's reduce-scatter-stream blocks are not.
    pipelined = {"pipeline_parallel": 2}
    plan = _fsdp(**pipelined).with_workload(grad_accum=4)
    assert DEFAULT_STREAM not in _reserve(
        estimate(_fsdp(TorchVersion.V2_5_TO_2_7, **pipelined).with_workload(grad_accum=4))
    )
    old = estimate(_fsdp(TorchVersion.V2_4, **pipelined).with_workload(grad_accum=4))
    assert RS_INPUT in _reserve(old) and RS_RECORDED in _reserve(old)
    assert old.reserved_bytes > estimate(plan).reserved_bytes


def test_an_fsdp1_wrap_keeps_its_own_term_whatever_the_release() -> None:
    for release in TorchVersion:
        reserve = _reserve(estimate(_fsdp(release, fsdp1_wrap=True)))
        assert not any("record_stream" in label or "torch 2.4" in label for label in reserve)
    plan = _fsdp(fsdp1_wrap=True)
    assert not input_at("hardware.torch_version").matters(plan)
    assert not input_at("hardware.nccl_avoid_record_streams").matters(plan)


def test_the_settings_matter_only_where_they_change_a_rule() -> None:
    torch, avoid = input_at("hardware.torch_version"), input_at("hardware.nccl_avoid_record_streams")
    assert torch.matters(_fsdp()) and not avoid.matters(_fsdp())  # 2.8: the variable is the default
    assert avoid.matters(_fsdp(TorchVersion.V2_5_TO_2_7)) and avoid.matters(_fsdp(TorchVersion.V2_4))
    ddp = default_plan().on_gpus(8, Strategy.DDP)
    assert not torch.matters(ddp) and not avoid.matters(ddp)


def test_a_plan_file_from_before_the_settings_reads_as_the_newest_release() -> None:
    doc = json.loads(planfile.dumps(default_plan()))
    for key in ("torch_version", "nccl_avoid_record_streams"):
        del doc["plan"]["hardware"][key]
    plan = planfile.plan_from_dict(doc)
    assert plan == default_plan() and plan.hardware.torch_version is TorchVersion.V2_14
    # A file saved while the newest range was "2.8+" (through stop 65) reads as the rules it was estimated with.
    doc = json.loads(planfile.dumps(default_plan()))
    doc["plan"]["hardware"]["torch_version"] = "2.8+"
    assert planfile.plan_from_dict(doc).hardware.torch_version is TorchVersion.V2_8
    older = _fsdp(TorchVersion.V2_5_TO_2_7, avoid=True)
    assert planfile.plan_from_dict(planfile.plan_to_dict(older)) == older


def test_the_command_line_takes_the_release_and_the_variable(capsys: pytest.CaptureFixture[str]) -> None:
    common = ["estimate", "--model", "llama-3.2-1b", "--method", "full", "--gpus-per-node", "8", "--strategy", "fsdp"]
    reserved = []
    for extra in ([], ["--torch-version", "2.5-2.7"], ["--torch-version", "2.5-2.7", "--nccl-avoid-record-streams"]):
        assert main([*common, *extra, "--json"]) == 0
        reserved.append(json.loads(capsys.readouterr().out)["reserved_bytes"])
    assert reserved[1] > reserved[0] == reserved[2]
    assert main([*common, "--torch-version", "2.3"]) == 2
    assert "2.5-2.7" in capsys.readouterr().err


def test_the_corpus_runs_map_to_the_release_each_ran() -> None:
    mapping = load_script(FOLDER / "mapping.py", "realgpu_mapping_torch_release")
    figures = {f["id"]: f for f in json.loads((FOLDER / "memory_figures.json").read_text())["figures"]}

    def hardware(figure: str) -> tuple[TorchVersion, bool]:
        plan = mapping.map_figure(figures[figure]).plan  # type: ignore[attr-defined]
        return plan.hardware.torch_version, plan.hardware.nccl_avoid_record_streams

    # axolotl ca796fb: the torch 2.7.1 image tagged is_latest, no variable set.
    assert hardware("axolotl-gptoss20b-fft-fsdp2-8x48") == (TorchVersion.V2_5_TO_2_7, False)
    # torchtitan's December 2024 nightly (1963fc8, a 2.6 pre-release) with 9dec370's variable.
    assert hardware("torchtitan-2412-8b-8gpu-fsdp") == (TorchVersion.V2_5_TO_2_7, True)
    # Trainy: torch 2.8.0a0 (NGC 25.05).
    assert hardware("trainy-h200-8b-4nodes") == (TorchVersion.V2_8, False)


def test_the_launch_exports_write_the_variable_and_list_the_release() -> None:
    # torchrun and accelerate launch put TORCH_NCCL_AVOID_RECORD_STREAMS=1 in front of the command
    # (where the plan's release reads it) and read it back; the release itself is the installed
    # torch, which no target's config can set: it is listed with the reason.
    plan = _fsdp(TorchVersion.V2_5_TO_2_7, avoid=True)
    for target, read in ((Target.TORCHRUN, read_torchrun), (Target.ACCELERATE_LAUNCH, read_accelerate_launch)):
        exported = export(plan, target)
        assert exported.text.splitlines()[-1].startswith("TORCH_NCCL_AVOID_RECORD_STREAMS=1 ")
        assert not exported.cannot("hardware.nccl_avoid_record_streams")
        assert exported.cannot("hardware.torch_version")
        assert read(exported.text)["hardware.nccl_avoid_record_streams"] is True
    assert export(plan, Target.ACCELERATE).cannot("hardware.nccl_avoid_record_streams")  # a file: listed
    assert export(plan, Target.DEEPSPEED).cannot("hardware.nccl_avoid_record_streams")
    # Under 2.8 the variable changes nothing, so nothing is written or listed for it.
    newest = export(_fsdp(avoid=True), Target.TORCHRUN)
    assert "TORCH_NCCL_AVOID_RECORD_STREAMS" not in newest.text and not newest.cannot("hardware.torch_version")
