"""llama.cpp and Ollama launch commands read back into the serving plan, the same four lists as vLLM's and SGLang's.

:mod:`core.files.launch.serve_command` finds the program and hands the words here:

* ``llama-server`` / ``llama-cli`` / ``llama-completion`` (any path: ``./build/bin/llama-server``) and the names
  before June 2024's rename, ``./main`` and ``./server`` (with a path, so that a bare ``main`` is no program).
  The flags are ggml-org/llama.cpp ``common/arg.cpp`` at 145b6280 (:data:`engine_flags.LLAMACPP_VALUED`): exact
  names, ``_`` read as ``-`` in a ``--`` flag (``common_params_parse_ex``), ``-fa`` / ``--color`` bare in older
  builds. The plan fields are those :mod:`core.files.launch.llamacpp` writes (``-m`` its GGUF file's type, ``-c``
  over ``-np`` slots, ``-ngl``, ``-fa``, ``-ctk`` / ``-ctv``, ``-ub``, ``-sm`` / ``-ts``, ``--n-cpu-moe`` /
  ``--cpu-moe`` / ``-ot``) and ``-hf repo[:quant]``, ``-n``, ``-b``.
* ``ollama serve`` / ``ollama run MODEL[:TAG]`` / ``ollama create NAME -f Modelfile`` with ``OLLAMA_*=`` words
  in front (or ``export`` lines) and a Modelfile's ``FROM`` / ``PARAMETER`` lines (a heredoc, as the Ollama export
  writes it, or pasted bare). The variables as ``envconfig/config.go`` reads them (ollama/ollama 000ce020:
  ``OLLAMA_FLASH_ATTENTION`` and ``OLLAMA_SCHED_SPREAD`` through ``strconv.ParseBool``, ``OLLAMA_NUM_PARALLEL`` an
  int, 0 the scheduler's choice; ``OLLAMA_KV_CACHE_TYPE`` / ``OLLAMA_CONTEXT_LENGTH`` / ``OLLAMA_GPU_OVERHEAD`` at
  the tags :data:`core.serving.ollama.LINES` cites), the Modelfile's names as ``api/types.go`` ``Options`` and
  ``parser/parser.go`` (:mod:`core.files.launch.ollama`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from core.dtypes import CacheType, GgufQuant
from core.errors import one_line
from core.files.launch.engine_flags import (
    LLAMACPP_ENV,
    LLAMACPP_ON_OFF,
    LLAMACPP_OPTIONAL_VALUE,
    LLAMACPP_SWITCHES,
    LLAMACPP_TWO_VALUES,
    LLAMACPP_VALUED,
    NO_EFFECT,
    flag_names,
    llamacpp_takes,
)
from core.files.launch.llamacpp import CACHE_TYPES, CPU_MOE_ALL, GGUF_TYPES, NEAREST_GGUF, override_layers
from core.files.launch.ollama import DEVICES_ENV, LINE_MARK
from core.inputs import OllamaVersion
from core.plan import Engine
from core.serving.ollama import KV_BYTES, LINES

if TYPE_CHECKING:
    from core.files.launch.serve_command import _Args, _Reader

# ---- the llama.cpp programs --------------------------------------------------------------------------
LLAMACPP_PROGRAMS: Final = frozenset({"llama-server", "llama-cli", "llama-completion"})
OLD_PROGRAMS: Final = frozenset({"main", "server"})  # before PR #7809 (June 2024) renamed them llama-cli / -server

# common/arg.cpp 145b6280: the server's address, keys, logs, the web UI, chat templates, prompts and sampling, CPU
# threads and their placement, RoPE overrides of the model's own (no buffer changes size) and the model file's
# mapping in host RAM (--mlock, --no-mmap: the GPU holds the same). -t is here as the task's reading says: threads
# change the CPU layers' speed, which the plan's host bandwidth stands for.
LLAMACPP_IGNORED: Final = flag_names(
    """
    -h --help --usage --version -cl --cache-list --completion-bash --verbose-prompt --display-prompt
    --no-display-prompt --perf --no-perf --show-timings --no-show-timings -e --escape --no-escape -sp --special -cnv
    --conversation -no-cnv --no-conversation -st --single-turn -i --interactive -if --interactive-first -mli
    --multiline-input --in-prefix-bos --in-prefix --in-suffix --warmup --no-warmup --spm-infill --ignore-eos --mlock
    --mmap --no-mmap --check-tensors --webui --no-webui --metrics --props --slots --no-slots --jinja --no-jinja
    --prefill-assistant --no-prefill-assistant --simple-io --log-disable -v --verbose --log-verbose --offline
    --log-prefix --log-timestamps --log-file --log-colors -lv --verbosity --log-verbosity -t --threads -tb
    --threads-batch -C --cpu-mask -Cr --cpu-range --cpu-strict --prio --poll -Cb --cpu-mask-batch -Crb
    --cpu-range-batch --cpu-strict-batch --prio-batch --poll-batch -p --prompt -sys --system-prompt -f --file -sysf
    --system-prompt-file -bf --binary-file -ptc --print-token-count -r --reverse-prompt --samplers -s --seed
    --sampling-seq --sampler-seq --temp --top-k --top-p --min-p --top-nsigma --xtc-probability --xtc-threshold
    --typical --repeat-last-n --repeat-penalty --presence-penalty --frequency-penalty --dry-multiplier --dry-base
    --dry-allowed-length --dry-penalty-last-n --dry-sequence-breaker --dynatemp-range --dynatemp-exp --mirostat
    --mirostat-lr --mirostat-ent -l --logit-bias --grammar --grammar-file -j --json-schema -jf --json-schema-file
    --rope-scaling --rope-scale --rope-freq-base --rope-freq-scale --yarn-orig-ctx --yarn-ext-factor
    --yarn-attn-factor --yarn-beta-slow --yarn-beta-fast --numa -mg --main-gpu --host --port --path --api-prefix
    --api-key --api-key-file --ssl-key-file --ssl-cert-file --chat-template-kwargs -to --timeout --threads-http
    --slot-save-path --media-path --reasoning-format --reasoning-budget --chat-template --chat-template-file -sps
    --slot-prompt-similarity -a --alias -hft --hf-token -co --color --keep --context-shift --no-context-shift -dt
    --defrag-thold --cache-ram -cram --prompt-cache --prompt-cache-all --prompt-cache-ro
    """
)
_DRAFT: Final = "a draft model and its KV cache beside the target's: not in the plan"
LLAMACPP_WHY: Final = {
    "-nkvo": "the KV cache kept in host RAM: the plan keeps it on the GPU",
    "--no-kv-offload": "the KV cache kept in host RAM: the plan keeps it on the GPU",
    "--swa-full": "a full-size cache for the sliding-window layers: the plan sizes them by the window",
    "--lora": "adapters applied at load: the plan serves the base model",
    "--lora-scaled": "adapters applied at load: the plan serves the base model",
    "-mm": "a vision projector (mmproj): not among the plan's llama.cpp weights",
    "--mmproj": "a vision projector (mmproj): not among the plan's llama.cpp weights",
    "-mmu": "a vision projector (mmproj): not among the plan's llama.cpp weights",
    "--mmproj-url": "a vision projector (mmproj): not among the plan's llama.cpp weights",
    "-fit": "llama.cpp's fit of unset arguments: the plan's GPU layers -1 (auto) is it, a given -ngl is taken",
    "--fit": "llama.cpp's fit of unset arguments: the plan's GPU layers -1 (auto) is it, a given -ngl is taken",
    "-fitt": "the margin llama.cpp's fit leaves on each GPU: the plan's fit leaves its default (1 GiB)",
    "--fit-target": "the margin llama.cpp's fit leaves on each GPU: the plan's fit leaves its default (1 GiB)",
    "-dev": "which devices take layers: the plan counts GPUs from -ts or CUDA_VISIBLE_DEVICES",
    "--device": "which devices take layers: the plan counts GPUs from -ts or CUDA_VISIBLE_DEVICES",
    "--rpc": "layers on RPC servers' devices: the plan counts this machine's GPUs",
    "--embedding": "an embedding server: the plan generates tokens",
    "--embeddings": "an embedding server: the plan generates tokens",
    "--reranking": "a reranking server: the plan generates tokens",
    "--rerank": "a reranking server: the plan generates tokens",
    "--override-kv": "the model's metadata overridden: the plan reads the model's own",
    **dict.fromkeys(
        [
            "-md",
            "--model-draft",
            "-hfd",
            "-hfrd",
            "--hf-repo-draft",
            "-ngld",
            "--gpu-layers-draft",
            "--n-gpu-layers-draft",
            "-cd",
            "--ctx-size-draft",
            "--draft-max",
            "--draft",
            "--draft-n",
            "--draft-min",
            "--draft-n-min",
            "--draft-p-min",
            "--draft-p-split",
            "-devd",
            "--device-draft",
            "-ctkd",
            "--cache-type-k-draft",
            "-ctvd",
            "--cache-type-v-draft",
            "-otd",
            "--override-tensor-draft",
            "--cpu-moe-draft",
            "-cmoed",
            "--n-cpu-moe-draft",
            "-ncmoed",
            "-td",
            "--threads-draft",
            "-tbd",
            "--threads-batch-draft",
        ],
        _DRAFT,
    ),
}


def llamacpp_program(word: str) -> str | None:
    """The llama.cpp program a word starts (``!./main`` in a notebook cell too), or None."""
    name = re.split(r"[/\\]", word.removeprefix("!"))[-1]
    name = name[:-4] if name.lower().endswith(".exe") else name  # llama-server.exe on Windows
    if name in LLAMACPP_PROGRAMS or (name in OLD_PROGRAMS and ("/" in word or "\\" in word)):
        return name
    return None


def image_program(tag: str, args: list[str]) -> tuple[str, list[str]]:
    """The program a ggml-org/llama.cpp image runs (its tag: server*, light*, full*) and its arguments; the full
    image's tools.sh takes --server / -s or --run / -r first."""
    if tag.startswith("full") and args[:1] in (["--server"], ["-s"], ["--run"], ["-r"]):
        return ("llama-server" if args[0] in ("--server", "-s") else "llama-cli"), args[1:]
    return ("llama-cli" if tag.startswith("light") else "llama-server"), args


