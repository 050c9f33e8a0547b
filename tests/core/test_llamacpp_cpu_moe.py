"""llama.cpp's --n-cpu-moe N / --cpu-moe / -ot exps=CPU: a mixture of experts' routed experts kept in host RAM
(core.serving.llamacpp, issue 23). The figures are the GGUF's own arithmetic: tensor shapes from the model's
config.json (the catalogue's) times ggml's block sizes (ggml/src/ggml-common.h: MXFP4 32 values in 17 bytes,
Q4_K 256 in 144, Q6_K 256 in 210)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from core.advice.diagnosis import diagnose
from core.advice.remedies import RemedyKind
from core.catalogue import find_gpu, find_model
from core.cli.app import main
from core.dtypes import GgufQuant
from core.errors import PlanError
from core.estimate import estimate
from core.files.launch.llamacpp import (
    CPU_MOE_ALL,
    UnreadOverrides,
    export_llama_server,
    override_layers,
    read_llama_server,
)
from core.files.launch.ollama import export_ollama
from core.files.planfile import dumps, loads
from core.format import duration
from core.inputs import HOST_BANDWIDTH_GB_S, input_at
from core.plan import Engine, OllamaVersion, Plan
from core.presets import default_plan
from core.serving.llamacpp import expert_tensor_bytes, gguf_layout, llamacpp_buffers, pipeline_parallel
from core.units import MiB
from core.verdict import Mode

# gpt-oss-120b (openai/gpt-oss-120b config.json): hidden 2,880, expert width 2,880, 128 experts, 4 a token,
# 36 layers, biases on the experts. Its GGUF (MXFP4_MOE) stores each of ffn_up / gate / down _exps as
# 2,880-long rows, 2,880 x 128 = 368,640 of them, in MXFP4: 2,880 / 32 x 17 = 1,530 bytes a row.
GPT_OSS_EXPERT_TENSOR = 1_530 * 368_640  # 564,019,200 bytes
# and the experts' float32 biases, which the loader's regex_search moves with them: 128 x (2 x 2,880 + 2,880) x 4
GPT_OSS_EXPERT_BIASES = 128 * (2 * 2_880 + 2_880) * 4  # 4,423,680 bytes
GPT_OSS_LAYER_EXPERTS = 3 * GPT_OSS_EXPERT_TENSOR + GPT_OSS_EXPERT_BIASES  # 1,696,481,280 bytes


def _plan(model: str, gpu: str = "rtx-4090", **inference: object) -> Plan:
    base = default_plan()
    plan = replace(base, model=find_model(model).spec, model_id=model, hardware=replace(base.hardware, gpu=gpu))
    quant = GgufQuant.MXFP4_MOE if model.startswith("gpt-oss") else GgufQuant.Q4_K_M
    settings = {"engine": Engine.LLAMACPP, "gguf_quant": quant, "concurrent": 1, "context": 8192, **inference}
    return replace(plan, inference=replace(plan.inference, **settings))


def test_a_layers_routed_experts_are_its_three_exps_tensors_and_their_biases() -> None:
    sizes = expert_tensor_bytes(find_model("gpt-oss-120b").spec, GgufQuant.MXFP4_MOE)
    assert len(sizes) == 36
    assert sizes[0] == (GPT_OSS_LAYER_EXPERTS, GPT_OSS_EXPERT_TENSOR)
    # Qwen3-30B-A3B Q4_K_M (Qwen/Qwen3-30B-A3B config.json: hidden 2,048, moe_intermediate_size 768, 128
    # experts): layer 0's up and gate Q4_K, 2,048 / 256 x 144 = 1,152 bytes a row x 98,304 rows; its down
    # Q6_K (use_more_bits: the first eighth of the layers), 768 / 256 x 210 = 630 bytes a row x 262,144 rows.
    qwen = expert_tensor_bytes(find_model("qwen3-30b-a3b").spec, GgufQuant.Q4_K_M)
    assert qwen[0] == (2 * 1_152 * 98_304 + 630 * 262_144, 630 * 262_144)


def test_cpu_moe_moves_every_layers_experts_to_the_host_and_leaves_the_rest_on_the_gpu() -> None:
    whole = gguf_layout(_plan("gpt-oss-120b"))
    kept = gguf_layout(_plan("gpt-oss-120b", cpu_moe_layers=36))
    assert kept.cpu_moe_layers == tuple(range(36))
    assert kept.host_expert_bytes == 36 * GPT_OSS_LAYER_EXPERTS
    assert whole.device_weights[0] - kept.device_weights[0] == pytest.approx(36 * GPT_OSS_LAYER_EXPERTS)
    assert kept.host_weights - whole.host_weights == pytest.approx(36 * GPT_OSS_LAYER_EXPERTS)
    assert kept.host_layers == () and kept.device_layers == whole.device_layers  # attention and KV stay on the GPU
    # Past the layer count it is --cpu-moe: the same as every layer.
    assert gguf_layout(_plan("gpt-oss-120b", cpu_moe_layers=CPU_MOE_ALL)) == kept


def test_n_cpu_moe_counts_from_layer_0_and_skips_layers_already_on_the_cpu() -> None:
    # -ngl 30 leaves layers 0-5 whole on the CPU (llama.cpp offloads the last N); --n-cpu-moe 10 then moves the
    # experts of layers 6-9 only.
    layout = gguf_layout(_plan("gpt-oss-120b", gpu_layers=30, cpu_moe_layers=10))
    assert layout.host_layers == tuple(range(6))
    assert layout.cpu_moe_layers == (6, 7, 8, 9)
    assert layout.host_expert_bytes == 4 * GPT_OSS_LAYER_EXPERTS


def test_op_offload_copies_the_largest_expert_tensor_into_the_gpus_compute_buffer() -> None:
    # n_ubatch 512 >= 32 (the CUDA backend's offload minimum): the prompt's reserve graph copies one expert tensor
    # at a time into the GPU's compute buffer beside the FFN's activations. At 8,192 cells and flash attention:
    # the FFN's two float32 intermediates of 4 experts x 2,880 and two hidden states, 2 x 512 x 11,520 x 4 +
    # 2 x 512 x 2,880 x 4 = 58,982,400; the float16 mask 8,192 x 512 x 2 = 8,388,608; the tensor 564,019,200.
    buffers = llamacpp_buffers(_plan("gpt-oss-120b", cpu_moe_layers=36))
    assert buffers.device_compute[0] == 58_982_400 + 8_388_608 + GPT_OSS_EXPERT_TENSOR
    assert buffers.device_compute[0] / MiB == pytest.approx(602.14, abs=0.01)
    # Below 32 tokens a micro-batch's experts run on the CPU: no copy, the host's compute buffer holds the FFN.
    small = llamacpp_buffers(_plan("gpt-oss-120b", cpu_moe_layers=36, ubatch=16))
    assert small.device_compute[0] < GPT_OSS_EXPERT_TENSOR
    assert small.host_compute > llamacpp_buffers(_plan("gpt-oss-120b", ubatch=16)).host_compute


def test_a_tensor_override_turns_pipeline_parallelism_off() -> None:
    # src/llama-context.cpp: pipeline_parallel needs !model.has_tensor_overrides().
    plan = _plan("qwen3-30b-a3b", pipeline_parallel=2)
    assert pipeline_parallel(plan)
    assert not pipeline_parallel(plan.with_inference(cpu_moe_layers=4))


def test_the_breakdown_shows_the_experts_kept_in_ram() -> None:
    inf = estimate(_plan("gpt-oss-120b", cpu_moe_layers=36)).inference
    assert "58,244.06 MiB of routed experts of 36 GPU layers" in inf.formula  # 36 x 1,696,481,280 bytes
    weights = inf.buckets[0].terms[0]
    assert "--cpu-moe" in weights.formula and "layers 0-35's ffn_*_exps" in weights.formula
    assert inf.host_bytes > 36 * GPT_OSS_LAYER_EXPERTS


def test_a_dense_model_is_refused_and_ollama_leaves_the_count_unread() -> None:
    # Refused by Plan validation (Plan._check_llamacpp), not by estimate(): the plan is never built, so the window,
    # the command line and the reports give the same answer before any estimate.
    with pytest.raises(PlanError, match="no routed experts") as refused:
        _plan("llama-3.1-8b", cpu_moe_layers=4)
    assert refused.value.field == "inference.cpu_moe_layers"
    assert str(refused.value) == (  # the words estimate() raised before branch h72home (core.serving.llamacpp)
        "inference.cpu_moe_layers: 4 is not allowed; expected 0 for a dense model (Llama 3.1 8B has no routed "
        "experts: --n-cpu-moe moves ffn_*_exps tensors only (use fewer GPU layers))"
    )
    # A mixture of experts keeps the count; picking a dense model drops it to 0, as a split the model cannot take.
    moe = _plan("qwen3-30b-a3b", cpu_moe_layers=4)
    dense = find_model("llama-3.1-8b")
    assert moe.on_model(dense.spec, dense.id).inference.cpu_moe_layers == 0
    # Ollama has no such option: its layout is the one without it.
    ollama = _plan("qwen3-30b-a3b", ollama_version=OllamaVersion.V0_12_11, gpu_layers=20)
    assert gguf_layout(ollama.with_inference(cpu_moe_layers=10)) == gguf_layout(ollama)


def test_decode_reads_the_routed_experts_from_host_memory_and_prompts_copy_them_over_pcie() -> None:
    gpu = estimate(_plan("gpt-oss-120b", gpu="h100-sxm")).inference.speed
    ram = estimate(_plan("gpt-oss-120b", gpu="h100-sxm", cpu_moe_layers=36)).inference.speed
    assert ram.per_request_tokens_per_s < gpu.per_request_tokens_per_s
    # One token routes to 4 of 128 experts a layer: 36 x 1,696,481,280 x 4 / 128 bytes at the host's bandwidth.
    host_s = 36 * GPT_OSS_LAYER_EXPERTS * 4 / 128 / (HOST_BANDWIDTH_GB_S * 1e9)
    assert f"({duration(host_s)})" in ram.formula  # "(37.3 ms)", core.format.duration's form
    assert ram.ttft_alone_s > gpu.ttft_alone_s  # each 512-token micro-batch copies its experts to the GPU


def test_the_host_bandwidth_input_sets_the_host_reads() -> None:
    # The same 36 layers' routed experts read at dual-channel DDR5-5600 (2 x 8 B x 5.6 GT/s = 89.6 GB/s,
    # JEDEC JESD79-5) instead of the default DDR4-3200: the host term is the same bytes over the typed rate.
    plan = _plan("gpt-oss-120b", gpu="h100-sxm", cpu_moe_layers=36)
    slow = estimate(plan).inference.speed
    fast = estimate(plan.with_inference(host_bandwidth_gb_s=89.6)).inference.speed
    host_s = 36 * GPT_OSS_LAYER_EXPERTS * 4 / 128 / (89.6 * 1e9)
    assert f"({duration(host_s)})" in fast.formula and "89.6 GB/s of host memory" in fast.formula
    assert fast.per_request_tokens_per_s > slow.per_request_tokens_per_s
    # With every weight on the GPU the input changes nothing (and the form hides it).
    whole = _plan("gpt-oss-120b", gpu="h200-sxm")
    assert estimate(whole.with_inference(host_bandwidth_gb_s=400.0)).inference.speed == estimate(whole).inference.speed
    assert not input_at("inference.host_bandwidth_gb_s").matters(whole)
    assert input_at("inference.host_bandwidth_gb_s").matters(plan)


def test_the_remedy_is_the_fewest_layers_that_fit_and_ranks_by_decode_speed() -> None:
    # Qwen3-30B-A3B Q4_K_M does not fit an 8 GB RTX 4060 with every layer there.
    plan = _plan("qwen3-30b-a3b", gpu="rtx-4060")
    assert not estimate(plan).judgement(Mode.INFERENCE).fits
    found = {r.kind: r for r in diagnose(plan, Mode.INFERENCE, frozenset()).remedies}
    moe = found[RemedyKind.CPU_MOE]
    n = moe.plan.inference.cpu_moe_layers
    assert moe.fits and not estimate(plan.with_inference(cpu_moe_layers=n - 1)).judgement(Mode.INFERENCE).fits
    assert f"--n-cpu-moe {n}" in moe.title
    layers = found[RemedyKind.GPU_LAYERS]
    # the attention of every layer stays on the GPU: faster than fewer GPU layers
    speed = moe.estimate.inference.speed.per_request_tokens_per_s
    assert speed > layers.estimate.inference.speed.per_request_tokens_per_s
    order = [r.kind for r in diagnose(plan, Mode.INFERENCE, frozenset()).remedies]
    assert order.index(RemedyKind.CPU_MOE) < order.index(RemedyKind.GPU_LAYERS)


def test_llama_server_writes_and_reads_the_flags() -> None:
    plan = _plan("gpt-oss-120b", cpu_moe_layers=20)
    text = export_llama_server(plan).text
    assert "--n-cpu-moe 20" in text
    assert read_llama_server(text)["inference.cpu_moe_layers"] == 20
    every = export_llama_server(plan.with_inference(cpu_moe_layers=36)).text
    assert "--cpu-moe" in every and "--n-cpu-moe" not in every
    assert read_llama_server(every)["inference.cpu_moe_layers"] == CPU_MOE_ALL
    assert "cpu-moe" not in export_llama_server(plan.with_inference(cpu_moe_layers=0)).text
    # Ollama cannot say it: listed, not dropped.
    assert export_ollama(plan).cannot("inference.cpu_moe_layers")


@pytest.mark.parametrize(
    ("pattern", "layers"),
    [
        ("exps=CPU", CPU_MOE_ALL),  # the common spelling: every layer's
        (r"\.ffn_.*_exps\.=CPU", CPU_MOE_ALL),
        (r"blk\.(\d+)\.ffn_.*_exps\.=CPU", CPU_MOE_ALL),
        (r"blk\.([0-9]|1[0-9])\.ffn_.*_exps\.=CPU", 20),  # layers 0-19: --n-cpu-moe 20
        (r"blk\.([0-9]|1[0-9])\.ffn_(up|down|gate)_exps=CPU", 20),
        ("ffn=CPU", None),  # the shared experts and the dense FFNs too
        ("ffn_down_exps=CPU", None),  # one of the three only
        ("exps=CUDA0", None),  # another buffer
        (r"blk\.(2[0-9])\.ffn_.*_exps=CPU", None),  # not from layer 0
    ],
)
def test_override_patterns_read_as_n_cpu_moe_or_not_at_all(pattern: str, layers: int | None) -> None:
    assert override_layers(pattern) == layers


def test_an_override_the_reader_cannot_read_is_listed_never_dropped() -> None:
    line = (
        "llama-server -m qwen3-30b-a3b-Q4_K_M.gguf -c 8192 -np 1 -n 256 -ngl 999 "
        r"-ot 'blk\.([0-9])\.ffn_.*_exps=CPU,blk\.(2[0-9])\.ffn_.*_exps=CPU' -fa on -ctk f16 -ctv f16 -sm none"
    )
    with pytest.raises(UnreadOverrides, match=r"blk\\.\(2\[0-9\]\)"):
        read_llama_server(line)
    unread: list[str] = []
    assert read_llama_server(line, unread)["inference.cpu_moe_layers"] == 10
    assert unread == [r"blk\.(2[0-9])\.ffn_.*_exps=CPU"]


def test_the_plan_file_keeps_the_count_and_old_files_read_none() -> None:
    plan = _plan("qwen3-30b-a3b", cpu_moe_layers=12)
    saved = json.loads(dumps(plan))
    assert loads(json.dumps(saved)).inference.cpu_moe_layers == 12
    # A file written before the setting (no key) keeps every expert on the GPU, as it was planned then.
    del saved["plan"]["inference"]["cpu_moe_layers"]
    assert loads(json.dumps(saved)).inference.cpu_moe_layers == 0


def test_the_command_line_takes_both_spellings(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["estimate", "-m", "gpt-oss-120b", "--mode", "inference", "--engine", "llamacpp", "--gguf", "MXFP4_MOE"]
    assert main([*base, "--gpu", "rtx-4090", "--cpu-moe"]) == 0
    assert "routed experts of 36 GPU layers" in capsys.readouterr().out
    assert main([*base, "--gpu", "rtx-4090", "--n-cpu-moe", "30"]) == 0
    assert "routed experts of 30 GPU layers" in capsys.readouterr().out
    assert main([*base, "--cpu-moe", "--n-cpu-moe", "3"]) != 0
    assert "not both" in capsys.readouterr().err
    assert find_gpu("rtx-4090").intra_link == "pcie4-x16"  # the link a prompt's expert copies take
