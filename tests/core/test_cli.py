"""The command line: readable tables, JSON in bytes, exit 2 and one line on bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from core.cli.app import main
from core.files.planfile import load
from core.format import memory as format_memory


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_lesson_example_on_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    # The lesson's 7B, 16-bit, full, Adam: 13.4 + 13.4 + 53.6 + 1.5 = 81.9 GB.
    code, out, _ = run(capsys, "estimate", "--params", "6.7e9", "--precision", "bf16", "--lesson")
    assert code == 0
    assert "13.4 + 13.4 + 53.6 + 1.5 = 81.9 GB" in out


def test_json_output_has_every_bucket_in_bytes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "estimate", "--model", "gpt2", "--precision", "fp32", "--json")
    assert code == 0
    data = json.loads(out)
    assert set(data["buckets_bytes"]) == {"weights", "gradients", "optimizer", "activations", "overhead"}
    assert data["params"]["total"] == 124_439_808
    assert data["verdict"] in {"fits", "over-headroom", "oom"}
    # The allocated peak: the largest phase's tensors and the cuBLAS workspaces of the forward's and the
    # backward's handles, 2 × (4096 KiB × 2 + 16 KiB × 8) on the default A100, not sm90 (core.runtime:
    # pytorch/pytorch 26a39059 CublasHandlePool.cpp, parseChosenWorkspaceSize).
    assert data["peak_bytes"] == max(data["phases_bytes"].values()) + data["workspace_bytes"]
    assert data["workspace_bytes"] == 2 * (4096 * 1024 * 2 + 16 * 1024 * 8)
    assert data["compute"]["hours"] > 0


def test_lora_options(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys,
        "estimate",
        "--model",
        "llama-2-7b",
        "--method",
        "lora",
        "--lora-rank",
        "8",
        "--lora-targets",
        "q_proj,v_proj",
        "--json",
    )
    assert code == 0
    assert json.loads(out)["params"]["trainable"] == 4_194_304  # PEFT's count for this config


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("estimate", "--model", "no-such-model"), "model"),
        (("estimate", "--model", "gpt2", "--micro-batch", "0"), "workload.micro_batch"),
        (("estimate", "--model", "gpt2", "--gpu", "tpu-v5"), "hardware.gpu"),
        (("estimate", "--model", "gpt2", "--headroom", "2"), "hardware.headroom"),
        (("estimate", "--model", "gpt2", "--lora-targets", "nope", "--method", "lora"), "lora.targets"),
        (("estimate",), "say which model"),
        (("estimate", "--config", "/nonexistent/dir"), "config.json"),
        (("estimate", "--plan", "/nonexistent.json"), "cannot be read"),
        (("frobnicate",), "invalid choice"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], fragment: str
) -> None:
    code, _out, err = run(capsys, *args)
    assert code == 2
    assert fragment in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_save_then_reuse_the_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.json"
    code, _, _ = run(capsys, "estimate", "--model", "qwen2.5-0.5b", "-b", "8", "--save", str(path))
    assert code == 0
    assert load(path).workload.micro_batch == 8
    code, out, _ = run(capsys, "estimate", "--plan", str(path), "-s", "512", "--json")
    assert code == 0 and json.loads(out)["model"].startswith("Qwen2.5")


def test_catalogue_listings(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "models")
    assert code == 0 and "llama-3.1-8b" in out
    code, out, _ = run(capsys, "gpus", "--json")
    a100 = next(g for g in json.loads(out) if g["id"] == "a100-80gb-sxm")
    assert a100["memory_bytes"] == 81_920 * 2**20  # nvidia-smi reports 81920 MiB


@pytest.mark.parametrize(("listing", "column"), [("gpus", " MiB "), ("models", "  L=")])
def test_catalogue_listings_line_up_whatever_the_longest_name(
    capsys: pytest.CaptureFixture[str], listing: str, column: str
) -> None:
    # Ids and names wider than a fixed column (rtx-pro-5000-blackwell-72gb, "NVIDIA GeForce RTX 5080 Laptop GPU")
    # pushed their row's later columns right of everyone else's.
    code, out, _ = run(capsys, listing)
    lines = out.splitlines()
    assert code == 0 and len(lines) > 50
    assert len({line.index(column) for line in lines}) == 1


def test_console_script_runs_without_qt() -> None:
    # The CLI path of the entry point never imports Qt.
    code = (
        "import sys; from gui.launcher import main; rc = main(['models']); "
        "assert 'PySide6' not in sys.modules; sys.exit(rc)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


# ---- precision roles, optimizer implementation, DoRA (issue 11) --------------------------


def _plan_of(capsys: pytest.CaptureFixture[str], tmp_path: Path, *args: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "p.json"
    code, _, err = run(capsys, "estimate", "--model", "llama-3.1-8b", *args, "--save", str(path), "--json")
    assert code == 0, err
    return load(path)


def test_precision_bf16_with_autocast_is_the_trainer_preset(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from core.dtypes import Autocast, Dtype
    from core.plan import Preset

    plan = _plan_of(capsys, tmp_path, "--precision", "bf16", "--autocast")
    assert plan.preset is Preset.TRAINER_BF16
    assert (plan.weight_dtype, plan.autocast, plan.adapter_dtype) == (Dtype.BF16, Autocast.BF16, Dtype.FP32)
    plan = _plan_of(capsys, tmp_path, "--preset", "trainer-bf16", "--no-autocast")
    assert plan.preset is Preset.PURE_BF16


def test_single_roles_make_a_custom_plan(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from core.dtypes import Autocast, Dtype
    from core.plan import Method, Preset

    plan = _plan_of(
        capsys, tmp_path, "--method", "lora", "--base-dtype", "bf16", "--adapter-dtype", "bf16", "--no-autocast"
    )
    assert plan.method is Method.LORA
    assert (plan.preset, plan.base_dtype, plan.adapter_dtype, plan.autocast) == (
        Preset.CUSTOM,
        Dtype.BF16,
        Dtype.BF16,
        Autocast.NONE,
    )


def test_dora_flag_and_optimizer_impl(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from core.plan import Method, OptimizerImpl

    plan = _plan_of(capsys, tmp_path, "--dora", "--optimizer-impl", "forloop")
    assert plan.method is Method.DORA
    assert plan.optimizer_impl is OptimizerImpl.FORLOOP
    code, _, err = run(capsys, "estimate", "--model", "gpt2", "--dora", "--method", "lora")
    assert code == 2 and "--dora" in err


def test_json_peak_is_the_allocator_peak_of_the_plan(capsys: pytest.CaptureFixture[str]) -> None:
    from core.estimate import estimate
    from core.plan import OptimizerImpl, Precision
    from core.presets import plan_for_model

    steps = {}
    for impl in ("fused", "foreach"):
        code, out, _ = run(
            capsys, "estimate", "--model", "gpt2", "--precision", "fp32", "--optimizer-impl", impl, "--json"
        )
        assert code == 0
        data = json.loads(out)
        plan = plan_for_model("gpt2", precision=Precision.FP32, optimizer_impl=OptimizerImpl(impl))
        assert data["peak_bytes"] == estimate(plan).peak_bytes
        steps[impl] = data["phases_bytes"]["optimizer step"]
    assert steps["foreach"] > steps["fused"]  # foreach's sqrt(v) copy of every moment


def test_serving_on_the_command_line_matches_the_estimate(capsys: pytest.CaptureFixture[str]) -> None:
    from core.catalogue import find_model
    from core.estimate import estimate
    from core.plan import Hardware, Plan

    args = ("--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--mode", "inference", "--engine", "vllm")
    code, out, _ = run(capsys, "estimate", *args, "--context", "8192", "--json")
    assert code == 0
    served = json.loads(out)["inference"]
    plan = Plan(model=find_model("llama-3.1-8b").spec, hardware=Hardware(gpu="h100-sxm"))
    inf = estimate(plan.with_inference(engine="vllm", context=8192)).inference
    assert served["kv_cache_tokens"] == inf.kv_cache_tokens
    assert served["max_concurrency"] == round(inf.max_concurrency, 2)
    assert served["peak_bytes"] == round(inf.peak_bytes)
    assert served["ttft_s"] == inf.ttft_s and served["decode_tokens_per_s"] == inf.decode_tokens_per_s
    code, out, _ = run(capsys, "estimate", *args, "--context", "8192")
    assert f"GPU KV cache size: {inf.kv_cache_tokens:,} tokens" in out
    assert f"Maximum concurrency for 8,192 tokens per request: {inf.max_concurrency:.2f}x" in out


def test_serving_options_reach_the_plan(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "serve.json"
    code, _, _ = run(
        capsys,
        "estimate",
        "--model",
        "llama-3.1-70b",
        "--mode",
        "inference",
        "--engine",
        "vllm",
        "--tensor-parallel",
        "4",
        "--weights",
        "awq-int4",
        "--kv-dtype",
        "fp8",
        "--gpu-memory-utilization",
        "0.85",
        "--max-num-seqs",
        "64",
        "--max-num-batched-tokens",
        "4096",
        "--save",
        str(path),
    )
    assert code == 0
    inf = load(path).inference
    assert (inf.engine, inf.tensor_parallel, inf.weight_dtype, inf.kv_dtype) == ("vllm", 4, "awq-int4", "fp8")
    assert (inf.gpu_memory_utilization, inf.max_num_seqs, inf.max_num_batched_tokens) == (0.85, 64, 4096)


@pytest.mark.parametrize(
    ("option", "value", "field"),
    [
        ("--gpu-memory-utilization", "1.5", "inference.gpu_memory_utilization"),
        ("--tensor-parallel", "0", "inference.tensor_parallel"),
        ("--max-num-seqs", "-1", "inference.max_num_seqs"),
    ],
)
def test_bad_serving_values_are_one_line(
    capsys: pytest.CaptureFixture[str], option: str, value: str, field: str
) -> None:
    code, out, err = run(capsys, "estimate", "--model", "gpt2", "--mode", "inference", option, value)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and field in err and value in err


def test_frozen_layer_plan_on_another_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 13 item 1: `--plan frozen.json --model llama-3.2-1b` failed ("frozen_layers 0")."""
    path = tmp_path / "frozen.json"
    args = ("--model", "llama-3.1-8b", "--method", "frozen", "--frozen-layers", "24", "--save", str(path))
    code, _, _ = run(capsys, "estimate", *args)
    assert code == 0 and load(path).frozen_layers == 24
    code, _, err = run(capsys, "estimate", "--plan", str(path), "--model", "llama-3.2-1b", "--save", str(path))
    assert code == 0, err
    # Llama 3.2 1B has 16 blocks (its config.json): the 24 frozen ones are clamped to its depth.
    assert load(path).frozen_layers == 16 and load(path).model_id == "llama-3.2-1b"


