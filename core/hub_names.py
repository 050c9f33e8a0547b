"""Which catalogue model a model's name means: the one rule every reader asks (branch h91hub).

A name reaches the planner from many places: a training config's ``model_name_or_path`` / ``base_model`` /
``model``, a pasted ``vllm serve`` / ``llama-server -hf`` / ``ollama run hf.co/…`` command, ``--model`` on the
command line, a Hub id the local cache lacks, a torchtune builder, a folder that is not on this machine. Each asks
:func:`catalogue_model_of_name` once the files on this machine (a folder, the Hugging Face cache) could not answer,
so one name means one catalogue model, or none, wherever it is typed:

- the catalogue's own repository, id or name: that entry, nothing to say;
- a Hub id (``organisation/name``; ``https://huggingface.co/``, ``hf.co/``, an ``@revision`` and a GGUF ``:tag``
  taken off; a Hugging Face cache folder ``models--org--name`` is its repository) of the entry's own organisation or
  of an organisation that re-uploads others' weights under their names (:data:`REUPLOADERS`): its name less a
  packaging word (:data:`PACKAGING`: -GGUF, -AWQ, -GPTQ-Int4, -FP8, -bnb-4bit …) and less the tune words and dates
  of a fine-tune or re-release of the same shapes (:func:`base_names`), leading to the one entry whose repository
  has that base name. Another organisation's repository is none: its files may be anything (a fine-tune named for
  its base may have resized its vocabulary, a merge may have added layers), and the caller asks, that entry first
  (:func:`nearest_by_name`);
- a bare name (a torchtune builder ``llama3_1_8b``, a folder's or a GGUF file's name): by :func:`name_key` (case,
  punctuation and underscores gone) against the entries' ids, names and repositories, after the same words;
- anything else: none, and never a guess between several entries.

The answer's ``how`` is "" where the name is the entry's own (its repository, id or name, or a name key equal to
one of theirs); else the words saying what was read into the name, which every caller shows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from core.catalogue import CatalogueModel, load_models
from core.errors import PlanFileError
from core.memo import last_answer

# ---- a name as written: a Hub id, a path, a URL ---------------------------------------------------------------
_URL_PREFIXES: Final = ("https://huggingface.co/", "http://huggingface.co/", "huggingface.co/", "hf.co/")
_REPO: Final = re.compile(r"[A-Za-z0-9][\w.\-]{0,95}/[A-Za-z0-9][\w.\-]{0,95}")
# huggingface_hub's cache folder of a repository: models--{org}--{name} (file_download.py repo_folder_name).
_CACHE_FOLDER: Final = re.compile(r"models--([A-Za-z0-9][\w.\-]*?)--([A-Za-z0-9][\w.\-]*)")


@dataclass(frozen=True)
class ModelRef:
    """A model's name taken apart: ``repo`` the Hub id (``org/name``; "" for a bare name or a folder), ``name``
    the part matched against the catalogue, ``revision`` an ``@revision`` given with the id, ``path`` whether it was
    written as a folder's path."""

    repo: str
    name: str
    revision: str = ""
    path: bool = False


def parse_model_ref(text: str) -> ModelRef:
    """``text`` as a Hub id (``Qwen/Qwen3-8B``, ``Qwen/Qwen3-8B@main``, ``hf.co/unsloth/Qwen3-8B-GGUF:Q4_K_M``,
    ``https://huggingface.co/Qwen/Qwen3-8B``, a cache folder ``…/models--Qwen--Qwen3-8B/snapshots/…``), a path
    (``/models/Qwen3-8B``, ``./out``, ``C:\\models\\x``: its last folder's name) or a bare name (``llama3_1_8b``)."""
    ref = text.strip()
    cached = _CACHE_FOLDER.search(ref)
    if cached is not None:
        return ModelRef(f"{cached.group(1)}/{cached.group(2)}", cached.group(2), path=True)
    for prefix in _URL_PREFIXES:
        if ref.lower().startswith(prefix):
            ref = ref[len(prefix) :]
            break
    ref, at, revision = ref.partition("@")
    ref = ref.partition(":")[0] if _REPO.fullmatch(ref.partition(":")[0]) else ref  # llama.cpp's -hf repo:TYPE
    if _REPO.fullmatch(ref):
        return ModelRef(ref, ref.rsplit("/", 1)[1], revision.strip() if at else "")
    if "/" in ref or "\\" in ref or ref.startswith("~"):
        last = [part for part in re.split(r"[\\/]", ref.rstrip("/\\")) if part not in ("", ".", "..", "~")]
        return ModelRef("", last[-1] if last else "", path=True)
    return ModelRef("", text.strip())


