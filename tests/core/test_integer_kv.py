"""int8 / int4 KV caches on vLLM and SGLang, per release (issue 23): planned where the engine's release keeps them, with
the engine's own page rule, refused elsewhere with what the release covers; the exports write the engine's name for
them and the pasted-command reader maps it back.

The facts, read in the released wheels (``pip download vllm==X --no-deps``, unzipped):

* vllm 0.19.1 ``vllm/config/cache.py`` CacheDType: no ``*_per_token_head``; 0.20.2 (bc150f502) lists
  ``"int8_per_token_head"`` (line 31) and no int4 one; 0.24.0 none of int4; 0.25.1 (752a3a504) lists
  ``"int4_per_token_head"`` (line 32) and ``"int8_per_token_head"`` (line 33). resources/engine_flags/vllm_serve.txt
  (tools/engine_flags/choices.py over the same wheels) records ``int8_per_token_head 0.20-0.34`` and
  ``int4_per_token_head 0.25-0.34``.
* vllm 0.20.2 ``vllm/v1/kv_cache_interface.py`` AttentionSpec.page_size_bytes: ``real_page_size += 2 * block_size *
  num_kv_heads * get_dtype_size(torch.float32)`` when ``kv_quant_mode.is_per_token_head``; real_page_size_bytes
  ``2 * block_size * num_kv_heads * head_size * get_dtype_size(dtype)`` (int8: 1 B); 0.25.1 the same with
  ``head_dim = self.head_size // 2`` for INT4_PER_TOKEN_HEAD (torch.uint8, two values a byte); 0.34.0 (62d4bc3c7)
  ``vllm/v1/attention/backends/triton_attn.py`` customize_spec: ``(hs_k + hs_v) * dtype size + 2 * scale_bytes``.
* ``triton_attn.py`` TritonAttentionBackend.supported_kv_cache_dtypes is the only backend list naming them (0.20.2,
  0.25.1, 0.34.0); no MLA backend does. int4's ``fast_hadamard_transform`` (0.25.1
  ``vllm/v1/attention/ops/int4_per_token_head.py``) asserts "Requires power-of-2 dim".
* sglang: resources/engine_flags/sglang_server.txt's ``--kv-cache-dtype`` values, 0.4.0 - 0.5.23: auto, bf16,
  bfloat16, fp4_e2m1, fp4_mx_block16, fp8_e4m3, fp8_e5m2, mxfp8, nvfp4; no integer format.

The models: Qwen/Qwen3-8B config.json (num_hidden_layers 36, num_key_value_heads 8, head_dim 128);
microsoft/Phi-3-mini-4k-instruct config.json (hidden_size 3072 / num_attention_heads 32: head 96);
deepseek-ai/DeepSeek-V2-Lite config.json (kv_lora_rank 512: multi-head latent attention).
"""

from __future__ import annotations

import pytest

from core.cli.app import main
from core.dtypes import KvDtype
from core.errors import PlanError
from core.estimate import estimate
from core.files.launch import Target, export
from core.files.launch.engine_flags import sglang_release_values, sglang_wheels, vllm_release_values
from core.files.launch.serve_command import read_command
from core.inputs import VLLM_KV_NAMES, release_keeps_kv
from core.plan import Engine, Plan, VllmVersion
from core.presets import plan_for_model


def _on_vllm(version: VllmVersion, kv: KvDtype, model: str = "Qwen/Qwen3-8B", tp: int = 1) -> Plan:
    return plan_for_model(model).with_inference(
        engine=Engine.VLLM, vllm_version=version, kv_dtype=kv, tensor_parallel=tp
    )


def test_the_planner_keeps_each_integer_cache_on_exactly_the_lines_whose_choices_hold_its_name() -> None:
    for kv, name in VLLM_KV_NAMES.items():
        for line in VllmVersion:
            takes = vllm_release_values(line.value, "--kv-cache-dtype").takes(name)  # type: ignore[union-attr]
            assert release_keeps_kv(kv, line) is takes, (kv, line)
    for wheel in sglang_wheels():  # floats only, every wheel
        names = sglang_release_values(wheel, "--kv-cache-dtype").names  # type: ignore[union-attr]
        assert not any(n.startswith("int") for n in names), wheel


@pytest.mark.parametrize(
    ("kv", "last_refused", "first_taken"),
    [(KvDtype.INT8, VllmVersion.V0_19, VllmVersion.V0_20), (KvDtype.INT4, VllmVersion.V0_24, VllmVersion.V0_25)],
)
def test_each_release_boundary(kv: KvDtype, last_refused: VllmVersion, first_taken: VllmVersion) -> None:
    with pytest.raises(PlanError) as refused:
        _on_vllm(last_refused, kv)
    assert refused.value.field == "inference.kv_dtype"
    assert _on_vllm(first_taken, kv).inference.kv_dtype is kv


