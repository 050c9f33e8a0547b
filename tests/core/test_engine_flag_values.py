"""The VALUES each vLLM and SGLang release takes for the options the planner reads or writes (issue 23), recorded
beside the options in resources/engine_flags/vllm_serve.txt and sglang_server.txt by tools/engine_flags/choices.py
from the same wheels (``pip download vllm==X --no-deps`` / ``sglang==X``, read as zip files); a pasted value the
release refuses stops as the engine stops on it, and a plan whose weight format the release does not load is refused.

Every release fact below was checked by hand in the wheel named (unzipped):

* vllm 0.6.6.post1 ``vllm/engine/arg_utils.py`` line 348: ``--kv-cache-dtype`` ``choices=['auto', 'fp8', 'fp8_e5m2',
  'fp8_e4m3']``; line 529: ``--quantization`` ``choices=[*QUANTIZATION_METHODS, None]``, the list of
  ``vllm/model_executor/layers/quantization/__init__.py`` line 6 (no ``mxfp4``); line 305: ``--load-format``
  ``choices=[f.value for f in LoadFormat]``.
* vllm 0.9.2 ``vllm/config.py`` line 78: ``QuantizationMethods = Any`` (the Literal only under TYPE_CHECKING), so the
  ``quantization`` field gets no argparse choices; line 955: ModelConfig._verify_quantization raises "Unknown
  quantization method: {q}. Must be one of {supported_quantization}." for a name not in QUANTIZATION_METHODS
  (``quantization/__init__.py`` line 9's Literal: no ``mxfp4``).
* vllm 0.10.2 ``vllm/model_executor/layers/quantization/__init__.py`` line 36: ``"mxfp4"`` in QuantizationMethods.
* vllm 0.27.1 the same file line 28: ``"bitsandbytes"``; vllm 0.28.0's Literal (line 12 on) has no bitsandbytes and
  the wheel no ``quantization/bitsandbytes.py``.
* sglang 0.4.0 ``sglang/srt/server_args.py`` line 296: ``--kv-cache-dtype`` ``choices=["auto", "fp8_e5m2"]``; line
  604: ``--attention-backend`` ``choices=["flashinfer", "triton", "torch_native"]``. 0.4.1's line 330 the same kv
  choices; 0.4.1.post7's line 358 ``["auto", "fp8_e5m2", "fp8_e4m3"]``.
* sglang 0.5.1 ``server_args.py`` line 913: ``"mxfp4"`` among the ``--quantization`` choices; 0.4.10's (line 749 on)
  has none.
* Python's argparse (3.10 - 3.13 ``argparse.py`` ``_check_value``): "invalid choice: %(value)r (choose from
  %(choices)s)", each choice repr'd and joined with ", "; the option named by its strings joined with "/".
"""

from __future__ import annotations

import pytest

from core.cli.app import main
from core.dtypes import WeightFormat
from core.errors import PlanError
from core.files.launch import sglang as sg
from core.files.launch import vllm as vl
from core.files.launch.engine_flags import sglang_release_values, sglang_wheels, vllm_release_values
from core.files.launch.serve_command import read_command
from core.plan import Engine, SglangVersion, VllmVersion
from core.presets import plan_for_model

MODEL = "Qwen/Qwen3-8B"


def test_vllm_values_per_release_line() -> None:
    kv = vllm_release_values("0.6", "--kv-cache-dtype")
    assert kv is not None and not kv.free and set(kv.names) == {"auto", "fp8", "fp8_e5m2", "fp8_e4m3"}
    for line in ("0.6", "0.7", "0.8"):  # argparse's choices
        quant = vllm_release_values(line, "--quantization")
        assert quant is not None and not quant.free and "fp8" in quant.names and not quant.takes("mxfp4"), line
    old = vllm_release_values("0.9", "--quantization")  # any name parses; QUANTIZATION_METHODS is checked after
    assert old is not None and old.free and "awq" in old.names and not old.takes("mxfp4")
    new = vllm_release_values("0.10", "--quantization")
    assert new is not None and new.takes("mxfp4")
    assert vllm_release_values("0.27", "--quantization").takes("bitsandbytes")  # type: ignore[union-attr]
    assert not vllm_release_values("0.28", "--quantization").takes("bitsandbytes")  # type: ignore[union-attr]
    assert not vllm_release_values("0.9", "--load-format").free  # type: ignore[union-attr]
    assert vllm_release_values("0.10", "--load-format").takes("anything")  # type: ignore[union-attr]
    for line in VllmVersion:  # the same six spellings of --dtype in every line; fp8 KV in every line
        dtype = vllm_release_values(line.value, "--dtype")
        assert dtype is not None and set(dtype.names) == {"auto", "half", "float16", "bfloat16", "float", "float32"}
        assert vllm_release_values(line.value, "--kv-cache-dtype").takes("fp8")  # type: ignore[union-attr]
    assert vllm_release_values("0.19", "--max-model-len") is None  # an option whose values are not recorded