# ---- the words a repository's name adds to its base's ----------------------------------------------------------
# Words a Hub repository's name adds for a fine-tune or a release of the same weights' shapes (h88fix): the
# chat / instruction / reasoning tunes (Qwen/Qwen3-30B-A3B-Instruct-2507 and -Thinking-2507, google/gemma-3-1b-it,
# TinyLlama/TinyLlama-1.1B-Chat-v1.0), the pretrained or converted base (google/gemma-3-1b-pt,
# meta-llama/Llama-2-7b-hf, Qwen/Qwen3-8B-Base) and a release date (-2507, -2506). A fine-tune keeps its base's
# matrices (each model card names its base: the "finetuned from" line), so its catalogue entry is the base's; a
# size, a version (v0.1 against v0.3: Mistral's v0.3 widened the vocabulary to 32,768) or an expert count never goes.
_TUNE_WORDS: Final = frozenset({"instruct", "chat", "thinking", "it", "hf", "base", "pt"})
_DATE: Final = re.compile(r"\d{4}")  # 2507: July 2025
_VERSION: Final = re.compile(r"v\d+(\.\d+)*")
_CHECKPOINT: Final = "intermediate"  # TinyLlama-1.1B-intermediate-step-1431k-3T: a training step, not a model

# The words a repository's name ends in when it holds the same model's weights stored another way, each from a
# model card that names the model it was made from (https://huggingface.co/<id>): -GGUF (llama.cpp's files:
# TheBloke/Llama-2-7B-Chat-GGUF, unsloth/Qwen3-8B-GGUF), -AWQ and -AWQ-INT4 / -int4-awq (TheBloke/Llama-2-7B-Chat-AWQ,
# hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4, Qwen/Qwen2.5-7B-Instruct-AWQ), -GPTQ and -GPTQ-Int4 / -Int8
# (TheBloke/Llama-2-7B-GPTQ, Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4), -FP8 and -FP8-Dynamic (Qwen/Qwen3-8B-FP8,
# neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8), bitsandbytes' -bnb-4bit and -unsloth-bnb-4bit
# (unsloth/llama-3-8b-bnb-4bit, unsloth/Meta-Llama-3.1-8B-Instruct-bnb-4bit), llm-compressor's -quantized.w8a8 /
# -W4A16 (RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w8a8). The shapes are the model's; how the weights are
# stored is not read from the name here (a pasted command's reader and a config's quantisation keys say it).
PACKAGING: Final = re.compile(
    r"([-_.](unsloth[-_.])?bnb[-_.][48]bit|[-_.](int4[-_.])?awq([-_.]int4)?|[-_.]gptq([-_.]int[48])?"
    r"|[-_.]fp8([-_.]dynamic)?|[-_.](quantized[-_.])?(w8a8|w4a16|w8a16|nvfp4)|[-_.]gguf)$",
    re.IGNORECASE,
)