def test_the_refusal_names_what_the_release_covers_and_the_lines_that_take_it() -> None:
    with pytest.raises(PlanError) as int8:
        _on_vllm(VllmVersion.V0_19, KvDtype.INT8)
    assert str(int8.value) == (
        "inference.kv_dtype: 'int8' is not allowed; expected one of bf16, fp16, fp32, fp8 on vLLM 0.19 (vLLM 0.19's "
        "--kv-cache-dtype has no int8_per_token_head: vLLM takes int8_per_token_head (int8) from 0.20; "
        "int4_per_token_head (int4) from 0.25; fp8_per_token_head from 0.20)"
    )
    with pytest.raises(PlanError, match=r"one of bf16, fp16, fp32, fp8, int8, fp8_per_token_head on vLLM 0\.24 "):
        _on_vllm(VllmVersion.V0_24, KvDtype.INT4)
    with pytest.raises(PlanError, match="SGLang's --kv-cache-dtype takes no integer format in any release"):
        plan_for_model("Qwen/Qwen3-8B").with_inference(engine=Engine.SGLANG, kv_dtype=KvDtype.INT8)


def test_the_command_line_gives_the_same_one_line_refusal(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["estimate", "--model", "qwen3-8b", "--mode", "inference", "--engine", "vllm", "--vllm-version", "0.19"]
    assert main([*argv, "--kv-dtype", "int8"]) != 0
    err = capsys.readouterr().err
    assert "vLLM 0.19's --kv-cache-dtype has no int8_per_token_head" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("kv", "version", "per_head_side"),
    # bytes per token, layer, KV head and side (K or V): the integers of a 128-wide head plus one float32 scale
    [(KvDtype.INT8, VllmVersion.V0_20, 128 * 1 + 4), (KvDtype.INT4, VllmVersion.V0_25, 128 // 2 + 4)],
)
def test_the_page_rule_adds_a_float32_scale_per_token_head_and_side(
    kv: KvDtype, version: VllmVersion, per_head_side: int
) -> None:
    for tp in (1, 2):
        served = estimate(_on_vllm(version, kv, tp=tp)).inference
        assert served is not None
        assert served.kv_bytes_per_token == 36 * 2 * (8 // tp) * per_head_side  # 36 layers, 8 KV heads split by TP
    # 16-bit on the same line: no scales (2 B an element)
    plain = estimate(_on_vllm(version, KvDtype.BF16)).inference
    assert plain is not None and plain.kv_bytes_per_token == 36 * 2 * 8 * 128 * 2


def test_the_attention_backend_refuses_what_vllm_refuses() -> None:
    # Phi-3's head of 96: Triton takes int8 (head >= 32), and int4's Hadamard rotation wants a power of 2.
    assert _on_vllm(VllmVersion.V0_25, KvDtype.INT8, "microsoft/Phi-3-mini-4k-instruct").inference.kv_dtype
    with pytest.raises(PlanError, match="Hadamard transform of a power-of-2 size, not 96"):
        _on_vllm(VllmVersion.V0_25, KvDtype.INT4, "microsoft/Phi-3-mini-4k-instruct")
    # latent attention runs an MLA backend, none of which keeps a per-token-head cache
    with pytest.raises(PlanError, match="MLA attention backends have no int8_per_token_head"):
        _on_vllm(VllmVersion.V0_34, KvDtype.INT8, "deepseek-ai/DeepSeek-V2-Lite")


@pytest.mark.parametrize(("kv", "version"), [(KvDtype.INT8, VllmVersion.V0_20), (KvDtype.INT4, VllmVersion.V0_25)])
def test_the_export_writes_vllms_name_and_the_reader_maps_it_back(kv: KvDtype, version: VllmVersion) -> None:
    text = export(_on_vllm(version, kv), Target.VLLM).text
    assert f"--kv-cache-dtype {VLLM_KV_NAMES[kv]}" in text.splitlines()[-1]
    read = read_command(text)
    assert read.stops == "" and read.fields["inference.kv_dtype"] is kv
    assert read.fields["inference.vllm_version"] is version  # the export's header names its line
    # pasted with no release named: the default line (0.19) would not start, as vLLM's argparse says
    pasted = read_command(f"vllm serve Qwen/Qwen3-8B --kv-cache-dtype {VLLM_KV_NAMES[kv]}")
    assert f"invalid choice: '{VLLM_KV_NAMES[kv]}'" in pasted.stops


def test_import_command_reads_the_name_onto_the_release_its_option_names(capsys: pytest.CaptureFixture[str]) -> None:
    command = "vllm serve Qwen/Qwen3-8B --kv-cache-dtype int4_per_token_head"
    assert main(["import-command", command, "--vllm-version", "0.25", "--gpu", "h100-sxm"]) == 0
    assert "--kv-cache-dtype int4_per_token_head  → KV cache = int4" in capsys.readouterr().out
    # no release named: vLLM 0.19 (the default) would not start, and says which line takes it
    assert main(["import-command", command, "--gpu", "h100-sxm"]) != 0
    assert "vLLM 0.25 is the first that takes it" in capsys.readouterr().err
