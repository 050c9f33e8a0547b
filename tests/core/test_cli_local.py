"""The command line over this machine (issue 27): ``gpus --local``, ``models --cached``, a Hub id
for ``--model`` read from the local Hugging Face cache, and ``export --to TARGET``.

GPUs come from stub ``nvidia-smi`` scripts on PATH (their output is the format
``nvidia-smi --query-gpu=... --format=csv,noheader,nounits`` prints, in MiB); caches are laid
out as huggingface_hub writes them (tests/core/test_hfcache.py builds them).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from core.catalogue import find_model
from core.cli.app import build_parser, main
from core.cli.plans import plan_from_args
from core.files import local_gpus
from core.files.launch import Target, export
from core.files.local_gpus import HostSources
from core.files.planfile import save as save_plan
from core.files.runconfig import load_run_config, resolve_model
from core.plan import Plan
from tests.core.test_hfcache import CONFIG, add_model, safetensors
from tests.stub_tools import printing, stub

posix_only = pytest.mark.skipif(os.name != "posix", reason="stub tools and links as POSIX has them")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def cache(hub_cache: Path) -> Path:
    """This machine's Hugging Face cache, where huggingface_hub would look (HF_HUB_CACHE; tests/core/conftest.py)."""
    return hub_cache


# ---- vramplan gpus --local ----------------------------------------------------------------------
@posix_only
def test_local_gpus_with_what_other_processes_hold(tools: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Two RTX 4090s (24,564 MiB as nvidia-smi reports them), one with 4,000 MiB held.
    stub(tools, "nvidia-smi", "echo 'NVIDIA GeForce RTX 4090, 24564, 4000, 20564, 550.54'\n"
                              "echo 'NVIDIA GeForce RTX 4090, 24564, 0, 24564, 550.54'")  # fmt: skip
    code, out, err = run(capsys, "gpus", "--local")
    assert code == 0 and err == ""
    assert out.startswith("2 × NVIDIA GeForce RTX 4090 (in ")
    assert "0: NVIDIA GeForce RTX 4090: 24,564 MiB, 20,564 MiB free now (rtx-4090)" in out
    assert "via nvidia-smi, driver 550.54; plan on it: --gpu rtx-4090" in out
    # The plan's default 10 % plus the 4,000 of 24,564 MiB held (16.3 %), rounded up to 0.1 %.
    # 4,000 MiB held (the stub's memory.used) = 3.906 GiB, rounded up to the 0.01 GiB the window types.
    assert "other processes hold 3.91 GiB (16%): --held-by-others 3.91 judges a plan against what is free now" in out
    assert "--gpus 2 plans on all of them" in out
    code, out, _ = run(capsys, "gpus", "--local", "--json")
    data = json.loads(out)
    assert code == 0 and data["found"] and data["same_cards"] == 2 and data["notes"] == []
    first = data["gpus"][0]
    assert first["catalogue_id"] == "rtx-4090" and first["free_bytes"] == 20564 * 2**20
    assert first["plan_hardware"] == {"gpu": "rtx-4090"}


@posix_only
def test_a_card_the_catalogue_lacks_plans_as_a_custom_card(tools: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stub(tools, "nvidia-smi", "echo 'NVIDIA Imaginary X1, 32768, 0, 32768, 1.0'")
    code, out, _ = run(capsys, "gpus", "--local")
    assert code == 0 and "plan on it: --gpu custom --custom-memory-gb 34.36" in out


@posix_only
def test_no_gpu_is_not_an_error(tools: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "gpus", "--local")
    assert (code, err) == (0, "")
    assert out.startswith("No GPU found on this machine (looked for nvidia-smi, rocm-smi)\n")
    code, out, _ = run(capsys, "gpus", "--local", "--json")
    assert code == 0 and json.loads(out)["found"] is False


@posix_only
def test_local_lists_the_host_s_ram_and_speed(
    tools: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # No SMBIOS files to read (as in a container): dmidecode's answer is the speed's source.
    monkeypatch.setattr(local_gpus, "HostSources", lambda: HostSources(str(tmp_path / "none"), str(tmp_path / "none")))
    monkeypatch.setattr(local_gpus, "read_meminfo", lambda: (64 * 10**9, 41 * 10**9))
    slots = "".join(
        f"Memory Device\n\tData Width: 64 bits\n\tSize: 32 GB\n\tBank Locator: P0 CHANNEL {c}\n\tType: DDR5\n"
        "\tSpeed: 5600 MT/s\n\tConfigured Memory Speed: 5600 MT/s\n\n"
        for c in "AB"
    )  # dmidecode 3.x's "Memory Device" layout, two modules in two channels
    printing(tools, "dmidecode", slots)
    code, out, err = run(capsys, "gpus", "--local")
    assert code == 0 and err == ""
    # 2 channels × 8 B × 5600 MT/s = 89.6 GB/s; 64 GB from the meminfo stand-in.
    assert "Host RAM 64.0 GB (41.0 GB free now), 89.6 GB/s (dmidecode: 2 × DDR5-5600)\n" in out
    assert (
        "  RAM from /proc/meminfo; plan with it: --host-ram-gb 64 --host-bandwidth 89.6 --host-memory-gbs 89.6\n" in out
    )
    code, out, _ = run(capsys, "gpus", "--local", "--json")
    host = json.loads(out)["host"]
    assert host["plan"] == {
        "parallel.host_ram_gb": 64.0,
        "inference.host_bandwidth_gb_s": 89.6,
        "parallel.host_memory_gbs": 89.6,
    }
    assert [m["channel"] for m in host["modules"]] == ["P0 CHANNEL A", "P0 CHANNEL B"] and host["notes"] == []


@posix_only
def test_a_hung_nvidia_smi_is_one_note_and_the_command_ends(tools: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stub(tools, "nvidia-smi", "sleep 30")
    started = time.monotonic()
    code, out, _ = run(capsys, "gpus", "--local", "--timeout", "0.5")
    assert time.monotonic() - started < 5  # the stub is killed at the deadline, not waited for
    assert code == 0 and out.count("nvidia-smi did not answer within 0.5 s and was stopped") == 1


@pytest.mark.parametrize("timeout", ["0", "-1", "1e9", "nan"])
def test_the_detection_wait_is_bounded(timeout: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "gpus", "--local", "--timeout", timeout)
    assert code == 2 and out == "" and err.startswith("vramplan: --timeout: ") and err.count("\n") == 1


# ---- vramplan models --cached -------------------------------------------------------------------
@posix_only
def test_cached_models_and_what_was_skipped(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    add_model(cache, "HuggingFaceTB/SmolLM2-135M")
    add_model(cache, "org/other")
    add_model(cache, "org/notjson", {"config.json": b"{nope"})
    add_model(cache, "org/liar", {"config.json": json.dumps(CONFIG).encode(), "model.safetensors": b"\x01"})
    code, out, err = run(capsys, "models", "--cached")
    assert code == 0 and err == ""
    assert out.startswith(f"Hugging Face cache at {cache}: 3 models, 1 skipped (")
    assert "HuggingFaceTB/SmolLM2-135M" in out and "135M params (config.json)" in out
    assert "org/notjson — is not valid JSON" in out
    code, out, _ = run(capsys, "models", "--cached", "--headers", "--json")
    data = json.loads(out)
    assert {s["name"] for s in data["skipped"]} == {"org/notjson", "org/liar"}  # the headers are read now
    smol = next(m for m in data["models"] if m["repo_id"] == "HuggingFaceTB/SmolLM2-135M")
    assert smol["params"] == 6 and smol["params_from"] == "headers"  # one 2×3 tensor in the stub shard
    code, out, _ = run(capsys, "models", "--cached", "--search", "smol", "--cache", str(cache))
    assert "1 of 3 models" in out and "org/other" not in out


def test_no_cache_is_said_plainly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "models", "--cached", "--cache", str(tmp_path / "none"))
    assert code == 0 and out.startswith(f"No Hugging Face cache at {tmp_path / 'none'}")


def test_cache_options_need_cached_and_search_is_bounded(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "models", "--cache", "/tmp")
    assert code == 2 and err == "vramplan: --cache and --headers apply to --cached\n"
    code, _, err = run(capsys, "models", "--search", "x" * 201)
    assert code == 2 and "at most 200" in err
    code, out, _ = run(capsys, "models", "--search", "qwen3 8b")
    assert code == 0 and out.startswith("qwen3-8b ") and out.count("\n") == 1


# ---- --model ORG/NAME: the local cache, offline -------------------------------------------------
@posix_only
def test_a_hub_id_for_model_reads_the_cache(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    add_model(cache, "someone/tiny-smol")  # SmolLM2-135M's config, with one 2×3 tensor of weights
    code, out, err = run(capsys, "estimate", "--model", "someone/tiny-smol", "--json")
    assert code == 0 and err == ""
    assert json.loads(out)["params"]["total"] == 6  # counted from the safetensors headers


@posix_only
def test_a_hub_id_not_cached_is_one_line_with_near_names(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    add_model(cache, "someone/tiny-smol")
    code, out, err = run(capsys, "estimate", "--model", "someone/tiny-smoll")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err == (
        f"vramplan: someone/tiny-smoll: not in the Hugging Face cache at {cache}; cached models near it: "
        "someone/tiny-smol; nor is it a catalogue model (see `vramplan models`)\n"
    )


def test_a_catalogue_hub_id_not_cached_falls_back_aloud(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "estimate", "--model", "Qwen/Qwen3-8B", "--json")
    assert code == 0
    assert err == (
        f"vramplan: note: Qwen/Qwen3-8B is not in the Hugging Face cache at {cache}: "
        "the catalogue's qwen3-8b (Qwen3 8B) is used\n"
    )
    assert json.loads(out)["params"]["total"] == find_model("qwen3-8b").spec.total_params()


@posix_only
def test_a_config_naming_a_cached_hub_id(cache: Path, tmp_path: Path) -> None:
    add_model(cache, "someone/tiny-smol")
    config = tmp_path / "axolotl.yml"
    config.write_text("base_model: someone/tiny-smol\nadapter: lora\nlora_r: 8\n")
    choice = resolve_model(load_run_config(config))
    assert choice is not None and choice.spec is not None and choice.spec.params_override == 6
    assert choice.how.startswith("Hugging Face cache: someone/tiny-smol, snapshot 0123456789ab (main)")
    assert choice.torch_dtype == "bf16"  # SmolLM2's config.json says bfloat16


# ---- vramplan export --to TARGET ----------------------------------------------------------------
@pytest.mark.parametrize("target", list(Target))
def test_export_prints_what_the_library_writes(target: Target, capsys: pytest.CaptureFixture[str]) -> None:
    options = ["--model", "llama-3.1-8b", "--method", "qlora", "--gpus", "2", "--strategy", "fsdp"]
    code, out, err = run(capsys, "export", "--to", target.value, *options)
    assert code == 0
    expected = export(plan_from_args(build_parser().parse_args(["estimate", *options])), target)
    assert out == expected.text
    lines = err.splitlines()
    if expected.unexpressed:
        assert (
            lines[0]
            == f"vramplan: the {expected.label} cannot express {len(expected.unexpressed)} of the plan's fields:"
        )
        assert lines[1:] == [f"  {u.field} — {u.why}" for u in expected.unexpressed]
    else:
        assert err == ""


def test_export_to_a_file_atomically_and_never_over_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "run.yaml"
    code, out, err = run(capsys, "export", "--to", "axolotl", "--model", "llama-3.1-8b", "--out", str(out_file))
    assert code == 0 and out == "" and err.endswith(f"vramplan: wrote {out_file} (axolotl config (YAML))\n")
    first = out_file.read_text()
    assert first.startswith("# axolotl config written by VRAM Planner")
    code, _, err = run(capsys, "export", "--to", "axolotl", "--model", "gpt2", "--out", str(out_file))
    assert code == 2 and err == f"vramplan: --out: {out_file} exists; --force replaces it\n"
    assert out_file.read_text() == first
    code, _, _ = run(capsys, "export", "--to", "axolotl", "--model", "gpt2", "--out", str(out_file), "--force")
    assert code == 0 and "base_model: openai-community/gpt2" in out_file.read_text()
    assert [p.name for p in tmp_path.iterdir()] == ["run.yaml"]  # no temporary file left behind


def test_export_from_a_plan_file_as_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan_file = tmp_path / "p.vramplan.json"
    save_plan(Plan(model=find_model("qwen3-8b").spec, model_id="qwen3-8b"), plan_file)
    code, out, err = run(capsys, "export", "--to", "vllm", "--plan", str(plan_file), "--json")
    data = json.loads(out)
    assert code == 0 and err == ""
    assert data["target"] == "vllm" and data["suffix"] == ".sh" and "vllm serve Qwen/Qwen3-8B" in data["text"]
    assert all(set(u) == {"field", "why"} for u in data["unexpressed"])


@posix_only
def test_a_model_from_the_cache_is_named_by_its_hub_id(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    add_model(cache, "someone/tiny-smol")
    code, out, err = run(capsys, "export", "--to", "trl", "--model", "someone/tiny-smol")
    assert code == 0 and json.loads(out)["model_name_or_path"] == "someone/tiny-smol"
    assert "model —" not in err  # the model is expressed: its Hub id
    code, out, _ = run(capsys, "export", "--to", "trl", "--model", "someone/tiny-smol", "--model-ref", "/data/m")
    assert json.loads(out)["model_name_or_path"] == "/data/m"


def test_launch_commands_take_the_script(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "export", "--to", "torchrun", "--model", "gpt2", "--gpus", "4", "--command", "train.py --cfg 'a b.yaml'"
    )
    assert code == 0 and out.rstrip().endswith("--nproc_per_node=4 train.py --cfg 'a b.yaml'")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--to", "nothing"], "argument --to: invalid choice: 'nothing'"),
        (["--to", "torchrun", "--command", "train.py 'open"], "--command: No closing quotation"),
        (["--to", "torchrun", "--command", "x " * 201], "--command: 1 to 200 words are expected"),
        (["--to", "trl", "--model-ref", "a\nb"], "--model-ref: one line of at most 500 characters is expected"),
        (["--to", "trl", "--model-ref", "m" * 501], "--model-ref: one line of at most 500 characters is expected"),
        # A mistyped card was written out as if it were one (the estimate refused it, the export did not).
        (["--to", "trl", "--gpu", "h100-80gb-sxm"], "hardware.gpu: 'h100-80gb-sxm' is not allowed"),
    ],
)
def test_export_bad_input_is_one_line(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "export", "--model", "gpt2", *args)
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err, err


@posix_only
def test_the_launcher_runs_the_new_subcommands(cache: Path, tmp_path: Path) -> None:
    import subprocess
    import sys

    shard = safetensors({"w": (1,)})
    add_model(cache, "someone/tiny-smol", {"config.json": json.dumps(CONFIG).encode(), "model.safetensors": shard})
    script = "import sys; from gui.launcher import main; sys.exit(main(sys.argv[1:]))"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    done = subprocess.run(
        [sys.executable, "-c", script, "models", "--cached"], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0 and "someone/tiny-smol" in done.stdout
    assert "PySide6" not in done.stderr
