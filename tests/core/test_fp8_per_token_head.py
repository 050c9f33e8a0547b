"""vLLM's fp8_per_token_head KV cache and an explicit --attention-backend beside a per-token-head cache (issue 23,
branch h95fp8h).

The facts, read in the released wheels (``pip download vllm==X --no-deps``, unzipped):

* vllm 0.20.2 ``vllm/config/cache.py`` CacheDType lists ``"fp8_per_token_head"`` (line 32); 0.19.1's does not;
  resources/engine_flags/vllm_serve.txt records ``--kv-cache-dtype=fp8_per_token_head 0.20-0.34``.
* vllm 0.20.2 ``vllm/v1/kv_cache_interface.py`` get_kv_quant_mode: "fp8_per_token_head" -> FP8_PER_TOKEN_HEAD, whose
  ``is_per_token_head`` is True (lines 41 - 63), so AttentionSpec.page_size_bytes adds ``2 * block_size *
  num_kv_heads * 4`` (line 145); ``vllm/utils/torch_utils.py`` STR_DTYPE_TO_TORCH_DTYPE: torch.uint8 (one byte).
  Any other "fp8..." name is FP8_PER_TENSOR (0.34.0 kv_cache_interface.py line 136).
* ``vllm/platforms/cuda.py`` get_attn_backend_cls (0.20.2 line 304, 0.34.0 line 485): "Selected backend
  {selected_backend} is not valid for this configuration. Reason: {invalid_reasons}"; ``vllm/v1/attention/backend.py``
  validate_configuration: "kv_cache_dtype not supported"; TRITON_ATTN is the only backend listing the per-token-head
  names (triton_attn.py, 0.20.2 line 279 - 280, 0.34.0 line 333 - 335). FLASH_ATTN's supports_kv_cache_dtype on 0.20.2
  and 0.21.0 takes any is_quantized_kv_cache name where FlashAttention 3 runs; 0.22.1 only "fp8" / "fp8_e4m3".
* ``vllm/envs.py``: VLLM_ATTENTION_BACKEND in 0.14.1, absent from 0.15.1 on.

The model: Qwen/Qwen3-8B config.json (num_hidden_layers 36, num_key_value_heads 8, head_dim 128).
"""

from __future__ import annotations

import pytest

from core.cli.app import main
from core.dtypes import KvDtype
from core.errors import PlanError
from core.estimate import estimate
from core.files.launch import Target, export
from core.files.launch.serve_command import read_command
from core.plan import Engine, Plan, VllmVersion
from core.presets import plan_for_model

PTH = KvDtype.FP8_PER_TOKEN_HEAD
HEADER = "# vllm serve written by VRAM Planner (flags of vLLM {})\n"


def _on_vllm(version: VllmVersion, kv: KvDtype = PTH, tp: int = 1) -> Plan:
    return plan_for_model("Qwen/Qwen3-8B").with_inference(
        engine=Engine.VLLM, vllm_version=version, kv_dtype=kv, tensor_parallel=tp
    )