def not_an_option(program: str, name: str) -> str:
    """Why ``program`` refuses a llama.cpp flag another of its programs takes (engine_flags.LLAMACPP_TAKEN_BY)."""
    return f"not an option of {program}: it stops, 'error: invalid argument: {name}'"


def parse_llamacpp(words: list[str], out: _Args, program: str = "", build: int | None = None) -> _Args:
    """llama.cpp's arguments into ``out``: names exact (``_`` as ``-`` in a ``--`` flag), a switch's value never
    taken, a valued flag's next word always (as ``common_params_parse_ex`` does), ``-fa`` / ``--color`` bare in
    older builds. A flag ``program`` does not take (another program's) is not understood, its value with it."""
    known = LLAMACPP_SWITCHES | LLAMACPP_VALUED | LLAMACPP_TWO_VALUES
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        name = "--" + word[2:].replace("_", "-") if word.startswith("--") else word
        if name in known and not llamacpp_takes(program, name, build):
            count = 0 if name in LLAMACPP_SWITCHES else 2 if name in LLAMACPP_TWO_VALUES else 1
            if name in LLAMACPP_OPTIONAL_VALUE and (i >= len(words) or words[i].lower() not in LLAMACPP_ON_OFF):
                count = 0
            shown = " ".join(words[i - 1 : i + count])
            out.unknown.append(f"{shown} ({not_an_option(program, name)})")
            out.refused.append(name)
            i += count
            continue
        if name not in known:
            if not word.startswith("-") or _number(word):
                out.positional.append(word)
            elif i < len(words) and not words[i].startswith("-"):
                out.unknown.append(f"{word} {words[i]}")  # taken as its value (shown with it), as vLLM's reader does
                i += 1
            else:
                out.unknown.append(word)
            continue
        if name in LLAMACPP_SWITCHES:
            out.switches.add(name)
            out.written[name] = word
            continue
        if name in LLAMACPP_OPTIONAL_VALUE and (i >= len(words) or words[i].lower() not in LLAMACPP_ON_OFF):
            out.switches.add(name)  # a bare -fa / --color: an older build's switch, on
            out.written[name] = word
            continue
        count = 2 if name in LLAMACPP_TWO_VALUES else 1
        if i + count > len(words):
            out.unknown.append(f"{word} (no value given)")
            continue
        value = " ".join(words[i : i + count])
        i += count
        out.values[name] = value
        out.written[name] = f"{word} {value}"
    return out