def test_sglang_values_per_wheel() -> None:
    kv = sglang_release_values("0.4.0", "--kv-cache-dtype")
    assert kv is not None and set(kv.names) == {"auto", "fp8_e5m2"}
    assert not sglang_release_values("0.4.1", "--kv-cache-dtype").takes("fp8_e4m3")  # type: ignore[union-attr]
    assert sglang_release_values("0.4.1.post7", "--kv-cache-dtype").takes("fp8_e4m3")  # type: ignore[union-attr]
    # a command naming no .postN: what any wheel of its release takes
    assert sglang_release_values("0.4.1", "--kv-cache-dtype", every_patch=True).takes("fp8_e4m3")  # type: ignore
    backends = sglang_release_values("0.4.0", "--attention-backend")
    assert backends is not None and set(backends.names) == {"flashinfer", "triton", "torch_native"}
    assert not sglang_release_values("0.4.10", "--quantization").takes("mxfp4")  # type: ignore[union-attr]
    assert sglang_release_values("0.5.1", "--quantization").takes("mxfp4")  # type: ignore[union-attr]
    for wheel in sglang_wheels():  # the exports' fp8 KV name, in every wheel
        assert sglang_release_values(wheel, "--kv-cache-dtype").takes(sg.FP8_KV), wheel  # type: ignore[union-attr]


def test_a_pasted_quantization_the_vllm_line_refuses_stops_in_its_own_words() -> None:
    cmd = "vllm serve openai/gpt-oss-20b --quantization mxfp4 --max-model-len 8192"
    stops = read_command(cmd, vllm_version=VllmVersion.V0_8).stops
    assert stops.startswith(
        "vLLM 0.8 would not start: 'vllm serve: error: argument --quantization/-q: invalid choice: 'mxfp4' (choose "
        "from 'aqlm', 'awq', "
    )
    assert stops.endswith("'; vLLM 0.10 is the first that takes it")
    # 0.9 parses any name and stops at start-up
    later = read_command(cmd, vllm_version=VllmVersion.V0_9).stops
    assert later.startswith("vLLM 0.9 would not start: 'Unknown quantization method: mxfp4. Must be one of ['aqlm', ")
    assert later.endswith("].'; vLLM 0.10 is the first that takes it")
    read = read_command(cmd, vllm_version=VllmVersion.V0_10)
    assert read.stops == "" and read.fields["inference.weight_dtype"] is WeightFormat.MXFP4
    # -q and a unique prefix are the same option; a release that dropped a name says the last that had it
    dropped = read_command(f"vllm serve {MODEL} -q bitsandbytes", vllm_version=VllmVersion.V0_28).stops
    assert dropped.startswith("vLLM 0.28 would not start: 'Unknown quantization method: bitsandbytes.")
    assert dropped.endswith("; vLLM 0.27 is the last that takes it")
    prefixed = read_command(f"vllm serve {MODEL} --quant mxfp4", vllm_version=VllmVersion.V0_7).stops
    assert "argument --quantization/-q: invalid choice: 'mxfp4'" in prefixed


def test_an_invalid_choice_stops_argparse_before_the_unrecognised_words() -> None:
    read = read_command(f"vllm serve {MODEL} --frobnicate 1 --dtype bf16", vllm_version=VllmVersion.V0_19)
    assert read.stops == (
        "vLLM 0.19 would not start: 'vllm serve: error: argument --dtype: invalid choice: 'bf16' (choose from "
        "'auto', 'bfloat16', 'float', 'float16', 'float32', 'half')'; no vLLM release read takes it"
    )


