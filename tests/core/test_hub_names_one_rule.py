"""One rule for which catalogue model a Hub id means, asked the same way by every reader (branch h91hub).

Before, the run-config importer matched a name by its key across organisations (``core.files.runconfig.name_key``)
while the command line and the Hugging Face cache read only the same organisation's tunes
(``core.catalogue.catalogue_model_of_hub_id``); the pasted-command reader tried the key again on the name less its
quantisation. So ``NousResearch/Meta-Llama-3-8B`` was Llama 3 8B in an axolotl file and no model on the command
line, ``Qwen/Qwen3-30B-A3B-Instruct-2507`` the reverse, and ``Qwen/Qwen3-8B-AWQ`` a model only in ``vllm serve``.
Now each asks :func:`core.hub_names.catalogue_model_of_name`; this table asks every entry point for each id:

- the rule itself;
- a training config naming it (a PEFT ``adapter_config.json``'s ``base_model_name_or_path``, read by
  ``resolve_model`` as every importer's model is);
- a pasted ``vllm serve ID`` (``core.files.launch.serve_command``);
- the Hugging Face cache's answer for an id it lacks (``resolve_hub_id(...).catalogue_id``), an empty cache here,
  and the cache scan's for an id it holds (``scan_cache``, listed by ``vramplan models --cached``);
- the command line's ``--model`` (``core.cli.plans.named_model``, an empty cache through ``HF_HUB_CACHE``).

Each id is a real repository: its model card, https://huggingface.co/<id>, names the model it was made from (the
"finetuned from" / "quantized from" / base-model line).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.cli.app import main
from core.cli.plans import named_model
from core.errors import PlanError, PlanFileError
from core.files.hfcache import resolve_hub_id, scan_cache
from core.files.launch.serve_command import ModelNotFound, plan_from_command, read_command
from core.files.runconfig import load_run_config, resolve_model
from core.hub_names import catalogue_model_of_name, parse_model_ref
from core.presets import default_plan
from tests.core.test_hfcache import add_model

# (Hub id, the catalogue id it means or None); each row's model card is https://huggingface.co/<id>.
HUB_IDS: tuple[tuple[str, str | None], ...] = (
    ("meta-llama/Llama-3.1-8B", "llama-3.1-8b"),  # the catalogue's own repository
    ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"),  # card: instruction-tuned Llama 3.1 8B
    ("meta-llama/Meta-Llama-3-8B-Instruct", "llama-3-8b"),
    ("meta-llama/Llama-2-7b-chat-hf", "llama-2-7b"),
    ("Qwen/Qwen3-30B-A3B-Instruct-2507", "qwen3-30b-a3b"),  # card: the July 2025 update of Qwen3-30B-A3B
    ("Qwen/Qwen3-30B-A3B-Instruct-2507-FP8", "qwen3-30b-a3b"),  # card: FP8 of Qwen3-30B-A3B-Instruct-2507
    ("Qwen/Qwen3-8B-AWQ", "qwen3-8b"),  # card: AWQ 4-bit of Qwen3-8B
    ("Qwen/Qwen3-8B-FP8", "qwen3-8b"),  # card: FP8 of Qwen3-8B
    ("Qwen/Qwen2.5-7B-Instruct-AWQ", "qwen2.5-7b"),
    ("Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4", "qwen2.5-7b"),
    ("google/gemma-3-27b-it", "gemma-3-27b"),  # card: instruction-tuned gemma-3-27b-pt
    ("google/gemma-2-9b-it", "gemma-2-9b"),
    ("mistralai/Mistral-7B-Instruct-v0.1", "mistral-7b-v0.1"),  # card: fine-tuned from Mistral-7B-v0.1
    ("TinyLlama/TinyLlama-1.1B-Chat-v1.0", "tinyllama-1.1b"),  # card: fine-tuned from the 1431k-3T checkpoint
    ("deepseek-ai/DeepSeek-V3-0324", "deepseek-v3"),  # card: the same architecture as DeepSeek-V3
    # Organisations that re-upload others' weights under the original's name (core.hub_names.REUPLOADERS):
    ("NousResearch/Meta-Llama-3-8B", "llama-3-8b"),  # axolotl examples/llama-3/lora-8b.yml base_model
    ("unsloth/Llama-3.2-1B-Instruct", "llama-3.2-1b"),
    ("unsloth/llama-3-8b-bnb-4bit", "llama-3-8b"),  # card: bitsandbytes 4-bit of Llama 3 8B
    ("unsloth/Meta-Llama-3.1-8B-Instruct-bnb-4bit", "llama-3.1-8b"),
    ("unsloth/gemma-3-27b-it-bnb-4bit", "gemma-3-27b"),
    ("unsloth/Qwen3-8B-GGUF", "qwen3-8b"),  # card: GGUF files of Qwen/Qwen3-8B
    ("TheBloke/Llama-2-7B-Chat-GGUF", "llama-2-7b"),  # card: "GGUF format model files for Meta's Llama 2 7B Chat"
    ("TheBloke/Llama-2-7B-Chat-AWQ", "llama-2-7b"),
    ("TheBloke/Mistral-7B-Instruct-v0.1-GGUF", "mistral-7b-v0.1"),
    ("TheBloke/TinyLlama-1.1B-Chat-v1.0-GGUF", "tinyllama-1.1b"),
    ("bartowski/Meta-Llama-3.1-8B-Instruct-GGUF", "llama-3.1-8b"),
    ("hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4", "llama-3.1-8b"),
    ("neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8", "llama-3.1-8b"),
    ("RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w8a8", "llama-3.1-8b"),  # card: INT8 W8A8 of Llama 3.1 8B Instruct
    # None: what the name says is not the catalogue's model, or another organisation's files may be anything.
    ("mistralai/Mistral-7B-Instruct-v0.3", None),  # card: v0.3 extended the vocabulary to 32,768 (v0.1: 32,000)
    ("microsoft/Phi-3-mini-128k-instruct", None),  # card: 128K context (LongRoPE); the catalogue holds the 4k model
    ("HuggingFaceH4/zephyr-7b-beta", None),  # card: fine-tuned from mistralai/Mistral-7B-v0.1; the name says zephyr
    ("casperhansen/llama-3-70b-fp16", None),  # axolotl examples/llama-3/qlora-fsdp-70b.yaml; no Llama 3 70B entry
)


@pytest.fixture
def empty_cache(hub_cache: Path) -> Path:
    return hub_cache  # an empty Hugging Face cache where huggingface_hub would look (tests/core/conftest.py)


def _adapter_config(folder: Path, ref: str) -> Path:
    config = folder / "adapter_config.json"
    config.write_text(json.dumps({"peft_type": "LORA", "r": 8, "base_model_name_or_path": ref}))
    return config


def _from_config(ref: str, folder: Path) -> str | None:
    choice = resolve_model(load_run_config(_adapter_config(folder, ref)))
    assert choice is not None
    return choice.model_id if choice.spec is not None else None


def _from_command(ref: str) -> str | None:
    try:
        return plan_from_command(read_command(f"vllm serve {ref}"), default_plan()).plan.model_id
    except ModelNotFound:
        return None


def _from_cli(ref: str) -> str | None:
    try:
        return named_model(ref).model_id
    except (PlanError, PlanFileError):
        return None


@pytest.mark.parametrize(("hub_id", "expected"), HUB_IDS, ids=[h for h, _ in HUB_IDS])
def test_every_reader_gives_one_answer(hub_id: str, expected: str | None, empty_cache: Path, tmp_path: Path) -> None:
    rule = catalogue_model_of_name(hub_id)
    answers = {
        "rule": rule.entry.id if rule is not None else None,
        "config": _from_config(hub_id, tmp_path),
        "command": _from_command(hub_id),
        "cache": resolve_hub_id(hub_id, empty_cache).catalogue_id,  # type: ignore[union-attr]
        "cli": _from_cli(hub_id),
    }
    assert answers == dict.fromkeys(answers, expected)


def test_the_cache_scan_gives_the_same_answer(tmp_path: Path) -> None:
    # Each id downloaded (a stub repository: SmolLM2-135M's config.json, tests/core/test_hfcache.py), then listed.
    for hub_id, _ in HUB_IDS:
        add_model(tmp_path, hub_id)
    scan = scan_cache(tmp_path, headers=False)
    listed = {model.repo_id: model.catalogue_id for model in scan.models}
    assert listed == dict(HUB_IDS)


def test_the_cache_listing_names_the_catalogue_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    add_model(tmp_path, "unsloth/Qwen3-8B-GGUF")
    add_model(tmp_path, "someone/Llama-3.1-8B-Instruct")  # another organisation's: no entry is named beside it
    assert main(["models", "--cached", "--cache", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.count("catalogue model of that name:") == 1 and "catalogue model of that name: qwen3-8b" in out


def test_thirty_real_ids_in_the_table() -> None:
    assert len(HUB_IDS) >= 30 and len({h for h, _ in HUB_IDS}) == len(HUB_IDS)


@pytest.mark.parametrize(
    ("hub_id", "words"),
    [
        ("NousResearch/Meta-Llama-3-8B", "NousResearch re-uploads"),
        ("Qwen/Qwen3-8B-AWQ", "stored as AWQ"),
        ("Qwen/Qwen3-30B-A3B-Instruct-2507", "Qwen/Qwen3-30B-A3B's fine-tune"),
    ],
)
def test_what_was_read_into_a_name_is_said(hub_id: str, words: str, empty_cache: Path, tmp_path: Path) -> None:
    found = catalogue_model_of_name(hub_id)
    assert found is not None and words in found.how
    choice = resolve_model(load_run_config(_adapter_config(tmp_path, hub_id)))
    assert choice is not None and words in choice.how  # the importer's dialog shows it
    assert words in named_model(hub_id).note  # the command line's note on stderr


def test_another_organisations_upload_is_asked_with_its_bases_entry_first(tmp_path: Path, empty_cache: Path) -> None:
    # A fine-tune or merge under another name may have resized the vocabulary or added layers: never taken, offered.
    choice = resolve_model(load_run_config(_adapter_config(tmp_path, "someone/Llama-3.1-8B-Instruct")))
    assert choice is not None and choice.spec is None and choice.candidates[0] == "llama-3.1-8b"
    with pytest.raises(PlanFileError, match="closest: llama-3.1-8b"):
        named_model("someone/Llama-3.1-8B-Instruct")


@pytest.mark.parametrize(
    ("text", "repo", "name", "revision"),
    [
        ("Qwen/Qwen3-8B@main", "Qwen/Qwen3-8B", "Qwen3-8B", "main"),
        ("hf.co/unsloth/Qwen3-8B-GGUF:Q4_K_M", "unsloth/Qwen3-8B-GGUF", "Qwen3-8B-GGUF", ""),  # Ollama's hf.co form
        ("https://huggingface.co/Qwen/Qwen3-8B", "Qwen/Qwen3-8B", "Qwen3-8B", ""),
        # huggingface_hub's cache folder of a repository (file_download.py repo_folder_name): models--{org}--{name}
        ("~/.cache/huggingface/hub/models--Qwen--Qwen3-8B/snapshots/0123abcd", "Qwen/Qwen3-8B", "Qwen3-8B", ""),
        ("/data/models/Llama-3.1-8B-Instruct/", "", "Llama-3.1-8B-Instruct", ""),
        ("./assets/hf/Llama-3.1-8B", "", "Llama-3.1-8B", ""),  # torchtitan's hf_assets_path
        ("llama3_1_8b", "", "llama3_1_8b", ""),  # torchtune's builder
    ],
)
def test_a_name_as_written(text: str, repo: str, name: str, revision: str) -> None:
    ref = parse_model_ref(text)
    assert (ref.repo, ref.name, ref.revision) == (repo, name, revision)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Qwen/Qwen3-8B@main", "qwen3-8b"),
        ("hf.co/unsloth/Qwen3-8B-GGUF:Q4_K_M", "qwen3-8b"),
        ("/data/models/Llama-3.1-8B-Instruct", "llama-3.1-8b"),  # a folder not on this machine: its name
        ("~/.cache/huggingface/hub/models--Qwen--Qwen3-8B/snapshots/0123abcd", "qwen3-8b"),
        ("llama3_1_8b", "llama-3.1-8b"),
        ("Qwen3-30B-A3B-Instruct-2507-Q4_K_M", None),  # a GGUF type word is the GGUF reader's to take off
        ("Qwen3-30B-A3B-Instruct-2507", "qwen3-30b-a3b"),  # a GGUF file's name less its type
    ],
)
def test_revisions_paths_and_bare_names_read_alike(
    text: str, expected: str | None, tmp_path: Path, empty_cache: Path
) -> None:
    rule = catalogue_model_of_name(text)
    assert (rule.entry.id if rule is not None else None) == expected
    assert _from_config(text, tmp_path) == expected
    assert _from_cli(text) == expected
