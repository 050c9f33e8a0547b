"""The SGLang and Ollama launch exports: the flags and names their sources give, per release, the
values the plan's estimate assumed (SGLang's static fraction, Ollama's parallel slots and context),
and what each cannot say.

Flags: sglang's released wheels (``pip download sglang==X --no-deps``; no wheel records its commit),
``sglang/srt/server_args.py`` and, in 0.5.23, ``sglang/srt/arg_groups/fields/*.py``. Ollama's names:
ollama/ollama ``envconfig/config.go``, ``api/types.go``, ``parser/parser.go`` at v0.5.0 (aed1419c),
v0.6.0 (aee28501), v0.6.8 (6a74bba7), v0.9.0 (5f57b0ef), v0.11.0 (d5520684).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import replace

import pytest

from core.catalogue import find_gpu, find_model
from core.dtypes import CacheType, KvDtype, WeightFormat
from core.errors import PlanError
from core.files.launch import Target, export
from core.files.launch.ollama import read_ollama
from core.files.launch.sglang import read_sglang
from core.plan import Engine, Hardware, Inference, OllamaVersion, Plan, SglangVersion
from core.serving.ollama import ollama_defaults, ollama_estimate

LLAMA = find_model("llama-3.1-8b")
H100 = Hardware(gpu="h100-sxm")


def served(**inference: object) -> Plan:
    return Plan(model=LLAMA.spec, model_id=LLAMA.id, hardware=H100, inference=Inference(**inference))  # type: ignore[arg-type]


def command(text: str) -> str:
    return text.splitlines()[-1]


# ---- SGLang --------------------------------------------------------------------------------------
def test_sglang_writes_the_fraction_the_estimate_took() -> None:
    """0.5.23 on an H100 SXM (81,559 MiB): reserve = 512 + 1.5 x 8,192 + 2 x 256 + 1 / 8 x 1,024 MiB and
    8 MiB for each of the 0.5.10+ prefill graphs, round((gpu_mem - reserve) / gpu_mem, 3) = 0.83
    (core.serving.sglang_versions, from the 0.5.23 wheel's arg_groups/memory_hook.py)."""
    plan = served(engine=Engine.SGLANG, context=8192, concurrent=16, kv_dtype=KvDtype.FP8)
    exported = export(plan, Target.SGLANG)
    assert command(exported.text) == (
        "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B --dtype bfloat16 "
        "--kv-cache-dtype fp8_e5m2 --context-length 8192 --tp-size 1 --mem-fraction-static 0.83"
    )
    assert "# pip install sglang==0.5.23" in exported.text
    assert "SGLang 0.5.23's default on the NVIDIA H100 SXM 80GB with TP 1 x PP 1" in exported.text
    assert [u.field for u in exported.unexpressed] == ["inference.concurrent"]  # the clients' load
    # 0.4.0-0.4.5: the table by tensor-parallel size, 0.87 from two GPUs (0.4.5 server_args.py).
    old = export(
        replace(plan, inference=replace(plan.inference, sglang_version=SglangVersion.V0_4_5, tensor_parallel=2)),
        Target.SGLANG,
    )
    assert command(old.text).endswith("--tp-size 2 --mem-fraction-static 0.87")
    # A fraction the plan gives is written as given.
    given = export(plan.with_inference(mem_fraction_static=0.7), Target.SGLANG)
    assert command(given.text).endswith("--mem-fraction-static 0.7")


def test_a_card_smaller_than_sglangs_reserve_has_no_fraction_to_write() -> None:
    """0.5.23 keeps 512 + 1.5 x 2,048 + 2 x 8 + 128 MiB and 8 MiB a prefill graph outside the fraction on
    a card under 20 GiB (core.serving.sglang_versions.reserved_mib): on a 2 GB card the default is
    negative, which no --mem-fraction-static can say (a plan may give 0.01 to 1)."""
    tiny = served(engine=Engine.SGLANG).with_changes(hardware=Hardware(gpu="custom", custom_memory_gb=2.0))
    exported = export(tiny, Target.SGLANG)
    assert "--mem-fraction-static" not in exported.text and exported.cannot("inference.mem_fraction_static")


def test_sglang_flags_by_release() -> None:
    """--pp-size from 0.4.7 (0.4.6's server_args.py has none); --quantization mxfp4 from 0.5.1 (0.4.10's
    QUANTIZATION_CHOICES lack it); --dp-size for replicas; a context past the model's own needs
    SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 (sglang/srt/configs/model_config.py raises without it)."""
    piped = served(engine=Engine.SGLANG, pipeline_parallel=2, replicas=3, sglang_version=SglangVersion.V0_4_7)
    assert "--tp-size 1 --pp-size 2 --dp-size 3" in export(piped, Target.SGLANG).text
    too_old = export(piped.with_inference(sglang_version=SglangVersion.V0_4_6), Target.SGLANG)
    assert "--pp-size" not in too_old.text and too_old.cannot("inference.pipeline_parallel")
    oss = find_model("gpt-oss-20b")
    mx = Plan(
        model=oss.spec,
        model_id=oss.id,
        hardware=H100,
        inference=Inference(engine=Engine.SGLANG, weight_dtype=WeightFormat.MXFP4),
    )
    assert "--quantization mxfp4" in export(mx, Target.SGLANG).text
    with pytest.raises(PlanError, match="from SGLang 0.5.1"):  # core.plan refuses it: no export to write
        mx.with_inference(sglang_version=SglangVersion.V0_4_10)
    long = export(served(engine=Engine.SGLANG, context=262_144), Target.SGLANG)
    assert command(long.text).startswith("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 python -m sglang.launch_server")
    assert read_sglang(long.text)[1]["inference.context"] == 262_144


def test_sglang_reads_back() -> None:
    plan = served(engine=Engine.SGLANG, sglang_version=SglangVersion.V0_5_3, tensor_parallel=2, mem_fraction_static=0.8)
    model, fields = read_sglang(export(plan, Target.SGLANG).text)
    assert model == "meta-llama/Llama-3.1-8B"
    assert fields["inference.sglang_version"] is SglangVersion.V0_5_3
    assert (fields["inference.tensor_parallel"], fields["inference.mem_fraction_static"]) == (2, 0.8)


def test_what_sglang_cannot_say() -> None:
    """Another engine's plan is written but its engine is named; SGLang's KV cache is the model's
    dtype or fp8 (--kv-cache-dtype auto | fp8_e5m2 | fp8_e4m3 ...), never int8: such a plan is refused before any
    export (resources/engine_flags/sglang_server.txt: no integer --kv-cache-dtype in 0.4.0 - 0.5.23); LLM.int8 is no
    in-flight quantisation of SGLang's."""
    vllm_plan = export(served(engine=Engine.VLLM), Target.SGLANG)
    assert vllm_plan.cannot("inference.engine") and "--mem-fraction-static" not in vllm_plan.text
    assert "vLLM's memory rules" in next(u.why for u in vllm_plan.unexpressed if u.field == "inference.engine")
    with pytest.raises(PlanError, match="SGLang's --kv-cache-dtype takes no integer format"):
        served(engine=Engine.SGLANG, kv_dtype=KvDtype.INT8)
    assert export(served(engine=Engine.SGLANG, weight_dtype=WeightFormat.INT8), Target.SGLANG).cannot(
        "inference.weight_dtype"
    )


# ---- Ollama --------------------------------------------------------------------------------------
def ollama_plan(version: OllamaVersion, **inference: object) -> Plan:
    plan = served(engine=Engine.LLAMACPP, ollama_version=version, **inference)
    return ollama_defaults(plan, find_gpu("h100-sxm"), frozenset(f"inference.{k}" for k in inference))


def test_ollama_writes_the_lines_defaults_as_the_estimate_took_them() -> None:
    """The 0.10 line (v0.11.0 d5520684): OLLAMA_NUM_PARALLEL defaults to 1, num_ctx to
    OLLAMA_CONTEXT_LENGTH's 4,096, flash attention off (envconfig/config.go); num_batch 512 and
    num_gpu -1 (api/types.go DefaultOptions): Ollama's estimate places every layer."""
    plan = ollama_plan(OllamaVersion.V0_10)
    exported = export(plan, Target.OLLAMA)
    body = [line for line in exported.text.splitlines() if not line.startswith("#")]
    assert body == [
        "OLLAMA_NUM_PARALLEL=1 OLLAMA_FLASH_ATTENTION=0 OLLAMA_CONTEXT_LENGTH=4096 CUDA_VISIBLE_DEVICES=0 "
        "ollama serve &",
        "until ollama list >/dev/null 2>&1; do sleep 1; done",
        "cat > Modelfile <<'EOF'",
        "FROM ./Llama-3.1-8B-Q4_K_M.gguf",
        "PARAMETER num_ctx 4096",
        "PARAMETER num_batch 512",
        "PARAMETER num_predict 256",
        "EOF",
        "ollama create llama-3.1-8b-q4_k_m -f Modelfile",
    ]
    layers = ollama_estimate(plan, find_gpu("h100-sxm")).layers
    assert f"{layers} of 33 layers on the NVIDIA H100 SXM 80GB (num_gpu is left to it)" in exported.text
    assert [u.field for u in exported.unexpressed] == ["model"]  # the GGUF file stands for the real one


def test_ollama_environment_by_line() -> None:
    """OLLAMA_CONTEXT_LENGTH is in envconfig from v0.5.13: not written for the 0.5 line (v0.5.0 lacks
    it; the Modelfile's num_ctx carries the context), written from the 0.6.7 line. Two pipeline GPUs:
    OLLAMA_SCHED_SPREAD=1 (server/sched.go skips its one-GPU try) and CUDA_VISIBLE_DEVICES=0,1."""
    old = export(ollama_plan(OllamaVersion.V0_5), Target.OLLAMA)
    assert "OLLAMA_CONTEXT_LENGTH" not in old.text and "PARAMETER num_ctx 2048" in old.text
    assert "OLLAMA_CONTEXT_LENGTH=4096" in export(ollama_plan(OllamaVersion.V0_6_7), Target.OLLAMA).text
    spread = export(
        ollama_plan(
            OllamaVersion.V0_7,
            pipeline_parallel=2,
            concurrent=4,
            context=8192,
            gpu_layers=20,
            cache_type=CacheType.Q8_0,
            flash_attention=True,
        ),
        Target.OLLAMA,
    )
    assert (
        "OLLAMA_NUM_PARALLEL=4 OLLAMA_FLASH_ATTENTION=1 OLLAMA_KV_CACHE_TYPE=q8_0 OLLAMA_CONTEXT_LENGTH=8192 "
        "OLLAMA_SCHED_SPREAD=1 CUDA_VISIBLE_DEVICES=0,1 ollama serve &"
    ) in spread.text
    assert "PARAMETER num_gpu 20" in spread.text and "(num_gpu caps it)" in spread.text
    fields = read_ollama(spread.text)
    assert fields["inference.ollama_version"] is OllamaVersion.V0_7
    assert (fields["inference.pipeline_parallel"], fields["inference.gpu_layers"]) == (2, 20)
    assert fields["inference.cache_type"] is CacheType.Q8_0


def test_what_ollama_cannot_say() -> None:
    """num_batch is llama.cpp's n_batch; Ollama leaves n_ubatch at 512 (llama/llama.go NewContextParams):
    a larger micro-batch cannot be asked; its cache types are f16, q8_0 and q4_0 (fs/ggml/ggml.go
    SupportsKVCacheType). A plan without Ollama, or on another engine, is written with its reason listed."""
    big = export(ollama_plan(OllamaVersion.V0_10, ubatch=2048), Target.OLLAMA)
    assert big.cannot("inference.ubatch") and "PARAMETER num_batch 512" in big.text
    bf16 = export(ollama_plan(OllamaVersion.V0_10, cache_type=CacheType.BF16), Target.OLLAMA)
    assert bf16.cannot("inference.cache_type") and "OLLAMA_KV_CACHE_TYPE" not in bf16.text
    bare = export(served(engine=Engine.LLAMACPP), Target.OLLAMA)
    assert bare.cannot("inference.ollama_version")
    assert export(served(engine=Engine.VLLM), Target.OLLAMA).cannot("inference.engine")
    assert export(served(engine=Engine.LLAMACPP, tensor_parallel=1, replicas=2), Target.OLLAMA).cannot(
        "inference.replicas"
    )
    # The llama-server command is not what Ollama starts: the Ollama line is listed there.
    assert export(ollama_plan(OllamaVersion.V0_10), Target.LLAMA_SERVER).cannot("inference.ollama_version")


def test_ollama_names_need_no_quoting() -> None:
    """parser/parser.go quotes a value only with spaces or new lines; types/model/name.go allows letters,
    digits, '_', '-' and '.' in a model name: a typed model reference comes out as such a name."""
    exported = export(ollama_plan(OllamaVersion.V0_10), Target.OLLAMA, model_ref='evil "name"\n$(rm -rf ~)/x y')
    source = next(line for line in exported.text.splitlines() if line.startswith("FROM "))
    assert re.fullmatch(r"FROM \./[A-Za-z0-9._-]+\.gguf", source), source
    create = shlex.split(exported.text.splitlines()[-1])
    assert create[:2] == ["ollama", "create"] and re.fullmatch(r"[a-z0-9_][a-z0-9._-]*", create[2])


def test_a_mixture_of_experts_plan_is_written_for_the_newest_line_that_takes_it() -> None:
    # A llama-server plan of Mixtral with every layer on the GPU exported for Ollama: the newest line,
    # 0.30, leaves the layers to llama.cpp's fit, whose step 4 for experts is not modelled (core.plan
    # refuses that plan), so the file named 0.30 and could not be read back as a plan (the round-trip
    # property test drew it now and then). 0.15.5 places an MoE model with its own layout.
    plan = Plan(
        model=find_model("mixtral-8x7b-v0.1").spec, model_id="mixtral-8x7b-v0.1", hardware=Hardware(gpu="rtx-4090")
    )
    served = plan.with_inference(engine=Engine.LLAMACPP, context=4096)
    exported = export(served, Target.OLLAMA)
    fields = read_ollama(exported.text)
    assert fields["inference.ollama_version"] is OllamaVersion.V0_15_5
    assert exported.cannot("inference.ollama_version")
    # A dense model keeps the newest line.
    dense = Plan(model=find_model("llama-3.1-8b").spec, model_id="llama-3.1-8b", hardware=Hardware(gpu="rtx-4090"))
    back = read_ollama(export(dense.with_inference(engine=Engine.LLAMACPP), Target.OLLAMA).text)
    assert back["inference.ollama_version"] is OllamaVersion.V0_30