# Organisations whose repositories re-upload another organisation's weights under the original's name (the model
# card of each example names the original): NousResearch (https://huggingface.co/NousResearch/Meta-Llama-3-8B, an
# ungated copy of meta-llama/Meta-Llama-3-8B, axolotl's examples/llama-3/lora-8b.yml base_model), unsloth
# (https://huggingface.co/unsloth/Llama-3.2-1B-Instruct, unsloth/llama-3-8b-bnb-4bit), TheBloke
# (https://huggingface.co/TheBloke/Llama-2-7B-Chat-GGUF), bartowski
# (https://huggingface.co/bartowski/Meta-Llama-3.1-8B-Instruct-GGUF), lmstudio-community
# (https://huggingface.co/lmstudio-community/Meta-Llama-3.1-8B-Instruct-GGUF), hugging-quants
# (https://huggingface.co/hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4), neuralmagic and its successor RedHatAI
# (https://huggingface.co/neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8). Lower case, as compared.
REUPLOADERS: Final = frozenset(
    {"nousresearch", "unsloth", "thebloke", "bartowski", "lmstudio-community", "hugging-quants", "neuralmagic",
     "redhatai"}
)  # fmt: skip


def base_names(name: str) -> tuple[str, ...]:
    """A repository name (lower case, no organisation) as its base's, most exact first: the tune words and dates
    gone; a version right after a tune word (-Chat-v1.0, the chat release's own) kept first, then dropped."""
    words = name.split("-")
    if _CHECKPOINT in words:
        words = words[: words.index(_CHECKPOINT)]
    if words and words[0] == "meta" and len(words) > 1 and words[1] == "llama":  # Meta-Llama-3.1-8B, renamed
        words = words[1:]
    kept: list[str] = []
    dropped: list[str] = []
    after_tune = False
    for word in words:
        if word in _TUNE_WORDS or _DATE.fullmatch(word):
            after_tune = True
            continue
        if after_tune and _VERSION.fullmatch(word):
            dropped.append(word)
        kept.append(word)
        after_tune = False
    exact = "-".join(kept)
    return (exact, "-".join(w for w in kept if w not in dropped)) if dropped else (exact,)


_KEY_SUFFIXES: Final = ("-hf", "-instruct", "-chat", "-it", "-base")


def name_key(text: str) -> str:
    """A model name reduced to what identifies its architecture and size: 'meta-llama/Llama-3.2-3B-Instruct',
    'llama-3.2-3b' and torchtune's builder 'llama3_2_3b' give the same key; an instruct or chat tune has its
    base's shapes."""
    # torchtune's builders spell the suffixes with underscores: qwen2_5_7b_base, qwen3_8b_instruct.
    name = text.strip().lower().rstrip("/").rsplit("/", 1)[-1].removeprefix("meta-").replace("_", "-")
    changed = True
    while changed:
        changed = False
        for suffix in _KEY_SUFFIXES:
            if name.endswith(suffix):
                name, changed = name.removesuffix(suffix), True
    return re.sub(r"[^a-z0-9]", "", name)


# ---- the catalogue's entries by what their names reduce to -----------------------------------------------------
def _repo_name(model: CatalogueModel) -> str:
    return model.hf_repo.strip().lower().rpartition("/")[2]


@last_answer
def _by_base(models: tuple[CatalogueModel, ...]) -> dict[str, tuple[CatalogueModel, ...]]:
    """The entries by the base name of their repositories (one each in today's catalogue)."""
    index: dict[str, tuple[CatalogueModel, ...]] = {}
    for model in models:
        base = base_names(_repo_name(model))[0]
        index[base] = (*index.get(base, ()), model)
    return index


@last_answer
def _by_key(models: tuple[CatalogueModel, ...]) -> dict[str, tuple[CatalogueModel, ...]]:
    """The entries by the name keys of their ids, names, repositories and repositories' base names."""
    index: dict[str, tuple[CatalogueModel, ...]] = {}
    for model in models:
        keys = {name_key(model.id), name_key(model.name), name_key(model.hf_repo)}
        keys.add(name_key(base_names(_repo_name(model))[0]))
        for key in keys - {""}:
            index[key] = (*index.get(key, ()), model)
    return index


def _own_key(model: CatalogueModel, name: str) -> bool:
    """Whether ``name`` is the entry's own by key (the rule the config importers had before h91hub): no words."""
    return name_key(name) in {name_key(model.id), name_key(model.name), name_key(model.hf_repo)}


# ---- the answer ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class NameMatch:
    """The catalogue model a name means, and ``how``: "" where the name is the entry's own, else what was read into
    the name (the words are shown wherever the model is)."""

    entry: CatalogueModel
    how: str = ""