def test_a_pasted_sglang_value_is_checked_against_the_wheel_it_names() -> None:
    cmd = f"python -m sglang.launch_server --model-path {MODEL} --kv-cache-dtype fp8_e4m3"
    assert read_command(cmd, sglang_version=SglangVersion.V0_4_0).stops == (
        "SGLang 0.4.0 would not start: 'launch_server.py: error: argument --kv-cache-dtype: invalid choice: "
        "'fp8_e4m3' (choose from 'auto', 'fp8_e5m2')'; SGLang 0.4.1.post7 is the first that takes it"
    )
    # the exact wheel an image tag names: 0.4.1 has not it, its .post7 has
    assert "invalid choice: 'fp8_e4m3'" in read_command(f"docker run lmsysorg/sglang:v0.4.1 {cmd}").stops
    assert read_command(f"docker run lmsysorg/sglang:v0.4.1.post7 {cmd}").stops == ""
    backend = f"python -m sglang.launch_server --model-path {MODEL} --attention-backend fa3"
    stops = read_command(backend, sglang_version=SglangVersion.V0_4_0).stops
    assert "argument --attention-backend: invalid choice: 'fa3' (choose from 'flashinfer', 'torch_native', " in stops
    quant = "python -m sglang.launch_server --model-path openai/gpt-oss-20b --quantization mxfp4"
    assert read_command(quant, sglang_version=SglangVersion.V0_4_10).stops.endswith(
        "SGLang 0.5.1 is the first that takes it"
    )
    assert read_command(quant, sglang_version=SglangVersion.V0_5_1).stops == ""


def _served(engine: str, version: str, fmt: WeightFormat):  # type: ignore[no-untyped-def]
    field = f"{engine}_version"
    model = "gpt-oss-20b" if fmt is WeightFormat.MXFP4 else "llama-3.1-8b"
    return (
        plan_for_model(model)
        .with_hardware(gpu="h100-sxm")
        .with_inference(engine=engine, weight_dtype=fmt, **{field: version})
    )


def test_a_weight_format_the_release_does_not_load_is_refused_with_what_it_covers() -> None:
    with pytest.raises(PlanError) as refused:
        _served("vllm", "0.9", WeightFormat.MXFP4)
    assert refused.value.field == "inference.weight_dtype"
    assert refused.value.allowed == (
        "one of bf16, fp16, fp32, FP8, int8, AWQ int4 (g128), GPTQ int4 (g128), GPTQ int8 (g128), bitsandbytes NF4 "
        "on vLLM 0.9"
    )
    assert refused.value.reason.endswith("its --quantization takes the format from vLLM 0.10")
    with pytest.raises(PlanError, match="up to vLLM 0.27"):
        _served("vllm", "0.28", WeightFormat.NF4)
    with pytest.raises(PlanError, match="from SGLang 0.5.1"):
        _served("sglang", "0.4.10", WeightFormat.MXFP4)
    assert _served("vllm", "0.10", WeightFormat.MXFP4).inference.weight_dtype is WeightFormat.MXFP4
    assert _served("vllm", "0.27", WeightFormat.NF4).inference.engine is Engine.VLLM


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_the_plan_s_rule_is_the_tables_for_every_format_and_release(engine: str) -> None:
    """core.inputs.VLLM_WEIGHT_LINES / SGLANG_WEIGHT_RELEASES (which Plan validation reads) against the wheels' value
    rows: a format is planned on exactly the releases whose --quantization takes the name its export writes."""
    names, releases, values_of = (
        (vl.QUANTIZATION, [v.value for v in VllmVersion], vllm_release_values)
        if engine == "vllm"
        else (sg.QUANTIZATION, [v.value for v in SglangVersion], sglang_release_values)
    )
    for fmt, name in names.items():
        for release in releases:
            takes = values_of(release, "--quantization").takes(name)  # type: ignore[union-attr]
            try:
                _served(engine, release, fmt)
                planned = True
            except PlanError as exc:
                planned = exc.field != "inference.weight_dtype"  # refused for another reason
            assert planned is takes, (fmt, release)


def test_the_command_line_says_the_engine_s_refusal_before_the_plan_s(capsys: pytest.CaptureFixture[str]) -> None:
    # The image's tag names 0.8 (plan_from_command) or --vllm-version does (the options over the command): either way
    # the plan is refused, vLLM's own line first.
    for argv in (
        ["docker run --gpus all vllm/vllm-openai:v0.8.5 --model openai/gpt-oss-20b --quantization mxfp4"],
        ["vllm serve openai/gpt-oss-20b --quantization mxfp4", "--vllm-version", "0.8"],
    ):
        assert main(["import-command", *argv, "--gpu", "h100-sxm"]) != 0
        err = capsys.readouterr().err
        assert "the launch command: vLLM 0.8 would not start: 'vllm serve: error: argument --quantization/-q: " in err
        assert "As a plan: " in err and "from vLLM 0.10" in err