@dataclass
class EnvFlags:
    """The llama.cpp variables of a launch's environment as the flags they stand for (:data:`LLAMACPP_ENV`)."""

    words: list[str] = field(default_factory=list)  # the flags' words, to be read before the command's own
    shown: dict[str, str] = field(default_factory=dict)  # each flag -> the variable as written (LLAMA_ARG_X=v)
    ignored: list[tuple[str, str]] = field(default_factory=list)  # (the variable, why it does nothing)
    unknown: list[str] = field(default_factory=list)  # a value llama.cpp refuses, a LLAMA_ARG_ no option reads
    used: set[str] = field(default_factory=set)  # the variables taken here


def _spelling(word: str) -> str:
    return "--" + word[2:].replace("_", "-") if word.startswith("--") else word


def env_flags(env: dict[str, str], args: list[str], program: str = "", build: int | None = None) -> EnvFlags:
    """``env``'s llama.cpp variables as flags, as ``common_params_parse_ex`` reads them (arg.cpp 145b6280): each
    option's variable first, its flag on the command line (``args``) over it; the variable of an option ``program``
    does not have is never read (ignored)."""
    out = EnvFlags()
    given = {_spelling(w) for w in args if w.startswith("-")}
    negated = {"LLAMA_ARG_NO_" + k.removeprefix("LLAMA_ARG_"): k for k, v in LLAMACPP_ENV.items() if "/" in v}
    for key, value in env.items():
        option = negated.get(key, key)
        if option not in LLAMACPP_ENV:
            if key.startswith("LLAMA_ARG_"):
                out.used.add(key)
                out.unknown.append(f"{key}={one_line(value)[:60]} (no llama.cpp option reads it: arg.cpp set_env)")
            continue
        out.used.add(key)
        shown = f"{key}={one_line(value)[:60]}"
        on, _, off = " ".join(LLAMACPP_ENV[option]).partition(" / ")
        spellings = on.split() + off.split()
        if not llamacpp_takes(program, spellings[0], build):
            out.ignored.append((shown, f"not an option of {program}: it never reads the variable (common/arg.cpp)"))
            continue
        winner = next((w for w in args if _spelling(w) in spellings), None) if given & set(spellings) else None
        if winner is not None:
            out.ignored.append((shown, f"the command's {winner} wins over the variable (llama.cpp reads it after)"))
            continue
        if key != option:  # LLAMA_ARG_NO_<NAME>: "0" whatever its value
            flag: str | None = off.split()[0]
        elif off:  # a bool option: parse_bool_value
            truth = LLAMACPP_ON_OFF.get(value.strip().lower(), "bad")
            if truth is None or truth == "bad":
                out.unknown.append(f"{shown} (llama.cpp takes on/off, true/false, 1/0, enabled/disabled here)")
                continue
            flag = on.split()[0] if truth else off.split()[0]
        elif spellings[0] in LLAMACPP_SWITCHES:  # a switch: set where is_truthy, else nothing
            flag = spellings[0] if LLAMACPP_ON_OFF.get(value.strip().lower()) is True else None
        else:
            out.words += [spellings[0], value]
            out.shown[spellings[0]] = shown
            continue
        if flag is None:
            out.ignored.append((shown, "not on / true / 1 / enabled: llama.cpp leaves the switch off"))
        else:
            out.words.append(flag)
            out.shown[flag] = shown
    return out


def _number(word: str) -> bool:
    return re.fullmatch(r"-?\d+(\.\d+)?", word) is not None


# ---- a GGUF file's name: the model and the type ---------------------------------------------------------
# llama-quantize's type names at the end of a file name (Qwen3-8B-Q4_K_M.gguf, mistral-7b-instruct-v0.2.Q4_K_S.gguf),
# unsloth's dynamic mixes (-UD-Q4_K_XL), and a split file's shard (-00001-of-00003).
_SHARD: Final = re.compile(r"-\d{5}-of-\d{5}$")
_QUANT_WORD: Final = re.compile(
    r"[-_.:]((?:UD-)?(?:I?Q\d_K(?:_[SMLX]{1,2})?|IQ\d_[A-Z]+|Q\d_[01]|BF16|F16|FP16|F32|MXFP4(?:_MOE)?))$", re.I
)
_OLLAMA_QUANT: Final = re.compile(r"(?:^|-)((?:i?q\d_k(?:_[sml])?)|(?:iq\d_\w+?)|(?:q\d_[01])|fp16|bf16|f16)$", re.I)
_OLLAMA_SIZE: Final = re.compile(r"^(e?\d+(?:\.\d+)?[bm])(?:-|$)", re.I)


def gguf_name(ref: str) -> tuple[str, str]:
    """The model's name in a GGUF file's or repository's name (less the type, ``.gguf``, ``-GGUF``, a shard, a
    ``ggml-model`` file's own name: its folder's then) and the type word as written ("" when none)."""
    path = ref.strip().replace("\\", "/").rstrip("/")  # a Windows path's separators as /
    name = path.rsplit("/", 1)[-1]
    name = _SHARD.sub("", re.sub(r"\.gguf$", "", name, flags=re.I))
    quant = ""
    match = _QUANT_WORD.search(name)
    if match:
        quant, name = match.group(1), name[: match.start()]
    name = re.sub(r"[-_.]gguf$", "", name, flags=re.I)
    if name.lower() in ("ggml-model", "model", "") and "/" in path:
        name = path.rsplit("/", 2)[-2]
    return name, quant