def catalogue_model_of_name(text: str) -> NameMatch | None:
    """The catalogue model ``text`` names (the module's rule); None where none does, or several would."""
    try:
        models = load_models()
    except PlanFileError:  # a broken catalogue names no model
        return None
    return _match(text, models, any_organisation=False)


def nearest_by_name(text: str) -> CatalogueModel | None:
    """The entry a Hub id's name leads to whatever its organisation: offered first where the rule refuses another
    organisation's repository (``someone/Llama-3.1-8B-Instruct``: Llama 3.1 8B, asked, never taken)."""
    try:
        found = _match(text, load_models(), any_organisation=True)
    except PlanFileError:
        return None
    return found.entry if found is not None else None


def _match(text: str, models: tuple[CatalogueModel, ...], *, any_organisation: bool) -> NameMatch | None:
    ref = parse_model_ref(text)
    if not ref.name:
        return None
    wanted = ref.repo.lower() if ref.repo else ref.name.strip().lower()
    exact = next((m for m in models if wanted in (m.hf_repo.lower(), m.id, m.name.lower())), None)
    if exact is not None:
        return NameMatch(exact, _revision_words(ref, exact))
    name, packaging = _unpackaged(ref.name)
    if ref.repo:
        return _by_repo(ref, name, packaging, models, any_organisation)
    return _by_bare_name(ref, name, packaging, models)


def _unpackaged(name: str) -> tuple[str, str]:
    """The name less its packaging word, and the word ("" when none)."""
    found = PACKAGING.search(name)
    return (name[: found.start()], found.group(0)[1:]) if found else (name, "")


def _by_repo(
    ref: ModelRef, name: str, packaging: str, models: tuple[CatalogueModel, ...], any_organisation: bool
) -> NameMatch | None:
    org = ref.repo.rpartition("/")[0].lower()
    index = _by_base(models)
    for base in base_names(name.lower()):
        found = index.get(base, ())
        if len(found) != 1:
            continue
        entry = found[0]
        own = entry.hf_repo.lower().rpartition("/")[0] == org
        if not (own or org in REUPLOADERS or any_organisation):
            return None
        return NameMatch(entry, _words(ref, entry, name, packaging, reupload=not own))
    return None


def _by_bare_name(ref: ModelRef, name: str, packaging: str, models: tuple[CatalogueModel, ...]) -> NameMatch | None:
    index = _by_key(models)
    for candidate in (ref.name, name, *base_names(name.lower().replace("_", "-"))):
        found = {model.id: model for model in index.get(name_key(candidate), ())}
        if len(found) == 1:
            entry = next(iter(found.values()))
            if _own_key(entry, ref.name):
                return NameMatch(entry)
            return NameMatch(entry, _words(ref, entry, name, packaging, reupload=False))
        if len(found) > 1:
            return None
    return None


def _words(ref: ModelRef, entry: CatalogueModel, name: str, packaging: str, *, reupload: bool) -> str:
    """What was read into the name, in one sentence: ``Qwen/Qwen3-8B-AWQ is read by its name as Qwen/Qwen3-8B,
    stored as AWQ (the format is not read from the name)``."""
    given = ref.repo or ref.name
    text = f"{given} is read by its name as {entry.hf_repo}"
    if name.lower() != _repo_name(entry):
        text += (
            "'s fine-tune or release (the same weights' shapes; its own config.json may differ in context length or "
            "RoPE scaling)"
        )
    if packaging:
        text += f", stored as {packaging} (the format is not read from the name)"
    if reupload:
        text += f": {ref.repo.rpartition('/')[0]} re-uploads other organisations' weights under their names"
    revision = _revision_words(ref, entry)
    return f"{text}; {revision}" if revision else text


def _revision_words(ref: ModelRef, entry: CatalogueModel) -> str:
    if not ref.revision or ref.revision == "main":
        return ""
    return f"revision {ref.revision} is not read: the catalogue's {entry.id} is {entry.hf_repo}'s published config"