def test_training_weight_dtype_and_serving_weights_are_separate(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from core.dtypes import Dtype
    from core.plan import Preset

    plan = _plan_of(capsys, tmp_path, "--weight-dtype", "bf16", "--autocast", "--weights", "nf4")
    assert (plan.weight_dtype, plan.base_dtype, plan.preset) == (Dtype.BF16, Dtype.BF16, Preset.TRAINER_BF16)
    assert plan.inference.weight_dtype == "nf4"


def test_warnings_reach_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    # Llama 3.1 8B's config.json: max_position_embeddings 131,072; the T4 (Turing) has no bf16
    # tensor cores (NVIDIA T4 datasheet lists FP16/INT8 only). Both were shown only in the window.
    code, out, _ = run(capsys, "estimate", "--model", "llama-3.1-8b", "--seq", "1000000", "--gpu", "t4")
    assert code == 0
    assert "warning: Sequence 1,000,000 tokens is past" in out and "131,072" in out
    assert "warning: Turing" in out
    code, out, _ = run(capsys, "estimate", "--model", "llama-3.1-8b", "--seq", "1000000", "--gpu", "t4", "--json")
    doc = json.loads(out)
    assert any("131,072" in w for w in doc["warnings"]) and doc["dtype_problem"]
    code, out, _ = run(capsys, "gpus")
    t4 = next(line for line in out.splitlines() if line.startswith("t4 "))
    assert t4.rstrip().endswith("no bf16")


def test_the_launcher_routes_every_subcommand_to_the_command_line() -> None:
    # The binary's entry point (gui.launcher) sends a known subcommand to the CLI and anything
    # else to the window; `vramplan links` once opened the window instead (no display: an error).
    import argparse

    from core.cli.app import build_parser
    from gui.launcher import CLI_COMMANDS

    actions = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    subcommands = set(actions[0].choices)
    assert "links" in subcommands and subcommands <= CLI_COMMANDS, sorted(subcommands - CLI_COMMANDS)


def test_inference_mode_answers_the_serving_question_everywhere(capsys: pytest.CaptureFixture[str]) -> None:
    # Issue 26, items 8, 10, 11. Llama 3.1 8B served by vLLM on an RTX 4090 at 64 × 8,192 tokens:
    # its pool holds 5 such requests at once, so 59 wait; the training default (full fine-tuning
    # of 8B on 24 GB) is out of memory, which the top level of --mode inference --json once said.
    args = ("estimate", "--model", "llama-3.1-8b", "--gpu", "rtx-4090", "--mode", "inference", "--engine", "vllm")
    args += ("--concurrent", "64", "--context", "8192")
    code, out, _ = run(capsys, *args, "--json")
    doc = json.loads(out)
    assert code == 0 and doc["mode"] == "inference"
    assert doc["verdict"] == doc["judgement"]["verdict"] == doc["inference"]["verdict"]
    assert doc["training"]["verdict"] == "oom" and doc["verdict"] != "oom"
    served = doc["inference"]
    assert served["usable_bytes"] == doc["judgement"]["usable_bytes"] < served["budget_bytes"]
    assert sum(served["buckets_bytes"].values()) == pytest.approx(served["total_bytes"], abs=8)
    code, text, _ = run(capsys, *args)
    assert f"margin {format_memory(doc['margin_bytes'])}" in text and "Fits:" in text
    assert "59 of 64 requests wait in the queue" in text
    # Past Llama 3.1's 131,072-token window (its config.json): vLLM refuses it (vllm 0.19.0 vllm/config/model.py
    # _get_and_verify_max_len), which the verdict and its sentence say once; a warning beside them said it again
    # (h91diag). With VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 vLLM starts, and the warning says what runs, in both forms.
    code, text, _ = run(capsys, *args[:-1], "200000")
    assert "Would not start: " in text and "vLLM would not start" in text and "wait in the queue" not in text
    assert "The serving context of 200,000" not in text
    code, text, _ = run(capsys, *args[:-1], "200000", "--long-context")
    assert (
        "warning: The serving context of 200,000 tokens is past Llama 3.1 8B's context window of 131,072 tokens: "
        "vLLM starts with VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 and warns" in text
    )
    doc = json.loads(run(capsys, *args[:-1], "200000", "--long-context", "--json")[1])
    assert any("200,000" in w for w in doc["warnings"])
    refused = json.loads(run(capsys, *args[:-1], "200000", "--json")[1])
    assert refused["inference"]["would_not_start"] and not any("200,000" in w for w in refused["warnings"])


def test_a_pooled_engine_shares_its_pool_among_the_requests() -> None:
    # Issue 26, item 5: vLLM on an H100 with Llama 3.1 8B holds 443,536 tokens (27,721 blocks of
    # 16; issue 23's fitted non-torch 0.29 GiB); at 32 requests each may hold 27,721 // 32 = 866
    # blocks = 13,856 tokens, not the whole
    # pool; one request never more than the model's 131,072-token window (its config.json).
    from core.estimate import estimate
    from core.presets import plan_for_model

    plan = plan_for_model("llama-3.1-8b").with_hardware(gpu="h100-sxm")
    inf = estimate(plan.with_inference(engine="vllm", concurrent=32, context=8192)).inference
    assert inf.kv_cache_tokens == 443_536 and inf.max_context == 13_856
    assert estimate(plan.with_inference(engine="vllm", concurrent=1, context=8192)).inference.max_context == 131_072


def test_llama_cpp_on_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    # The header names the GGUF type and cache type llama.cpp was judged with (it read "weights
    # bf16 · KV bf16", settings that engine ignores), the counts take their noun's number ("at most
    # 1 requests" before), and the host part is judged against the RAM given.
    args = ("estimate", "--model", "llama-3.1-8b", "--gpu", "rtx-4090", "--mode", "inference", "--engine", "llamacpp")
    code, out, _ = run(capsys, *args, "--gguf", "Q4_K_M", "--context", "8192", "--gpu-layers", "20")
    assert code == 0 and "GGUF Q4_K_M · KV f16" in out and "1 requests" not in out
    assert "at most 1 request of 8,192 tokens" in out and "12 layers not offloaded" in out
    code, out, _ = run(capsys, *args, "--gpu-layers", "20", "--host-ram-gb", "2")
    assert "a node's RAM does not" in out and "more than the 2.00 GB of host RAM given" in out
    code, _, err = run(capsys, *args, "--cache-type", "q8_0", "--no-flash-attention")
    assert code != 0 and "V cache quantization requires flash_attn" in err and "Traceback" not in err
    code, _, err = run(capsys, "estimate", "--model", "llama-3.1-8b", "--mode", "inference", "--vllm-version", "0.5")
    assert code != 0 and "0.28" in err and "Traceback" not in err


def test_training_output_says_how_many_requests_fit_in_words(capsys: pytest.CaptureFixture[str]) -> None:
    # A training estimate's serving line once read "fits up to 0 requests" (and "fits up to 1 requests"); it
    # now gives the sentence the window's banner and the report share (Inference.limits_sentence).
    # Qwen3 8B in bf16 is 16.4 GB of weights (its model card: 8.2B parameters), more than the 17.2 GB of an
    # RTX 4090 Laptop GPU (NVIDIA's spec: 16 GB GDDR6 = 17.2 GB) leaves usable with 10 % headroom.
    code, out, _ = run(capsys, "estimate", "--model", "qwen3-8b", "--gpu", "rtx-4090-laptop")
    assert code == 0
    line = next(x for x in out.splitlines() if x.lstrip().startswith("serving"))
    assert "0 requests" not in line and "no request fits: the weights alone do not fit" in line
    code, out, _ = run(capsys, "estimate", "--model", "qwen3-0.6b", "--gpu", "h100-sxm", "--context", "4096")
    line = next(x for x in out.splitlines() if x.lstrip().startswith("serving"))
    assert "requests of 4,096 tokens at once" in line and "fits up to" not in line


def test_serving_rates_say_what_the_total_counts(capsys: pytest.CaptureFixture[str]) -> None:
    # One request of gpt-oss-20b under Ollama 0.12.11 on an 8 GB laptop card (NVIDIA's RTX 4060 Laptop spec) printed
    # "1 request decodes at 29 tokens/s each, 10 tokens/s in total": the total counts the 32k prompt's prefill
    # (core.serving.speed.queue), so it read lower than the one request's rate with nothing said.
    args = ("--model", "gpt-oss-20b", "--mode", "inference", "--engine", "llamacpp", "--gguf", "MXFP4_MOE")
    code, out, _ = run(
        capsys, "estimate", *args, "--gpu", "rtx-4060-laptop", "--context", "32768", "--ollama", "0.12.11"
    )
    assert code == 0
    line = next(x for x in out.splitlines() if "time to first token" in x)
    assert (
        "each while decoding" in line
        and "output tokens/s in total (over all requests and replicas, prompts' prefill" in line
    )


def test_the_compute_line_counts_its_gpus_in_words(capsys: pytest.CaptureFixture[str]) -> None:
    # h55ux: "4.0 h on 1 GPU(s)" read as a form to fill; one GPU is "1 GPU", two are "2 GPUs".
    code, out, _ = run(capsys, "estimate", "--model", "gpt2", "--gpu", "rtx-4090")
    assert code == 0 and " on 1 GPU at " in out and "GPU(s)" not in out
    code, out, _ = run(capsys, "estimate", "--model", "gpt2", "--gpu", "rtx-4090", "--gpus", "2")
    assert code == 0 and " on 2 GPUs at " in out and "GPU(s)" not in out


def test_the_command_line_starts_from_the_windows_precision(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The window's first start loads the model in bf16 and trains with Trainer(bf16=True) (core.presets.default_plan),
    # what transformers 5 does without a dtype (modeling_utils.py from_pretrained: dtype None -> "auto", the
    # checkpoint's bf16). The command line started from a float32 model under bf16 autocast instead: LoRA on
    # Llama 3.1 8B on an RTX 4090 read 47.2 GB of weights (8.03e9 x 4 B + a 2 B autocast copy) and "out of memory"
    # where the window fits. Both now start from the same precision unless --precision / --preset say otherwise.
    from core.presets import default_plan

    path = tmp_path / "lora.json"
    code, _, _ = run(
        capsys, "estimate", "--model", "llama-3.1-8b", "--method", "lora", "--gpu", "rtx-4090", "--save", str(path)
    )
    assert code == 0
    plan = load(str(path))
    window = default_plan()
    assert (plan.preset, plan.roles) == (window.preset, window.roles)
    code, out, _ = run(capsys, "estimate", "--model", "llama-3.1-8b", "--method", "lora", "--gpu", "rtx-4090", "--json")
    weights = json.loads(out)["buckets_bytes"]["weights"]
    assert weights < 8.03e9 * 2.1  # the bf16 base (2 B a parameter, Meta's 8.03e9) and the float32 adapters


def test_the_parameter_line_counts_what_trains_beside_the_adapters(capsys: pytest.CaptureFixture[str]) -> None:
    # PEFT's print_trainable_parameters counts the modules_to_save copies; the line read "3.41M trainable" alone.
    # Llama 3.1 8B's config: vocab 128,256 x hidden 4,096, one copy each for embed_tokens and lm_head.
    code, out, _ = run(capsys, "estimate", "--model", "llama-3.1-8b", "--method", "lora", "--modules-to-save", "both")
    assert code == 0
    assert f"+ 1.05 × 10⁹ trained beside them ({2 * 128_256 * 4_096:,}" in out.splitlines()[1]


def test_the_estimate_says_the_batch_its_figures_are_for(capsys: pytest.CaptureFixture[str]) -> None:
    # The command line's workload defaults (micro-batch 1 x 1,024 tokens, no checkpointing: Plan's) are not the
    # window's first start (4 x 2,048, checkpointing): the text output now says which batch it priced.
    code, out, _ = run(capsys, "estimate", "--model", "gpt2", "-b", "8", "-s", "512", "--checkpointing")
    assert code == 0
    assert "workload micro-batch 8 × 512 tokens, gradient accumulation 1; checkpointing full" in out