def quant_of(word: str) -> tuple[GgufQuant | None, str]:
    """The plan's GGUF type for a type word, and why another is planned ("" when it is the word's own)."""
    upper = word.upper().replace("FP16", "F16")
    bare = upper.removeprefix("UD-")
    if bare in GgufQuant.__members__.values() or bare in {q.value for q in GgufQuant}:
        quant = GgufQuant(bare)
        return quant, "" if bare == upper else f"{word}: unsloth's dynamic mix, planned as {quant.value}"
    if bare.endswith("_XL") and f"{bare[:-3]}_M" in {q.value for q in GgufQuant}:
        quant = GgufQuant(f"{bare[:-3]}_M")
        return quant, f"{word}: not a llama-quantize type (an XL mix), planned as {quant.value}"
    if bare in ("Q4_K", "Q5_K", "Q3_K"):
        quant = GgufQuant(f"{bare}_M")
        return quant, f"{word}: planned as {quant.value}, the mix llama-quantize's {bare} names"
    return None, f"{word}: not a GGUF type the plan has (the plan's own type is kept)"


def ollama_tag(ref: str) -> tuple[str, str]:
    """An Ollama model reference (``llama3.1:8b-instruct-q4_K_M``, ``hf.co/unsloth/Qwen3-8B-GGUF:Q4_K_M``) as the
    name to look up (``llama3.1-8b``) and the type word ("" when the tag names none: the library's default)."""
    ref = ref.strip()
    if ref.lower().startswith(("hf.co/", "huggingface.co/")):
        repo, _, tag = ref.split("/", 1)[1].partition(":")
        return gguf_name(repo)[0], tag
    name, _, tag = ref.rsplit("/", 1)[-1].partition(":")
    quant = _OLLAMA_QUANT.search(tag)
    size = _OLLAMA_SIZE.match(tag)
    return (f"{name}-{size.group(1)}" if size else name), (quant.group(1) if quant else "")


# ---- llama.cpp's flags into plan fields -------------------------------------------------------------------
def _ints(reader: _Reader, flags: tuple[str, ...], what: str) -> int | None:
    text = reader.value(*flags)
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        reader.unknown.append(f"{reader.args.written.get(_given(reader, flags), text)} (not {what})")
        return None


def _given(reader: _Reader, flags: tuple[str, ...]) -> str:
    return next((f for f in reversed(list(reader.args.values)) if f in flags), flags[0])


@dataclass
class GgufRead:
    """What a llama.cpp or Ollama text gave besides the reader's fields and lists."""

    model_ref: str = ""  # as the text names it
    model_name: str = ""  # the name to look up (a GGUF file's, an Ollama tag's)
    context_given: bool = True
    notes: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # Ollama's server environment


def read_llamacpp(reader: _Reader, program: str, gpus: int | None) -> GgufRead:
    """The plan fields of llama.cpp's parsed arguments; what is left is listed by the caller."""
    out = GgufRead()
    old = program in OLD_PROGRAMS
    reader.fields["inference.engine"] = Engine.LLAMACPP
    reader.fields["inference.ollama_version"] = OllamaVersion.NONE
    _model(reader, out)
    slots = _ints(reader, ("-np", "--parallel"), "a slot count") or 1
    reader.set("inference.concurrent", max(1, slots), ("-np", "--parallel"))
    server = program in ("llama-server", "server")
    if "-np" not in reader.args.values and "--parallel" not in reader.args.values:
        # common/arg.cpp 145b6280: -np is every program's ("number of parallel sequences to decode"), its default
        # common_params.n_parallel = 1; slots, and builds whose llama-server picks its own count, are the server's.
        out.notes.append(
            "-np not given: one slot planned (llama-server's default slot count varies by build)"
            if server
            else f"-np not given: one sequence, {program}'s default (common_params.n_parallel = 1)"
        )
    _context(reader, out, max(1, slots), "slot(s)" if server else "sequence(s)")
    predict = _ints(reader, ("-n", "--predict", "--n-predict"), "a token count")
    if predict is not None and predict >= 0:
        reader.set("inference.new_tokens", predict, ("-n", "--predict", "--n-predict"))
    elif predict is not None:
        reader.cannot(_given(reader, ("-n", "--predict", "--n-predict")), "no limit: the plan's generated tokens kept")
    _layers(reader, out)
    _flash(reader, out, old)
    _cache(reader)
    _batch(reader)
    _split(reader, gpus)
    _experts(reader)
    return out


def _model(reader: _Reader, out: GgufRead) -> None:
    path = reader.value("-m", "--model", "-mu", "--model-url")
    repo = reader.value("-hf", "-hfr", "--hf-repo")
    file = reader.value("-hff", "--hf-file")
    quant_word = ""
    flags: tuple[str, ...] = ()
    if repo is not None:
        repo_name, _, tag = repo.partition(":")
        out.model_ref, out.model_name = repo_name, gguf_name(repo_name)[0]
        quant_word = tag or "Q4_K_M"  # -hf's default type (common/arg.cpp: "default to Q4_K_M")
        flags = ("-hf", "-hfr", "--hf-repo")
        if file is not None:
            quant_word, flags = gguf_name(file)[1] or quant_word, (*flags, "-hff", "--hf-file")
    elif path is not None:
        out.model_ref = path
        out.model_name, quant_word = gguf_name(path.split("?")[0].split("#")[0])
        flags = ("-m", "--model", "-mu", "--model-url")
    for flag in flags:
        if flag in reader.args.written:
            reader.read.append(_note(reader.args.written[flag], "the model"))
    if not quant_word:
        if out.model_ref:
            reader.unexpressed.append(_note(out.model_ref, "the file's name says no GGUF type: the plan's is kept"))
        return
    _set_quant(reader, quant_word, out)