def test_its_page_adds_a_float32_scale_per_token_head_and_side_to_one_byte_elements() -> None:
    for tp in (1, 2):
        served = estimate(_on_vllm(VllmVersion.V0_20, tp=tp)).inference
        assert served is not None
        # 36 layers x K and V x 8 KV heads split by TP x (128 one-byte elements + one float32 scale)
        assert served.kv_bytes_per_token == 36 * 2 * (8 // tp) * (128 + 4)
    plain = estimate(_on_vllm(VllmVersion.V0_20, KvDtype.FP8)).inference  # per-tensor fp8: no scale per token
    assert plain is not None and plain.kv_bytes_per_token == 36 * 2 * 8 * 128


def test_releases_and_engines_that_keep_it() -> None:
    with pytest.raises(PlanError, match="vLLM 0.19's --kv-cache-dtype has no fp8_per_token_head"):
        _on_vllm(VllmVersion.V0_19)
    assert _on_vllm(VllmVersion.V0_34).inference.kv_dtype is PTH
    with pytest.raises(PlanError, match="takes no per-token-head format in any release"):
        plan_for_model("Qwen/Qwen3-8B").with_inference(engine=Engine.SGLANG, kv_dtype=PTH)
    with pytest.raises(PlanError, match="transformers' generate keeps no such cache"):
        plan_for_model("Qwen/Qwen3-8B").with_inference(engine=Engine.HF, kv_dtype=PTH)


def test_the_export_writes_it_and_the_reader_reads_it_back_not_as_plain_fp8() -> None:
    text = export(_on_vllm(VllmVersion.V0_20), Target.VLLM).text
    assert "--kv-cache-dtype fp8_per_token_head" in text.splitlines()[-1]
    read = read_command(text)
    assert read.stops == "" and read.fields["inference.kv_dtype"] is PTH
    for plain in ("fp8", "fp8_e4m3", "fp8_e5m2"):  # FP8_PER_TENSOR
        assert read_command(f"vllm serve Qwen/Qwen3-8B --kv-cache-dtype {plain}").fields["inference.kv_dtype"] is (
            KvDtype.FP8
        )


@pytest.mark.parametrize("name", ["fp8_ds_mla", "fp8_inc"])
def test_the_other_fp8_names_are_not_read_as_the_plans_fp8(name: str) -> None:
    read = read_command(HEADER.format("0.25") + f"vllm serve Qwen/Qwen3-8B --kv-cache-dtype {name}")
    assert read.fields["inference.kv_dtype"] is KvDtype.BF16  # the model's dtype, the flag said not expressed
    assert any(n.words == f"--kv-cache-dtype {name}" for n in read.unexpressed)


def test_the_command_line_takes_it(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["estimate", "--model", "qwen3-8b", "--mode", "inference", "--engine", "vllm", "--kv-dtype", PTH.value]
    assert main([*argv, "--vllm-version", "0.20"]) == 0
    capsys.readouterr()
    assert main([*argv, "--vllm-version", "0.19"]) != 0
    err = capsys.readouterr().err
    assert "has no fp8_per_token_head" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("kv", ["int8_per_token_head", "int4_per_token_head", "fp8_per_token_head"])
@pytest.mark.parametrize("backend", ["FLASH_ATTN", "flashinfer", "FLEX_ATTENTION"])
def test_a_backend_other_than_triton_stops_vllm_in_its_own_words(kv: str, backend: str) -> None:
    read = read_command(
        HEADER.format("0.25") + f"vllm serve Qwen/Qwen3-8B --kv-cache-dtype {kv} --attention-backend {backend}"
    )
    assert read.stops == (
        f"vLLM 0.25 would not start: 'Selected backend AttentionBackendEnum.{backend.upper()} is not valid for this "
        "configuration. Reason: ['kv_cache_dtype not supported']'"
    )


def test_triton_auto_and_flash_attn_on_0_20() -> None:
    command = "vllm serve Qwen/Qwen3-8B --kv-cache-dtype int8_per_token_head --attention-backend {}"
    triton = read_command(HEADER.format("0.25") + command.format("TRITON_ATTN"))
    assert triton.stops == "" and any("TRITON_ATTN" in n.words for n in triton.read)
    assert read_command(HEADER.format("0.25") + command.format("auto")).stops == ""
    # 0.20's FLASH_ATTN takes any quantised cache name where FlashAttention 3 runs: the card decides, not said stopped
    flash = read_command(HEADER.format("0.20") + command.format("FLASH_ATTN"))
    assert flash.stops == "" and any("Hopper" in n.why for n in flash.unexpressed)
    # a plain fp8 cache with a backend named: not this rule's
    assert (
        read_command(
            HEADER.format("0.25") + "vllm serve Qwen/Qwen3-8B --kv-cache-dtype fp8 --attention-backend FLASHINFER"
        ).stops
        == ""
    )


def test_the_old_environment_variable_is_said_ignored_from_0_15() -> None:
    read = read_command("VLLM_ATTENTION_BACKEND=FLASHINFER vllm serve Qwen/Qwen3-8B")
    assert any("Unknown vLLM environment variable detected" in n.why for n in read.unexpressed)


def test_the_plan_file_keeps_it_and_refuses_it_where_the_release_would() -> None:
    from core.errors import PlanFileError
    from core.files.planfile import dumps, loads

    plan = _on_vllm(VllmVersion.V0_20)
    text = dumps(plan)
    assert '"kv_dtype": "fp8_per_token_head"' in text
    assert loads(text).inference.kv_dtype is PTH
    with pytest.raises(PlanFileError, match="vLLM 0.19's --kv-cache-dtype has no fp8_per_token_head"):
        loads(text.replace('"vllm_version": "0.20"', '"vllm_version": "0.19"'))