def _set_quant(reader: _Reader, word: str, out: GgufRead) -> None:
    """The GGUF type a file name or tag says, and the weights' format other engines plan for it (as
    core.files.launch.llamacpp.read_llama_server reads one)."""
    quant, why = quant_of(word)
    if quant is None:
        reader.unexpressed.append(_note(word, why))
        return
    reader.fields["inference.gguf_quant"] = quant
    reader.read.append(_note(word, f"GGUF type = {quant.value}", "inference.gguf_quant"))
    if why:
        out.notes.append(why)
    weights = {**{v: k for k, v in NEAREST_GGUF.items()}, **{v: k for k, v in GGUF_TYPES.items()}}
    if quant.value in weights:
        reader.fields["inference.weight_dtype"] = weights[quant.value]


def _note(words: str, why: str, path: str = "") -> Any:
    from core.files.launch.serve_command import FlagNote

    return FlagNote(words, why, path)


def _context(reader: _Reader, out: GgufRead, slots: int, what: str = "slot(s)") -> None:
    total = _ints(reader, ("-c", "--ctx-size"), "a context length")
    unified = reader.switch("-kvu", "--kv-unified")
    if total is None or total <= 0:
        out.context_given = False
        said = "-c 0: the model's own length" if total == 0 else "-c not given: the model's own length planned"
        out.notes.append(f"{said} (llama.cpp's default context depends on the build), over {slots} {what}")
    else:
        reader.set("inference.context", max(1, total // slots), ("-c", "--ctx-size", "-np", "--parallel"))
    if unified:
        words = reader.args.written.get("--kv-unified", reader.args.written.get("-kvu", "--kv-unified"))
        if slots > 1:
            reader.unexpressed.append(
                _note(
                    words, "one cache all slots share, a request up to -c: planned as -c / -np a slot, the same cells"
                )
            )
        else:
            reader.read.append(_note(words, "one slot: the same cache as without it"))


def _layers(reader: _Reader, out: GgufRead) -> None:
    flags = ("-ngl", "--gpu-layers", "--n-gpu-layers")
    text = reader.value(*flags)
    if text is None:
        reader.fields["inference.gpu_layers"] = -1
        reader.fields["_ngl_default"] = True
        out.notes.append("-ngl not given: auto, a current build's fit (older builds kept every layer on the CPU)")
        return
    value = text.strip().lower()
    if value == "all":
        layers = 999
    elif value == "auto":
        layers = -1
    else:
        try:
            layers = int(value)
        except ValueError:
            reader.unknown.append(f"{reader.args.written[_given(reader, flags)]} (not a layer count, auto or all)")
            return
        layers = max(layers, -1)  # past the model's layers: all of them, as the plan reads any such count
    reader.set("inference.gpu_layers", layers, flags)


def _flash(reader: _Reader, out: GgufRead, old: bool) -> None:
    flags = ("-fa", "--flash-attn")
    bare = reader.switch(*flags)
    text = reader.value(*flags)
    if text is not None:
        on = LLAMACPP_ON_OFF[text.lower()]
        if on is None:
            out.notes.append("-fa auto: on where the GPU runs it, as the plan takes it")
        reader.set("inference.flash_attention", on is not False, flags)
    elif bare:
        reader.set("inference.flash_attention", True, flags)
    else:  # the default: off before on|off|auto (August 2025), auto after
        reader.fields["inference.flash_attention"] = not old
        if old:
            out.notes.append("no -fa: off, the default of a build from before the June 2024 rename of main / server")


def _cache(reader: _Reader) -> None:
    key = reader.value("-ctk", "--cache-type-k")
    value = reader.value("-ctv", "--cache-type-v")
    known = {c.value for c in CacheType}
    chosen = key or value or CacheType.F16.value
    for given, flags in ((key, ("-ctk", "--cache-type-k")), (value, ("-ctv", "--cache-type-v"))):
        if given is not None and given not in known:
            reader.unknown.append(f"{reader.args.written[_given(reader, flags)]} (not a cache type llama.cpp takes)")
            chosen = CacheType.F16.value if given == chosen else chosen
    if key and value and key != value and key in known and value in known:
        reader.cannot(
            _given(reader, ("-ctv", "--cache-type-v")), f"V as {value}: the plan has one type for K and V ({key})"
        )
    cache = CacheType(chosen)
    reader.set("inference.cache_type", cache, ("-ctk", "--cache-type-k", "-ctv", "--cache-type-v"))
    kv = {v: k for k, v in CACHE_TYPES.items()}.get(cache.value)
    if kv is not None:
        reader.fields["inference.kv_dtype"] = kv


def _batch(reader: _Reader) -> None:
    ubatch = _ints(reader, ("-ub", "--ubatch-size"), "a token count")
    batch = _ints(reader, ("-b", "--batch-size"), "a token count")
    micro = ubatch if ubatch is not None and ubatch > 0 else 512  # common.h n_ubatch's default
    if batch is not None and 0 < batch < micro:  # llama_context: n_ubatch = min(n_batch, n_ubatch)
        reader.set("inference.ubatch", batch, ("-b", "--batch-size", "-ub", "--ubatch-size"))
        return
    reader.set("inference.ubatch", micro, ("-ub", "--ubatch-size"))
    if batch is not None:
        words = reader.args.written[_given(reader, ("-b", "--batch-size"))]
        reader.read.append(_note(words, "the logical batch, split into -ub micro-batches: at or above -ub, no cap"))


def _split(reader: _Reader, visible: int | None) -> None:
    mode = reader.value("-sm", "--split-mode")
    shares_text = reader.value("-ts", "--tensor-split")
    gpus = visible or 1
    if shares_text is not None:
        try:
            shares = [float(s) for s in re.split(r"[,/]+", shares_text) if s.strip()]
        except ValueError:
            reader.unknown.append(f"{reader.args.written[_given(reader, ('-ts', '--tensor-split'))]} (not shares)")
            shares = []
        used = [s for s in shares if s > 0]
        gpus = len(used) or 1
        if len(set(used)) > 1:
            reader.cannot(_given(reader, ("-ts", "--tensor-split")), "uneven shares: the plan splits layers evenly")
    mode = (mode or ("layer" if gpus > 1 else "none")).lower()
    flags = ("-sm", "--split-mode", "-ts", "--tensor-split")
    if mode not in ("none", "layer", "row"):
        reader.unknown.append(
            f"{reader.args.written[_given(reader, ('-sm', '--split-mode'))]} (not none, layer or row)"
        )
        mode = "none"
    reader.set("inference.pipeline_parallel", gpus if mode == "layer" else 1, flags if mode != "row" else ())
    reader.set("inference.tensor_parallel", gpus if mode == "row" else 1, flags if mode == "row" else ())
    if mode == "row":  # the words' setting says what the plan's tensor parallel cannot
        reader.read[-1] = _note(
            reader.read[-1].words,
            reader.read[-1].why + " (row split: llama.cpp keeps the KV cache on the main GPU)",
            "inference.tensor_parallel",
        )


def _experts(reader: _Reader) -> None:
    layers = 0
    flags: list[str] = []
    if reader.switch("--cpu-moe", "-cmoe"):
        layers, flags = CPU_MOE_ALL, ["--cpu-moe", "-cmoe"]
    count = _ints(reader, ("--n-cpu-moe", "-ncmoe"), "a layer count")
    if count is not None:
        layers, flags = max(layers, count), [*flags, "--n-cpu-moe", "-ncmoe"]
    patterns = reader.value("-ot", "--override-tensor")
    if patterns is not None:
        unread = []
        for entry in patterns.split(","):  # common/arg.cpp parse_tensor_buffer_overrides splits on commas
            read = override_layers(entry)
            if read is None:
                unread.append(entry)
            else:
                layers = max(layers, read)
        if unread:
            reader.cannot(
                _given(reader, ("-ot", "--override-tensor")),
                f"{', '.join(unread)}: not the experts of the first layers kept in RAM (the loader moves those "
                "tensors; the plan cannot say so)",
            )
        else:
            flags += ["-ot", "--override-tensor"]
    reader.set("inference.cpu_moe_layers", layers, tuple(flags))
    if layers == CPU_MOE_ALL and flags and reader.read[-1].field == "inference.cpu_moe_layers":
        reader.read[-1] = _note(reader.read[-1].words, "Experts in RAM = every layer's", "inference.cpu_moe_layers")


# ---- Ollama ---------------------------------------------------------------------------------------------
# envconfig/config.go: the server's address, origins, keep-alive, where models live, logs, history: nothing the GPU
# holds. The variables that change memory and the plan has no setting for, with why.
OLLAMA_ENV_IGNORED: Final = frozenset(
    {
        "OLLAMA_HOST",
        "OLLAMA_ORIGINS",
        "OLLAMA_KEEP_ALIVE",
        "OLLAMA_MODELS",
        "OLLAMA_DEBUG",
        "OLLAMA_NOHISTORY",
        "OLLAMA_NOPRUNE",
        "OLLAMA_TMPDIR",
        "OLLAMA_HOME",
        "OLLAMA_MAX_QUEUE",
        "OLLAMA_LOAD_TIMEOUT",
        "OLLAMA_RUNNERS_DIR",
    }
)
OLLAMA_ENV_WHY: Final = {
    "OLLAMA_GPU_OVERHEAD": "memory Ollama holds back on each GPU: the estimate holds none back",
    "OLLAMA_MAX_LOADED_MODELS": "several models loaded at once: the plan serves one",
    "OLLAMA_MAX_VRAM": "a cap on the memory Ollama sees: the plan takes the card's",
    "OLLAMA_LLM_LIBRARY": "the runner library chosen by hand: the plan takes the card's own",
    "OLLAMA_NEW_ENGINE": "the Go engine for every model: the plan follows the line's choice by model",
    "OLLAMA_MULTIUSER_CACHE": "a prompt cache shared by users: the plan's KV cache per request",
}
# api/types.go Options the plan takes (the rest of a Modelfile's PARAMETERs sample or stop: no memory).
_PARAMETERS: Final = {
    "num_ctx": "inference.context",
    "num_gpu": "inference.gpu_layers",
    "num_batch": "inference.ubatch",
    "num_predict": "inference.new_tokens",
}
_MAX_UBATCH: Final = 512  # llama_context_default_params' n_ubatch, which Ollama never sets (core.files.launch.ollama)
_RUN_SWITCHES: Final = flag_names("--verbose --insecure --nowordwrap --hidethinking --think")
_RUN_VALUED: Final = flag_names("--keepalive --format --think")
_OLLAMA_IMAGE: Final = re.compile(r"(^|/)ollama/ollama(:(?P<tag>[\w.+-]+))?(@sha256:\w+)?$")
_HEREDOC: Final = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")
_BOOL_WORDS: Final = {"1": True, "t": True, "true": True, "0": False, "f": False, "false": False}


def is_ollama(text: str) -> bool:
    """The text runs ``ollama serve`` / ``run`` / ``create`` (or is a Modelfile): Ollama's reader takes it."""
    return bool(re.search(r"(^|[\s;&|(\"'])ollama\s+(serve|run|create)\b|(^|[\s/])ollama/ollama\b", text)) or bool(
        re.match(r"\s*FROM\s+\S+", text, re.I)
    )


def _parse_bool(value: str) -> bool:
    """strconv.ParseBool's words; any other non-empty value reads as true (envconfig.Bool from v0.5)."""
    return _BOOL_WORDS.get(value.strip().strip("'\" ").lower(), True)


def read_ollama_lines(text: str, reader: _Reader, words_of: Any) -> GgufRead:
    """Ollama's shell lines and Modelfile into ``reader``'s fields and lists; ``words_of`` splits a line as sh."""
    out = GgufRead(context_given=False)
    reader.fields["inference.engine"] = Engine.LLAMACPP
    modelfile: list[str] = []
    lines = text.splitlines()
    i = 0
    heredoc = ""
    while i < len(lines):
        line = lines[i].strip()
        i += 1
        if heredoc:
            if line == heredoc:
                heredoc = ""
            else:
                modelfile.append(line)
            continue
        if not line:
            continue
        if line.startswith("#"):
            if LINE_MARK in line:
                version = line.split(LINE_MARK, 1)[1].split(":", 1)[0].strip()
                if version in {v.value for v in LINES}:
                    reader.fields["inference.ollama_version"] = OllamaVersion(version)
            continue
        if re.match(r"(FROM|PARAMETER|TEMPLATE|SYSTEM|ADAPTER|LICENSE|MESSAGE)\b", line, re.I):
            modelfile.append(line)
            continue
        marker = _HEREDOC.search(line)
        if marker:
            heredoc = marker.group(2)
            out.notes.append(f"writes the Modelfile read below: {one_line(line)[:80]}")
            continue
        _shell_line(line, reader, out, words_of)
    _modelfile(modelfile, reader, out)
    _ollama_env(out.env, reader, out)
    if "inference.ollama_version" not in reader.fields:
        out.notes.append("the Ollama release is not named: the newest line covered that takes the model is planned")
    return out


def _shell_line(line: str, reader: _Reader, out: GgufRead, words_of: Any) -> None:
    """One shell line: its commands apart (``;``, ``&&``, ``|``, ``&``), redirections dropped, each read."""
    from core.files.launch.serve_command import shell_commands

    commands, notes = shell_commands(words_of(line))
    out.notes.extend(notes)
    for words in commands:
        _shell_command(words, " ".join(words), reader, out)


def _shell_command(words: list[str], line: str, reader: _Reader, out: GgufRead) -> None:
    from core.files.launch.serve_command import unwrap

    if words[:1] == ["export"]:
        for word in words[1:]:
            key, eq, value = word.partition("=")
            if eq:
                out.env[key] = value
        return
    env: dict[str, str] = {}
    rest = unwrap(words, env, out.notes)
    image = next((i for i, w in enumerate(rest) if _OLLAMA_IMAGE.search(w)), None)
    if rest[:1] == ["docker"] and "run" in rest and image is not None:
        _docker_run(rest[:image], rest[image], reader, out)
        rest = ["ollama", "serve", *rest[image + 1 :]]  # the image's entrypoint: ollama serve
    elif rest[:2] == ["docker", "exec"]:  # docker exec [-it] CONTAINER ollama run MODEL
        verbs = ("serve", "run", "create")
        at = next((i for i in range(2, len(rest) - 1) if rest[i] == "ollama" and rest[i + 1] in verbs), len(rest))
        rest = rest[at:]
    if len(rest) < 2 or rest[0].rsplit("/", 1)[-1] != "ollama":
        out.notes.append(f"another command beside it, not read: {one_line(line)[:120]}")
        return
    out.env.update(env)
    verb, args = rest[1], rest[2:]
    if verb == "serve":
        reader.read.append(_note(" ".join(rest[:2]), "the server (its environment is read)"))
        reader.unknown.extend(f"{w} (ollama serve takes no arguments)" for w in args)
    elif verb == "run":
        _run(args, reader, out)
    elif verb == "create":
        _create(args, reader)
    else:
        out.notes.append(f"another command beside it, not read: {one_line(line)[:120]}")


def _docker_run(before: list[str], image: str, reader: _Reader, out: GgufRead) -> None:
    """docker run's options in front of the ollama/ollama image (-e, --gpus) and the release its tag names."""
    from core.files.launch.serve_command import _docker, _Start

    start = _Start(Engine.LLAMACPP, [])
    _docker(before, start)
    out.env.update(start.env)
    out.notes.extend(start.notes)
    if start.gpus:
        out.env.setdefault("CUDA_VISIBLE_DEVICES", ",".join(str(i) for i in range(start.gpus)))
    tag = (_OLLAMA_IMAGE.search(image).group("tag") or "").removeprefix("v")  # type: ignore[union-attr]
    line = ollama_line(tag)
    if line is not None:
        reader.fields["inference.ollama_version"] = line
    elif tag:
        out.notes.append(f"Ollama {one_line(tag)[:40]}: not a release the planner has rules for; the newest is planned")


def ollama_line(version: str) -> OllamaVersion | None:
    """The release line a version (0.6.8) falls in, by the tags each line covers (core.serving.ollama.LINES)."""
    number = _version_key(version)
    if number is None:
        return None
    for line, data in LINES.items():
        first, _, last = data.tags.partition("–")
        low, high = _version_key(first.strip().removeprefix("v")), _version_key(last.strip().removeprefix("v"))
        if low is not None and high is not None and low <= number <= high:
            return line
    return None


def _version_key(text: str) -> tuple[int, ...] | None:
    match = re.fullmatch(r"(\d+)\.(\d+)(?:\.(\d+))?", text.strip())
    return tuple(int(g or 0) for g in match.groups()) if match else None


def _run(args: list[str], reader: _Reader, out: GgufRead) -> None:
    model = ""
    prompt: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        name = word.partition("=")[0]
        if name in _RUN_VALUED and "=" not in word and name not in _RUN_SWITCHES and i + 1 < len(args):
            reader.ignored.append(_note(f"{word} {args[i + 1]}", NO_EFFECT))
            i += 2
            continue
        if name in _RUN_SWITCHES | _RUN_VALUED:
            reader.ignored.append(_note(word, NO_EFFECT))
        elif word.startswith("-"):
            reader.unknown.append(word)
        elif not model:
            model = word
        else:
            prompt.append(word)
        i += 1
    if prompt:
        reader.ignored.append(_note(" ".join(prompt), "the prompt: " + NO_EFFECT))
    if model:
        reader.read.append(_note(f"ollama run {model}", "the model"))
        if not out.model_ref:
            _ollama_model(model, reader, out)


def _create(args: list[str], reader: _Reader) -> None:
    name = next((w for w in args if not w.startswith("-")), "")
    reader.read.append(_note(f"ollama create {' '.join(args)}".strip(), f"the model {name} made from the Modelfile"))


def _ollama_model(ref: str, reader: _Reader, out: GgufRead) -> None:
    out.model_ref = ref
    local = ref.lower().endswith(".gguf") or ref.startswith(("./", "/", "~"))
    out.model_name, quant_word = gguf_name(ref) if local else ollama_tag(ref)
    if not quant_word:
        out.notes.append(f"{ref}: no GGUF type in the tag, the library's default; the plan's type is kept")
        return
    _set_quant(reader, quant_word, out)


def _modelfile(lines: list[str], reader: _Reader, out: GgufRead) -> None:
    block = ""  # a TEMPLATE / SYSTEM value in triple quotes, over lines
    for line in lines:
        if block:
            block = "" if '"""' in line else block
            continue
        if not line or line.startswith("#"):
            continue
        instruction, _, rest = line.partition(" ")
        instruction, rest = instruction.upper(), rest.strip()
        if instruction == "FROM":
            reader.read.append(_note(line, "the model"))
            _ollama_model(rest, reader, out)
        elif instruction == "PARAMETER":
            _parameter(line, rest, reader, out)
        elif instruction == "ADAPTER":
            reader.unexpressed.append(_note(line, "an adapter applied at load: the plan serves the base model"))
        elif instruction in ("TEMPLATE", "SYSTEM", "LICENSE", "MESSAGE"):
            reader.ignored.append(_note(f"{instruction} …", NO_EFFECT))
            if rest.count('"""') == 1:
                block = instruction
        else:
            reader.unknown.append(line)


def _parameter(line: str, rest: str, reader: _Reader, out: GgufRead) -> None:
    name, _, value = rest.partition(" ")
    value = value.strip().strip('"')
    path = _PARAMETERS.get(name)
    if path is None:
        reader.ignored.append(_note(line, NO_EFFECT))
        return
    try:
        number = int(value)
    except ValueError:
        reader.unknown.append(f"{line} (not a whole number)")
        return
    if name == "num_gpu" and number < 0:
        number = 999  # -1, the default: Ollama's own choice (core.serving.ollama.ollama_estimate)
    if name == "num_predict" and number < 0:
        reader.cannot_words(line, "no limit: the plan's generated tokens kept")
        return
    if name == "num_batch" and number > _MAX_UBATCH:
        reader.cannot_words(line, f"Ollama leaves n_ubatch at {_MAX_UBATCH}: a micro-batch of {_MAX_UBATCH} planned")
        number = _MAX_UBATCH
    reader.fields[path] = number
    from core.files.launch.serve_command import shown_setting

    reader.read.append(_note(line, shown_setting(path, number), path))
    out.context_given = out.context_given or path == "inference.context"


def _ollama_env(env: dict[str, str], reader: _Reader, out: GgufRead) -> None:
    from core.files.launch.serve_command import ENV_IGNORED, shown_setting

    flash: bool | None = None
    if "OLLAMA_FLASH_ATTENTION" in env:
        flash = _parse_bool(env["OLLAMA_FLASH_ATTENTION"])
    for key, value in env.items():
        words = f"{key}={one_line(value)[:60]}"
        setting: tuple[str, Any] | None = None
        if key == "OLLAMA_NUM_PARALLEL":
            number = _env_int(value)
            if number is None or number < 0:
                reader.unknown.append(f"{words} (not a count)")
            elif number == 0:
                reader.read.append(_note(words, "0: the scheduler's choice, as unset"))
            else:
                setting = ("inference.concurrent", number)
        elif key == "OLLAMA_FLASH_ATTENTION":
            setting = ("inference.flash_attention", flash)
        elif key == "OLLAMA_KV_CACHE_TYPE":
            cache = value.strip().strip("'\"").lower()
            if cache not in {c.value for c in KV_BYTES}:
                reader.cannot_words(words, "Ollama passes f16, q8_0 or q4_0 only (llm/server.go): f16 planned")
            elif not flash and cache != CacheType.F16.value:
                reader.cannot_words(words, "passed to the runner only with OLLAMA_FLASH_ATTENTION=1: f16 planned")
            else:
                setting = ("inference.cache_type", CacheType(cache))
        elif key == "OLLAMA_CONTEXT_LENGTH":
            number = _env_int(value)
            if number is None or number <= 0:
                reader.unknown.append(f"{words} (not a length)")
            elif "inference.context" in reader.fields:
                reader.read.append(_note(words, "the default context; the Modelfile's num_ctx wins"))
            else:
                setting = ("inference.context", number)
                out.context_given = True
        elif key == "OLLAMA_SCHED_SPREAD":
            reader.read.append(_note(words, "the model spread over every GPU visible"))
        elif key in DEVICES_ENV.values() or key in ("ROCR_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL"):
            from core.files.launch.serve_command import visible_gpus

            gpus = visible_gpus(value)
            if gpus == 0:
                reader.cannot_words(words, "hides every GPU: Ollama runs on the CPU; the plan keeps its card")
            else:
                setting = ("inference.pipeline_parallel", gpus or 1)
        elif key in OLLAMA_ENV_IGNORED or key in ENV_IGNORED:
            reader.ignored.append(_note(words, ENV_IGNORED.get(key, NO_EFFECT)))
        elif key in OLLAMA_ENV_WHY:
            reader.cannot_words(words, OLLAMA_ENV_WHY[key])
        elif key.startswith("OLLAMA_"):
            from core.files.launch.serve_command import NOT_MODELLED

            reader.cannot_words(words, NOT_MODELLED)
        else:
            reader.unknown.append(words)
        if setting is not None:
            reader.fields[setting[0]] = setting[1]
            reader.read.append(_note(words, shown_setting(*setting), setting[0]))
    reader.fields.setdefault("inference.gpu_layers", 999)  # num_gpu unset: Ollama's own choice
    reader.fields.setdefault("inference.cache_type", CacheType.F16)
    reader.fields.setdefault("inference.pipeline_parallel", 1)
    reader.fields.setdefault("inference.tensor_parallel", 1)
    reader.fields.setdefault("inference.cpu_moe_layers", 0)
    reader.fields.setdefault("inference.ubatch", _MAX_UBATCH)  # num_batch's default, 512 (api/types.go)


def _env_int(value: str) -> int | None:
    try:
        return int(value.strip().strip("'\""))
    except ValueError:
        return None
