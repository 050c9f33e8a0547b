"""A pasted ``vllm serve`` / SGLang launch command read back into the serving plan, nothing dropped unsaid.

:func:`read_command` takes the text a user has (a shell line, with ``\\``-newline continuations, quotes, ``KEY=VALUE``
words in front, a ``docker run`` around it, the comment lines of an export) and returns a :class:`CommandRead`: the
plan fields it set, each with the words it came from; the flags that change nothing the planner models (listed as
ignored, the engine's own flags for the server's address, logging, tokenizer, chat and tool parsing); the engine's
flags that change memory or speed but which the plan cannot express, each with why; and every word not understood.
Which words are the engine's flags, and which take a value: :mod:`core.files.launch.engine_flags`.

It handles ``vllm serve MODEL`` (the model also as ``--model``), ``python -m vllm.entrypoints.openai.api_server
--model``, ``python -m sglang.launch_server --model-path`` (alias ``--model``) and ``sglang serve [MODEL]``,
``--flag=value`` and ``--flag value``,
vLLM's underscore spellings (``FlexibleArgumentParser`` turns ``_`` into ``-`` in a flag's name) and argparse's
unique prefixes in both engines. :func:`plan_from_command` finds the model (a local folder, the local Hugging Face
cache, the catalogue by name) and builds the plan on a base plan (its card, its other settings); an unknown model is
one message with the closest catalogue names.

The flags a plan's export writes (:mod:`core.files.launch.vllm`, :mod:`core.files.launch.sglang`) are all read back:
export, then read, gives the same serving fields (``tests/core/test_launch_roundtrip.py``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from core.catalogue import load_models
from core.context_limit import VLLM_LONG_ENV
from core.dtypes import KvDtype, WeightFormat
from core.errors import PlanError, PlanFileError, one_line
from core.estimate import gpu_for
from core.files.launch import gguf_command as gguf
from core.files.launch import sglang as sg
from core.files.launch import vllm as vl
from core.files.launch.engine_flags import (
    NO_EFFECT,
    SGLANG_CONFIG_REFUSED,
    SGLANG_SWITCHES,
    SGLANG_VALUED,
    VLLM_SWITCHES,
    VLLM_VALUED,
    Choices,
    flag_names,
    releases_taking,
    sglang_prog,
    sglang_release_flags,
    sglang_release_values,
    sglang_wheels,
    vllm_release_flags,
    vllm_release_values,
)
from core.files.model_source import is_hub_id
from core.files.runconfig import ModelChoice, model_choice
from core.format import counted
from core.inputs import BY_PATH, MAX_LLAMACPP_BUILD, VLLM_KV_NAMES, SglangVersion, VllmVersion
from core.plan import ENGINE_LABELS, Engine, Plan, PrefixCaching
from core.serving.ollama import ollama_defaults

MAX_COMMAND_CHARS: Final = 64_000  # a launch line is a few hundred characters; vLLM's JSON flags a few thousand
MAX_WORDS: Final = 2_000
WHERE: Final = "the launch command"
NOT_MODELLED: Final = (
    "changes what the engine holds or how fast it runs, but the plan has no setting for it: the estimate takes "
    "the engine's default"
)


@dataclass(frozen=True)
class FlagNote:
    """Words of the command and what became of them: a plan field set, or why not."""

    words: str  # as written: "--max-model-len 32K"
    why: str  # "Context = 32,768" (the field as the Serving form labels it), or why it is not used
    field: str = ""  # the plan field set ("inference.context"); "" for a word not used

    @property
    def ignored_why(self) -> str:
        """An ignored note's own reason, less the heading's "no effect on memory or speed" ("" where that is all)."""
        return self.why.removesuffix(NO_EFFECT).removesuffix(": ").strip()

    @property
    def ignored_line(self) -> str:
        """An ignored entry as the Paste dialog and ``vramplan import-command`` list it: its words, then its own
        reason after a dash where it has one beyond the heading's."""
        return f"{self.words} — {self.ignored_why}" if self.ignored_why else self.words


@dataclass(frozen=True)
class CommandRead:
    engine: Engine  # VLLM or SGLANG
    model_ref: str  # the model as the command names it ("" when it names none)
    fields: Mapping[str, Any]  # plan fields by dotted name ("inference.context": 8192)
    read: tuple[FlagNote, ...]  # what each understood flag set
    ignored: tuple[FlagNote, ...]  # the engine's flags with no effect on memory or speed
    unexpressed: tuple[FlagNote, ...]  # the engine's flags (and values) the plan cannot express, with why
    unknown: tuple[str, ...]  # words not understood: not the engine's flags, or a value it does not take
    notes: tuple[str, ...] = ()  # the environment, docker's options, the GPUs visible
    context_given: bool = True  # False: the engine's default (the model's own length) applies
    dtype_given: bool = True  # False: --dtype auto, the checkpoint's dtype
    model_name: str = ""  # the name to look up where it is not model_ref's (a GGUF file's, an Ollama tag's)
    program: str = ""  # llama.cpp's program or "ollama" (vLLM and SGLang: "")
    layers_given: bool = True  # False: llama.cpp's -ngl not given (auto, its fit)
    stops: str = ""  # why the engine would not start with this text as written ("" when nothing said stops it)

    @property
    def engine_label(self) -> str:
        if self.engine is Engine.LLAMACPP:
            return "Ollama" if self.program == "ollama" else "llama.cpp"
        return ENGINE_LABELS[self.engine]


# ---- the flags each engine's argument definitions name, by what they do to the plan ------------------
# vLLM 0.19.0 vllm/entrypoints/openai/cli_args.py (FrontendArgs, make_arg_parser) and vllm/engine/arg_utils.py
# (ModelConfig's tokenizer, revision, seed; ObservabilityConfig; the parsers of StructuredOutputsConfig): the server's
# address, security, logging, metrics, chat and tool handling and where files come from. None of them sizes a buffer
# on the GPU or changes a kernel.
VLLM_IGNORED: Final = flag_names(
    """
    --host --port --uds --api-key --served-model-name --trust-remote-code --no-trust-remote-code
    --disable-log-requests --enable-log-requests --no-enable-log-requests --disable-log-stats --no-disable-log-stats
    --uvicorn-log-level --disable-uvicorn-access-log --no-disable-uvicorn-access-log
    --disable-access-log-for-endpoints --allow-credentials --no-allow-credentials --allowed-origins
    --allowed-methods --allowed-headers --ssl-keyfile --ssl-certfile --ssl-ca-certs --ssl-cert-reqs --ssl-ciphers
    --enable-ssl-refresh --no-enable-ssl-refresh --root-path --middleware --chat-template
    --chat-template-content-format --trust-request-chat-template --no-trust-request-chat-template
    --default-chat-template-kwargs --response-role --enable-auto-tool-choice --no-enable-auto-tool-choice
    --exclude-tools-when-tool-choice-none --no-exclude-tools-when-tool-choice-none --tool-call-parser
    --tool-parser-plugin --tool-server --reasoning-parser --reasoning-parser-plugin --enable-reasoning --tokenizer
    --tokenizer-mode --tokenizer-revision --revision --code-revision --download-dir --hf-token --seed --max-log-len
    --return-tokens-as-token-ids --no-return-tokens-as-token-ids --enable-prompt-tokens-details
    --no-enable-prompt-tokens-details --enable-server-load-tracking --no-enable-server-load-tracking
    --enable-force-include-usage --no-enable-force-include-usage --enable-tokenizer-info-endpoint
    --no-enable-tokenizer-info-endpoint --disable-fastapi-docs --no-disable-fastapi-docs --enable-offline-docs
    --no-enable-offline-docs --enable-request-id-headers --no-enable-request-id-headers --log-config-file
    --otlp-traces-endpoint --collect-detailed-traces --show-hidden-metrics-for-version --enable-log-outputs
    --no-enable-log-outputs --enable-log-deltas --no-enable-log-deltas --log-error-stack --no-log-error-stack
    --h11-max-incomplete-event-size --h11-max-header-count --kv-cache-metrics --no-kv-cache-metrics
    --kv-cache-metrics-sample --cudagraph-metrics --no-cudagraph-metrics --enable-mfu-metrics
    --no-enable-mfu-metrics --aggregate-engine-logging --no-aggregate-engine-logging
    --enable-logging-iteration-details --no-enable-logging-iteration-details --use-tqdm-on-load
    --no-use-tqdm-on-load --ignore-patterns --generation-config --override-generation-config
    --guided-decoding-backend --structured-outputs-config --config-format --shutdown-timeout
    --distributed-timeout-seconds --master-addr --master-port --node-rank -r --fail-on-environ-validation
    --no-fail-on-environ-validation --lora-modules --max-logprobs --logprobs-mode
    """
)
# SGLang 0.5.23 arg_groups/fields/serving.py and observability.py (0.4.x - 0.5.11: the same flags in
# server_args.py ServerArgs.add_cli_args): address, keys, logs, metrics, tokenizer, chat and parsers.
SGLANG_IGNORED: Final = flag_names(
    """
    --host --port --api-key --admin-api-key --served-model-name --trust-remote-code --log-level --log-level-http
    --log-requests --log-requests-level --enable-metrics --enable-metrics-for-all-schedulers --tokenizer-path
    --tokenizer-mode --revision --download-dir --chat-template --completion-template --tool-call-parser
    --reasoning-parser --random-seed --show-time-cost --decode-log-interval --enable-cache-report --watchdog-timeout
    --dist-init-addr --node-rank --enable-p2p-check --model-loader-extra-config --file-storage-path
    --skip-server-warmup --warmups --crash-dump-folder --enable-request-time-stats-logging
    --bucket-time-to-first-token --bucket-inter-token-latency --bucket-e2e-request-latency
    --collect-tokens-histogram --prompt-tokens-buckets --generation-tokens-buckets --otlp-traces-endpoint
    --enable-trace --tool-server --uvicorn-access-log-exclude-prefixes --ssl-keyfile --ssl-certfile --ssl-ca-certs
    --ssl-keyfile-password --tokenizer-worker-num --load-watch-interval --export-metrics-to-file
    --export-metrics-to-file-dir
    """
)
# The flags that do change memory or speed and the plan has no input for, each with its own words where the usual
# ones would mislead (the rest: NOT_MODELLED).
CONFIG_WHY: Final = (
    "options read from a YAML file not given here (vramplan import-command reads it beside the command, the window's "
    "Load YAML…)"
)
VLLM_WHY: Final = {
    "--enable-expert-parallel": "experts placed whole on each rank instead of sliced by TP: the plan slices them",
    "--swap-space": "host RAM for swapped-out KV blocks (the V0 engine): the plan counts GPU memory",
    "--cpu-offload-gb": "weights kept in host RAM and streamed in: the plan holds every weight on the GPU",
    "--kv-transfer-config": "a KV connector (disaggregated prefill, LMCache): the plan serves one instance",
    "--speculative-config": "a draft model and its KV cache beside the target's: not in the plan",
    "--enable-lora": "LoRA adapters' slots: the plan serves the base model",
    "--max-lora-rank": "LoRA adapters' slots: the plan serves the base model",
    "--max-loras": "LoRA adapters' slots: the plan serves the base model",
    "--block-size": "the KV block the release picks for the card is the plan's (core.serving.vllm_versions)",
    "--kv-cache-memory-bytes": "a fixed KV pool instead of --gpu-memory-utilization: the plan sizes it from that",
    "--num-gpu-blocks-override": "a fixed count of KV blocks: the plan sizes the pool from --gpu-memory-utilization",
    "--decode-context-parallel-size": "decode context parallelism: the plan splits by TP, PP and replicas only",
    "--enable-chunked-prefill": "chunked prefill is on by default in the V1 engine the plan models",
    "--config": CONFIG_WHY,
    "-O": "the compilation level: the plan captures CUDA graphs unless --enforce-eager",
    "--optimization-level": "the compilation level: the plan captures CUDA graphs unless --enforce-eager",
    "--compilation-config": "the compilation settings: the plan captures CUDA graphs unless --enforce-eager",
}
SGLANG_WHY: Final = {
    "--chunked-prefill-size": "SGLang's card default, from which the default fraction's reserve was worked out",
    "--cuda-graph-max-bs": "SGLang's card default, from which the default fraction's reserve was worked out",
    "--max-running-requests": "SGLang sizes it from its pool; the plan's requests at once are the clients'",
    "--page-size": "the KV page: the plan counts tokens (page 1)",
    "--ep-size": "experts placed whole on each rank instead of sliced by TP: the plan slices them",
    "--enable-dp-attention": "attention data-parallel inside the TP group: the plan splits by TP, PP and replicas",
    "--speculative-algorithm": "a draft model and its KV cache beside the target's: not in the plan",
    "--max-total-tokens": "a fixed token pool instead of --mem-fraction-static: the plan sizes it from that",
    "--config": CONFIG_WHY,
}


# ---- the command's words ------------------------------------------------------------------------------
def command_text(raw: bytes | str, where: str = WHERE) -> str:
    """The text of a command as pasted or read from a file: refused, with one line saying why, when it is
    empty, too long, binary or not UTF-8."""
    if isinstance(raw, bytes):
        if len(raw) > MAX_COMMAND_CHARS * 4:
            raise PlanFileError(where, f"{len(raw):,} bytes: a launch command is at most {MAX_COMMAND_CHARS:,}")
        try:
            raw = raw.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise PlanFileError(where, "is not text (not UTF-8): paste the command line itself") from None
    if len(raw) > MAX_COMMAND_CHARS:
        raise PlanFileError(where, f"{len(raw):,} characters: a launch command is at most {MAX_COMMAND_CHARS:,}")
    if "\x00" in raw or sum(not (c.isprintable() or c in "\t\r\n") for c in raw) > 0:
        raise PlanFileError(where, "holds control characters (binary data?): paste the command line itself")
    if not raw.strip():
        raise PlanFileError(where, "is empty: paste a `vllm serve` or `python -m sglang.launch_server` line")
    return raw


_NO_FLAG: Final = " (a word no flag takes)"  # a positional word the engine has no place for, as listed
_CONTINUATION: Final = re.compile(r"\\[ \t]*\r?\n")
_PYTHON: Final = re.compile(r"^(.*/)?python[0-9.]*$")  # python, python3, python3.12, /usr/bin/python3
_ENV_WORD: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_SHELL_BREAKS: Final = frozenset({"&&", "||", ";", "|", "&"})
_REDIRECT: Final = re.compile(r"^([0-9&]?>|<$)")  # > log.txt, 2>&1, >>out, &>log; "<PATH>/m" is a placeholder


# A line pasted from Windows (cmd.exe, PowerShell): a drive's or the current folder's path with backslashes, which are
# separators there, not escapes; cmd's ^ and PowerShell's ` end a continued line.
_WINDOWS_PATH: Final = re.compile(r"""(?:^|[\s"'=])(?:[A-Za-z]:|\.{1,2})\\[^\s\\]""")
_WINDOWS_CONTINUATION: Final = re.compile(r"[\^`][ \t]*\r?\n")


def _words(text: str, where: str) -> list[str]:
    windows = bool(_WINDOWS_PATH.search(text))
    if windows:
        text = _WINDOWS_CONTINUATION.sub(" ", text)
    lines = []
    for line in _CONTINUATION.sub(" ", text).splitlines():
        stripped = line.strip()
        if stripped.startswith("#") or not stripped:
            continue  # an export's header, a comment line
        lines.append(_subshell(stripped.removeprefix("$ ")))
    try:
        words = inline_shells(shell_words("\n".join(lines), keep_backslash=windows))
    except ValueError as exc:  # an unterminated quote, a backslash at the end
        raise PlanFileError(where, f"cannot be split into words as a shell would: {exc}") from None
    return words


def _subshell(line: str) -> str:
    """A line run in a subshell, ``(vllm serve ... &)``, as the command inside it."""
    return line[1:-1].strip() if line.startswith("(") and line.endswith(")") else line


_SHELL: Final = re.compile(r"^(.*/)?(ba|da|z|k)?sh$")  # sh, bash, /bin/bash, dash, zsh, ksh
_SHELL_C: Final = re.compile(r"^-[a-z]*c[a-z]*$")  # -c, -lc, -ec, -xec: the command string follows


def inline_shells(words: list[str], depth: int = 0) -> list[str]:
    """``bash -c "SCRIPT"`` (a compose file's or a container's command) as SCRIPT's own words, three levels deep at
    most; the words after the script (its $0, $1) are left where they are. Raises ValueError as shell_words does."""
    out: list[str] = []
    i = 0
    while i < len(words):
        if _SHELL.match(words[i]) and i + 2 < len(words) and _SHELL_C.match(words[i + 1]) and depth < 3:
            out += inline_shells(shell_words(_subshell(words[i + 2].strip())), depth + 1)
            i += 3
            continue
        out.append(words[i])
        i += 1
    return out


# A POSIX shell's words (sh's "Token Recognition"): '...' keeps everything, "..." lets a backslash escape " \\ $ `,
# a backslash outside quotes escapes the next character, # starts a comment only where a word would start, an unquoted
# ; is an operator of its own (`export K=V; cmd`). One regex
# pass: shlex.split took 0.4 s on 64,000 characters of one word, too long for a dialog that reads as you type.
_TOKEN: Final = re.compile(
    r"""(?P<space>\s+)|(?P<single>'[^']*')|(?P<double>"[^"\\]*(?:\\.[^"\\]*)*")|(?P<escape>\\.)|(?P<semi>;)"""
    r"""|(?P<plain>[^\s'"\\;]+)""",
    re.S,
)
_DOUBLE_ESCAPE: Final = re.compile(r'\\([\\"$`\n])')


def shell_words(text: str, limit: int = MAX_WORDS, keep_backslash: bool = False) -> list[str]:
    """``text`` split into words as ``sh`` splits them (quotes removed, escapes applied, comments dropped); raises
    ValueError for an unterminated quote, a backslash with nothing after it, or more than ``limit`` words.
    ``keep_backslash``: a backslash outside quotes is kept as written (a Windows path's separator)."""
    words: list[str] = []
    word: list[str] = []
    started = False  # a word is open (an empty quoted word counts)
    at = 0
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None:  # a quote with no closing one, or a backslash at the end
            raise ValueError("No closing quotation" if text[at] in "'\"" else "No escaped character")
        kind, token = match.lastgroup, match.group()
        at = match.end()
        if kind == "semi":  # an operator even inside a word (`export K=V; llama-server`): a word of its own
            if started:
                words.append("".join(word))
                word, started = [], False
            words.append(";")
            continue
        if kind == "space":
            if started:
                words.append("".join(word))
                word, started = [], False
                if len(words) > limit:
                    raise ValueError(f"more than {limit:,} words; a launch command has a few dozen")
            continue
        if kind == "plain" and not started and token.startswith("#"):
            newline = text.find("\n", at)
            at = len(text) if newline < 0 else newline
            continue
        started = True
        if kind == "single":
            word.append(token[1:-1])
        elif kind == "double":
            word.append(_DOUBLE_ESCAPE.sub(lambda m: "" if m.group(1) == "\n" else m.group(1), token[1:-1]))
        elif kind == "escape":
            word.append(token if keep_backslash else token[1])
        else:
            word.append(token)
    if started:
        words.append("".join(word))
    return words


@dataclass
class _Start:
    engine: Engine
    args: list[str]  # the words after the program (vllm serve's / launch_server's arguments)
    env: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    gpus: int | None = None  # GPUs the container or CUDA_VISIBLE_DEVICES lets it see
    image_version: str = ""  # a docker image's tag: v0.31.0
    program: str = ""  # llama.cpp's program name (llama-server, main, ...)
    serve_model: str = ""  # `sglang serve MODEL`'s positional model, read as --model-path
    entrypoint: str = ""  # docker run --entrypoint's program: the image's own command replaced
    stops: str = ""  # why the program would not start as the words around it run it ("" when nothing said)


def shell_commands(words: list[str]) -> tuple[list[list[str]], list[str]]:
    """A shell line's commands (split at &&, ||, ;, |, &), the redirections taken out (said in the notes)."""
    segments: list[list[str]] = [[]]
    redirected: list[str] = []
    target = False  # the word after a bare ">" names where the output goes
    for word in words:
        if target or _REDIRECT.match(word):
            redirected.append(word)
            target = word[-1] in "<>"
        elif word in _SHELL_BREAKS:
            segments.append([])
        else:
            segments[-1].append(word)
    notes = [f"the shell's redirections, {NO_EFFECT}: {one_line(' '.join(redirected))[:120]}"] if redirected else []
    return [s for s in segments if s], notes


def _segment(words: list[str]) -> tuple[list[str], list[str]]:
    """The shell command holding the engine (split at &&, ;, |), and notes on the words around it."""
    segments, redirections = shell_commands(words)
    found = next((s for s in segments if _engine_at(s) is not None), None)
    if found is None:
        return words, []
    exported = [s for s in segments if s[:1] == ["export"] and all(_ENV_WORD.match(w) for w in s[1:])]
    others = [" ".join(s) for s in segments if s is not found and s not in exported and s]
    found = [w for s in exported for w in s] + found  # `export K=V; llama-server ...`: in its environment
    notes = [f"another command beside it, not read: {one_line(o)[:120]}" for o in others]
    return found, notes + redirections


def _engine_at(words: list[str]) -> tuple[Engine, int] | None:
    """The engine the words start, and the index of its first argument."""
    for i, word in enumerate(words):
        name = word.rsplit("/", 1)[-1]
        if gguf.llamacpp_program(word) is not None:
            return Engine.LLAMACPP, i + 1
        if name == "vllm" and i + 1 < len(words) and words[i + 1] == "serve":
            return Engine.VLLM, i + 2
        if word == "vllm.entrypoints.openai.api_server" and i > 0 and words[i - 1] == "-m":
            return Engine.VLLM, i + 1
        if word == "sglang.launch_server" and i > 0 and words[i - 1] == "-m":
            return Engine.SGLANG, i + 1
        if name == "sglang" and i + 1 < len(words) and words[i + 1] == "serve":  # the `sglang` console script
            return Engine.SGLANG, i + 2
        if _image_engine(word) is not None and "run" in words[:i]:
            return _image_engine(word), i + 1  # type: ignore[return-value]
    return None


# vllm/vllm-openai runs `vllm serve` with the words after the image: vllm-project/vllm docker/Dockerfile, the
# vllm-openai stage, `ENTRYPOINT ["vllm", "serve"]`: the file's last instruction at commit dead20baf70d (CUDA 12.9.1,
# the 0.11 era) and at v0.27.1 (docker/Dockerfile:1088-1096 as quoted in a v0.27.1 read-through); the v0.19.0 tag
# itself was not read (the repository is over the snapshot limit). The v0.8-era file had the api_server module.
_VLLM_IMAGE: Final = re.compile(r"(^|/)vllm-openai(:(?P<tag>[\w.+-]+))?(@sha256:\w+)?$")
_SGLANG_IMAGE: Final = re.compile(r"(^|/)sglang(:(?P<tag>[\w.+-]+))?(@sha256:\w+)?$")
# ggml-org's images (ghcr.io/ggml-org/llama.cpp:server, :server-cuda-b6000, :light, :full): llama.cpp's README
# "Docker"; the server image's entrypoint is llama-server, the light one's llama-cli, the full one's tools.sh, whose
# first word (--server / --run) picks the program.
_LLAMACPP_IMAGE: Final = re.compile(r"(^|/)llama\.cpp(:(?P<tag>[\w.+-]+))?(@sha256:\w+)?$")


def _image_engine(word: str) -> Engine | None:
    if _LLAMACPP_IMAGE.search(word):
        return Engine.LLAMACPP
    if _VLLM_IMAGE.search(word):
        return Engine.VLLM
    if _SGLANG_IMAGE.search(word) and "/" in word:
        return Engine.SGLANG
    return None


# docker run's options that take a value (docker 27 `docker run --help`); the rest are switches.
_DOCKER_VALUED: Final = flag_names(
    """
    -e --env --env-file -p --publish -v --volume --name --gpus --ipc --shm-size --runtime --network --net -w
    --workdir --mount --device --ulimit --platform -u --user --entrypoint --cpus --memory -m --add-host --label -l
    --restart --pull --hostname -h --security-opt --cap-add --cap-drop --log-driver --log-opt --cidfile --pid --uts
    --userns --tmpfs --volumes-from --link --dns --expose --group-add --memory-swap --cpuset-cpus
    """
)


def visible_gpus(value: str) -> int | None:
    """GPUs a CUDA_VISIBLE_DEVICES value or docker's ``--gpus device=...`` names (None: all), counted as CUDA counts
    them (pytorch/pytorch torch/cuda/__init__.py ``_parse_visible_devices``, after PR #84879): ordinals read as
    strtoul reads them up to the first negative or unreadable one (``-1``: none, ``0,-1,2``: one), UUIDs (``GPU-``,
    ``MIG-``) up to the first without the prefix; an id given twice hides every GPU."""
    value = value.strip().strip("'\"").removeprefix("device=")
    if value == "all" or not value.strip(" ,"):
        return None if value == "all" or not value else 0
    prefix = next((p for p in ("GPU-", "MIG-") if value.startswith(p)), "")
    seen: list[str] = []
    for part in (p.strip() for p in value.split(",")):
        number = re.match(r"[+-]?\d+", part)
        key = part if prefix else str(int(number.group())) if number else "-1"
        if (prefix and not part.startswith(prefix)) or (not prefix and int(key) < 0):
            break
        if key in seen:
            return 0
        seen.append(key)
    return len(seen)


def _docker(words: list[str], start: _Start) -> None:
    """docker run's own options before the image: the environment and the GPUs it passes in."""
    i = words.index("run") + 1 if "run" in words else 0
    own: list[str] = []
    while i < len(words) and words[i].startswith("-"):
        name, eq, value = words[i].partition("=")
        if name in _DOCKER_VALUED and not eq and i + 1 < len(words):
            value, i = words[i + 1], i + 1
        if name in ("-e", "--env") and "=" in value:
            key, _, val = value.partition("=")
            start.env[key] = val
        elif name == "--entrypoint":  # the image's ENTRYPOINT replaced: the words after the image are its arguments
            start.entrypoint = value
            start.notes.append(f"docker --entrypoint {one_line(value)[:60]}: the image's own command replaced")
        elif name == "--gpus":
            bare = value.strip().strip("'\"")
            start.gpus = int(bare) if bare.isdigit() else visible_gpus(bare)  # --gpus 2: a count; device=2: an id
            seen = "every GPU" if start.gpus is None else f"{start.gpus} GPU(s)"
            start.notes.append(f"docker --gpus {one_line(bare)}: the container sees {seen}")
        else:
            own.append(name)
        i += 1
    if own:
        start.notes.append(f"docker run's own options, {NO_EFFECT}: {one_line(' '.join(own))[:120]}")


def _docker_image_at(words: list[str]) -> tuple[int, str] | None:
    """Where ``docker run``'s (or podman's) image is in ``words`` and the ``--entrypoint`` given before it ("" for
    none): the first word after run's own options (docker run reference: ``docker run [OPTIONS] IMAGE [ARG...]``)."""
    at = next((i for i, w in enumerate(words[1:], 1) if w == "run" and words[i - 1].endswith(("docker", "podman"))), 0)
    if not at:
        return None
    i, entrypoint = at + 1, ""
    while i < len(words) and words[i].startswith("-"):
        name, eq, value = words[i].partition("=")
        if name in _DOCKER_VALUED and not eq:
            value, i = (words[i + 1] if i + 1 < len(words) else ""), i + 1
        if name == "--entrypoint":
            entrypoint = value
        i += 1
    return (i, entrypoint) if i < len(words) else None


def _entrypoint_start(words: list[str]) -> _Start | None:
    """``docker run ... --entrypoint PROGRAM IMAGE ARGS``: PROGRAM run with ARGS, whatever the image, where PROGRAM
    (and the words after the image) start an engine; the image's tag names the release where the reader knows it."""
    image = _docker_image_at(words)
    if image is None or not image[1]:
        return None
    at, entrypoint = image
    program = [*shell_words(entrypoint), *words[at + 1 :]]
    inner = _engine_at(program)
    if inner is None:
        return None
    engine, first = inner
    start = _Start(engine, program[first:])
    start.program = gguf.llamacpp_program(program[first - 1]) or "" if engine is Engine.LLAMACPP else ""
    match = _LLAMACPP_IMAGE.search(words[at]) or _VLLM_IMAGE.search(words[at]) or _SGLANG_IMAGE.search(words[at])
    start.image_version = (match.group("tag") if match and _image_engine(words[at]) is engine else "") or ""
    _docker(words[:at], start)
    start.notes.append(f"docker image {one_line(words[at])[:80]}: runs the --entrypoint program, the words after it")
    if engine is Engine.SGLANG and program[first - 1] == "serve":
        _sglang_serve(start)
    return start


def _find_start(words: list[str]) -> _Start:
    entrypoint = _entrypoint_start(words)
    if entrypoint is not None:
        return _finish_start(entrypoint)
    found = _engine_at(words)
    head = unwrap(words, {}, [])[:1]  # the program the line runs, past KEY=VALUE words and wrappers
    tool = head[0].rsplit("/", 1)[-1] if head and head[0].rsplit("/", 1)[-1].startswith("llama-") else ""
    if found is None and tool:  # llama-bench, llama-perplexity, llama-quantize, ...: llama.cpp's, serving nothing
        raise PlanFileError(
            WHERE,
            f"runs {one_line(tool)[:40]}, a llama.cpp tool that serves no model: paste the llama-server (or "
            "llama-cli / llama-completion) line",
        )
    if found is None:
        shown = one_line(" ".join(words[:4]))[:80]
        raise PlanFileError(
            WHERE,
            f"is not a vLLM, SGLang, llama.cpp or Ollama server launch ('{shown}'...): paste the line that starts "
            "the server, `vllm serve MODEL ...`, `python -m vllm.entrypoints.openai.api_server --model ...`, "
            "`python -m sglang.launch_server --model-path ...`, `sglang serve MODEL ...`, "
            "`llama-server -m FILE.gguf ...` or `ollama run MODEL`",
        )
    engine, first = found
    start = _Start(engine, words[first:])
    start.program = gguf.llamacpp_program(words[first - 1]) or "" if engine is Engine.LLAMACPP else ""
    before = words[: first - 1]
    image = words[first - 1] if _image_engine(words[first - 1]) is not None else ""
    if image:
        match = _LLAMACPP_IMAGE.search(image) or _VLLM_IMAGE.search(image) or _SGLANG_IMAGE.search(image)
        start.image_version = (match.group("tag") if match else "") or ""
        _docker(before, start)
        if start.entrypoint:
            start.args = [start.entrypoint, *start.args]
        inner = _engine_at(start.args)
        if inner is not None and engine is Engine.VLLM and not start.entrypoint:
            start.stops = (
                "vLLM would not start: the vllm/vllm-openai image runs `vllm serve` already (its ENTRYPOINT), so the "
                f"words after it run as `vllm serve {one_line(' '.join(start.args[:3]))[:60]} ...`, which vLLM stops "
                "on ('unrecognized arguments'); give only the arguments after the image, or docker's --entrypoint"
            )
        if inner is not None:  # the image's own command given: `... lmsysorg/sglang python3 -m sglang.launch_server`
            start.engine, start.args = inner[0], start.args[inner[1] :]
            start.program = (
                gguf.llamacpp_program(words[first + inner[1] - 1]) or "" if inner[0] is Engine.LLAMACPP else ""
            )
        elif engine is Engine.LLAMACPP:
            start.program, start.args = gguf.image_program(start.image_version, start.args)
        before = []
    skipped = []
    for word in unwrap(before, start.env, start.notes):
        if _ENV_WORD.match(word):
            key, _, value = word.partition("=")
            start.env[key] = value
        elif word not in ("-m", "export") and not _PYTHON.match(word) and word.rsplit("/", 1)[-1] not in _CLIS:
            skipped.append(word)
    if skipped:
        start.notes.append(f"before the command, not read: {one_line(' '.join(skipped))[:120]}")
    if start.engine is Engine.SGLANG and words[first - 1] == "serve":
        _sglang_serve(start)
    return _finish_start(start)


def _finish_start(start: _Start) -> _Start:
    """The GPUs CUDA_VISIBLE_DEVICES leaves the launch."""
    visible = start.env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        start.gpus = visible_gpus(visible) if visible.strip() else 0
    return start


_CLIS: Final = frozenset({"vllm", "sglang"})  # the console scripts of `vllm serve` and `sglang serve`
# Programs that run the command after them, with their options that take a value: POSIX nohup, env, time, nice and the
# shell's exec / command; numactl(8); sudo(8) ("-u user", "-g group", ...). None changes what the engine holds.
# `export` is here for its KEY=VALUE words (`export K=V; vllm serve ...`).
_WRAPPERS: Final = {
    "export": frozenset(),
    "nohup": frozenset(),
    "exec": frozenset(),
    "time": frozenset(),
    "command": frozenset(),
    "nice": frozenset({"-n", "--adjustment"}),
    # numactl(8): CPU and host-memory placement; its options that take a value as a separate word
    "numactl": frozenset({"-C", "-N", "-m", "-p", "-i", "--physcpubind", "--cpunodebind", "--membind", "--preferred"}),
    "env": frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}),
    "sudo": frozenset(
        {
            "-u",
            "--user",
            "-g",
            "--group",
            "-C",
            "--close-from",
            "-D",
            "--chdir",
            "-h",
            "--host",
            "-p",
            "--prompt",
            "-r",
            "--role",
            "-t",
            "--type",
            "-U",
            "--other-user",
            "-T",
            "--command-timeout",
        }
    ),
}


def unwrap(words: list[str], env: dict[str, str], notes: list[str]) -> list[str]:
    """``words`` from the first that is neither ``KEY=VALUE``, a wrapper (nohup, sudo, env, time, ...) nor a
    wrapper's option; the variables set on the way are put in ``env`` (``env -u NAME`` unsets one, ``env -i`` all
    before it), and a note says which wrappers ran it and what sudo does to variables set before it."""
    i, wrappers = 0, []
    while i < len(words):
        word, name = words[i], words[i].rsplit("/", 1)[-1]
        if _ENV_WORD.match(word):
            key, _, value = word.partition("=")
            env[key] = value
            i += 1
            continue
        if name not in _WRAPPERS:
            break
        wrappers.append(name)
        preserve = False
        i += 1
        while i < len(words) and words[i].startswith("-") and name != "export":
            option = words[i]
            if name == "env" and option in ("-i", "--ignore-environment", "-"):
                env.clear()
            preserve = preserve or option == "-E" or option.startswith("--preserve-env")
            if option in _WRAPPERS[name] and i + 1 < len(words):
                if name == "env" and option in ("-u", "--unset"):
                    env.pop(words[i + 1], None)
                i += 1
            i += 1
        if name == "sudo" and not preserve and env:
            notes.append(
                f"{one_line(', '.join(env))[:80]} set before sudo: sudo's env_reset drops a variable unless sudo -E or "
                "sudoers' env_keep keeps it; read as given"
            )
    shown = [w for w in dict.fromkeys(wrappers) if w != "export"]
    if shown:
        notes.append(f"run through {' '.join(shown)}: {NO_EFFECT}")
    return words[i:]


def _sglang_serve(start: _Start) -> None:
    """``sglang serve``'s arguments as it hands them to ``prepare_server_args`` (sglang 0.5.23 wheel,
    sglang/cli/serve.py ``serve``): ``--model-type X`` taken out (the backend, llm or diffusion), a first word that is
    no flag made ``--model-path WORD``."""
    args = start.args
    for i, word in enumerate(args):
        if word == "--model-type" or word.startswith("--model-type="):
            kind = word.partition("=")[2] if "=" in word else (args[i + 1] if i + 1 < len(args) else "")
            start.args = args = args[:i] + args[i + (1 if "=" in word or i + 1 >= len(args) else 2) :]
            start.notes.append(f"sglang serve --model-type {one_line(kind)[:40]}: the backend; the LLM server planned")
            break
    if args and not args[0].startswith("-"):
        start.args = ["--model-path", *args]
        start.serve_model = args[0]


# ---- reading the arguments ----------------------------------------------------------------------------
def _flag_name(engine: Engine, word: str) -> str:
    """The flag as the engine's parser sees it: vLLM turns ``_`` into ``-`` up to the first ``.``."""
    if engine is not Engine.VLLM or not word.startswith("--"):
        return word
    head, dot, tail = word[2:].partition(".")
    return "--" + head.replace("_", "-") + dot + tail


def _resolve(name: str, known: frozenset[str]) -> str | None:
    """``name`` as the engine's parser resolves it: itself, else the one long flag it is a prefix of."""
    if name in known:
        return name
    if name.startswith("--") and len(name) > 3:
        matches = [k for k in known if k.startswith(name)]
        if len(matches) == 1:
            return matches[0]
    return None


@dataclass
class _Args:
    values: dict[str, str] = field(default_factory=dict)  # the flag's canonical name -> its (last) value
    written: dict[str, str] = field(default_factory=dict)  # the flag's canonical name -> its words as written
    switches: set[str] = field(default_factory=set)
    positional: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    abbreviated: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # flags the program refuses to start with (llama.cpp's)


def _parse(engine: Engine, words: list[str], env: gguf.EnvFlags, program: str = "", build: int | None = None) -> _Args:
    if engine is Engine.LLAMACPP:  # the variables' flags first, each shown as its variable; the command's after
        out = gguf.parse_llamacpp(env.words, _Args(), program, build)
        out.written.update({flag: shown for flag, shown in env.shown.items() if flag in out.written})
        return gguf.parse_llamacpp(words, out, program, build)
    switches, valued = (VLLM_SWITCHES, VLLM_VALUED) if engine is Engine.VLLM else (SGLANG_SWITCHES, SGLANG_VALUED)
    known = switches | valued
    out = _Args()
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if not word.startswith("-") or word == "-" or _is_number(word):
            out.positional.append(word)
            continue
        raw_name, eq, value = word.partition("=")
        if engine is Engine.VLLM and raw_name.startswith("-O") and raw_name != "-O" and not raw_name.startswith("--"):
            raw_name, eq, value = "-O", "=", raw_name[2:].lstrip("=")  # -O3: FlexibleArgumentParser's spelling
        name = _flag_name(engine, raw_name)
        base = name.partition(".")[0] if engine is Engine.VLLM else name  # --compilation-config.level 3
        flag = _resolve(base, known)
        if flag is None:
            if not eq and i < len(words) and not words[i].startswith("-"):
                value, i = words[i], i + 1  # taken as its value (shown with it)
                out.unknown.append(f"{raw_name} {value}")
            else:
                out.unknown.append(word)
            continue
        if flag != base:
            out.abbreviated.append(f"{raw_name} read as {flag} (argparse takes a unique prefix)")
        if flag in switches and flag not in valued:
            if eq:
                out.unknown.append(f"{word} (a switch takes no value)")
            else:
                out.switches.add(flag)
                out.written[flag] = raw_name
            continue
        if not eq:
            if i >= len(words) or (words[i].startswith("-") and not _is_number(words[i])):
                out.unknown.append(f"{raw_name} (no value given)")
                continue
            value, i = words[i], i + 1
        key = flag if base == name else name  # a dotted JSON key keeps its path
        if key in out.values:  # argparse keeps the last; the one before is said, not dropped
            out.abbreviated.append(f"{out.written[key]} given again: {raw_name} {value} taken (the last wins)")
        out.values[key] = value
        out.written[key] = f"{raw_name} {value}"
    return out


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


class _Reader:
    """Turns one engine's parsed arguments into plan fields and the lists of what was not used."""

    def __init__(self, engine: Engine, args: _Args) -> None:
        self.engine = engine
        self.args = args
        self.fields: dict[str, Any] = {}
        self.read: list[FlagNote] = []
        self.unexpressed: list[FlagNote] = []
        self.ignored: list[FlagNote] = []  # words with no effect found by the reader itself (Ollama's)
        self.unknown: list[str] = list(args.unknown)
        self.used: set[str] = set()

    def value(self, *flags: str) -> str | None:
        """The value of the first of ``flags`` given (its aliases: the later spelling wins, as argparse's last)."""
        given = [f for f in self.args.values if f in flags]
        if not given:
            return None
        self.used.update(given)
        return self.args.values[given[-1]]

    def switch(self, *flags: str) -> bool:
        on = [f for f in flags if f in self.args.switches]
        self.used.update(on)
        return bool(on)

    def set(self, path: str, value: Any, flags: tuple[str, ...]) -> None:
        self.fields[path] = value
        words = [self.args.written[f] for f in flags if f in self.args.written]
        if words:
            self.read.append(FlagNote(" ".join(words), shown_setting(path, value), path))

    def number(self, path: str, flags: tuple[str, ...], parse: Callable[[str], Any], default: Any) -> None:
        text = self.value(*flags)
        if text is None:
            self.fields[path] = default
            return
        try:
            self.set(path, parse(text), flags)
        except (ValueError, OverflowError):
            self.unknown.append(f"{self.args.written.get(flags[0], text)} (not a number the engine takes)")
            self.fields[path] = default

    def cannot(self, flag: str, why: str) -> None:
        self.unexpressed.append(FlagNote(self.args.written.get(flag, flag), why))

    def cannot_words(self, words: str, why: str) -> None:
        self.unexpressed.append(FlagNote(words, why))


def shown_setting(path: str, value: Any) -> str:
    """``Context = 32,768``: a plan field as the Serving form labels it and shows its value (core.inputs)."""
    spec = BY_PATH[path]
    if spec.labels is not None and value in spec.labels:
        shown = spec.labels[value]
    elif isinstance(value, bool):
        shown = "yes" if value else "no"
    elif isinstance(value, int) and spec.unit.endswith("s") and spec.unit.isalpha() and len(spec.unit) > 2:
        shown = counted(value, spec.unit[:-1], spec.unit)  # "1 request", "2 requests"; units such as "s" stay
    elif isinstance(value, int):
        shown = f"{value:,}" + (f" {spec.unit}" if spec.unit else "")
    elif isinstance(value, float):  # in the form's unit: 0.9 of the GPU is 90 %
        shown = f"{value * spec.scale:g}" + (f" {spec.unit}" if spec.unit else "")
    else:
        shown = str(value)
    return f"{spec.label} = {shown}"


def human_int(text: str) -> int:
    """vLLM's ``human_readable_int`` (vllm/engine/arg_utils.py 0.19.0): 32k = 32,000, 32K = 32,768, 25.6k = 25,600;
    -1 and auto mean the model's own length (``human_readable_int_or_auto``), returned as 0."""
    text = text.strip()
    if text == "-1" or text.lower() == "auto":
        return 0
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", text)
    if match is None:
        return int(text)
    number, suffix = match.groups()
    if suffix.islower():
        return int(float(number) * 10 ** (3 * "kmgt".index(suffix) + 3))
    return int(number) << (10 * "KMGT".index(suffix) + 10)


# vLLM ModelConfig.dtype (0.19.0 vllm/config/model.py _STR_DTYPE_TO_TORCH_DTYPE) and SGLang's --dtype choices: the
# spellings of the three 16/32-bit types; "auto" is the checkpoint's own.
_DTYPE_WORDS: Final = {
    "bfloat16": WeightFormat.BF16,
    "float16": WeightFormat.FP16,
    "half": WeightFormat.FP16,
    "float32": WeightFormat.FP32,
    "float": WeightFormat.FP32,
}
_KV_OF: Final = {WeightFormat.BF16: KvDtype.BF16, WeightFormat.FP16: KvDtype.FP16, WeightFormat.FP32: KvDtype.FP32}
# Quantization names read as the plan's formats beside the exports' own (vl.QUANTIZATION, sg.QUANTIZATION): vLLM
# turns an AWQ checkpoint into awq_marlin on a card that runs Marlin (awq_marlin.py AWQMarlinConfig.get_name), the
# same weights.
_MORE_QUANT: Final = {"awq_marlin": WeightFormat.AWQ_INT4}


def _weights(
    reader: _Reader,
    quantization: Mapping[WeightFormat, str],
    fp8_kv: Callable[[str], bool],
    kv_names: Mapping[KvDtype, str],
    kv_why_not: Mapping[str, str] | None = None,
) -> None:
    dtype_text = reader.value("--dtype")
    flags: tuple[str, ...] = ("--dtype",)
    dtype: WeightFormat | None = None
    if dtype_text is not None and dtype_text != "auto":
        dtype = _DTYPE_WORDS.get(dtype_text)
        if dtype is None:
            reader.unknown.append(f"--dtype {dtype_text} (not one of auto, bfloat16, float16, half, float32, float)")
    fmt = dtype
    quant = reader.value("--quantization", "-q")
    if quant is not None:
        names: dict[str, WeightFormat] = {**{v: k for k, v in quantization.items()}, **_MORE_QUANT}
        named = names.get(quant)
        if named is None:
            reader.cannot(
                "--quantization" if "--quantization" in reader.args.values else "-q",
                f"{quant} is not a weight format the plan has (it has "
                f"{', '.join(sorted(quantization.values()))}): the 16-bit weights are planned",
            )
        else:
            fmt = named
            flags = ("--dtype", "--quantization", "-q")
    kv_text = reader.value("--kv-cache-dtype")
    kv: KvDtype | None = None
    if kv_text is not None and kv_text != "auto":
        kv_of = {v: k for k, v in kv_names.items()}
        if kv_text in kv_of:  # the export's own name (vLLM's int8 / int4 / fp8_per_token_head)
            kv = kv_of[kv_text]
        elif fp8_kv(kv_text):
            kv = KvDtype.FP8
        elif kv_why_not and kv_text in kv_why_not:
            reader.cannot("--kv-cache-dtype", f"{kv_text}: {kv_why_not[kv_text]}")
        else:
            kept = ["the model's dtype", "fp8", *kv_names.values()]
            words = f"{', '.join(kept[:-1])} or {kept[-1]}"
            reader.cannot("--kv-cache-dtype", f"{kv_text}: the plan's KV cache is {words}")
    reader.set("inference.weight_dtype", fmt or WeightFormat.BF16, flags)
    compute = dtype or WeightFormat.BF16
    reader.set("inference.kv_dtype", kv or _KV_OF[compute], ("--kv-cache-dtype",) if kv else ())
    reader.fields["_dtype_given"] = dtype is not None


def _context_and_layout(
    reader: _Reader, context_flag: str, parse: Callable[[str], int], splits: tuple[tuple[str, ...], tuple[str, ...]]
) -> None:
    """The context (0, vLLM's auto: left to the engine, the model's own length) and the TP and PP sizes."""
    context = reader.value(context_flag)
    if context is not None:
        try:
            length = parse(context)
            if length:
                reader.set("inference.context", length, (context_flag,))
        except ValueError:
            reader.unknown.append(f"{context_flag} {context} (not a length the engine takes)")
    reader.number("inference.tensor_parallel", splits[0], int, 1)
    reader.number("inference.pipeline_parallel", splits[1], int, 1)


# vllm 0.19.0 wheel: make_arg_parser (entrypoints/openai/cli_args.py) gives every entry point a positional model_tag
# (nargs="?"), but only `vllm serve` copies it to --model (entrypoints/cli/serve.py ServeSubcommand.cmd); the
# api_server module's __main__ hands the parsed args to run_server as they are, so its model is --model, whose default
# is ModelConfig.model = "Qwen/Qwen3-0.6B" (config/model.py).
API_MODEL_TAG: Final = (
    "the api_server entry point reads the model only from --model; its positional model_tag is never read"
)
VLLM_DEFAULT_MODEL: Final = "Qwen/Qwen3-0.6B"


def _vllm(args: _Args, entry: str = "serve") -> tuple[_Reader, str]:
    reader = _Reader(Engine.VLLM, args)
    model = reader.value("--model") or ""
    positional = list(args.positional)
    if positional and entry == "api":
        served = "" if model else f": with no --model vLLM serves its default, {VLLM_DEFAULT_MODEL}"
        reader.unknown.append(f"{positional.pop(0)} ({API_MODEL_TAG}{served})")
        if model:
            reader.read.append(FlagNote(args.written["--model"], "the model"))
    elif positional:  # vllm serve's positional model_tag wins over --model (vllm/entrypoints/cli/serve.py)
        if model:
            reader.cannot_words(args.written["--model"], "vllm serve takes the positional model instead")
        model = positional.pop(0)
        reader.read.append(FlagNote(model, "the model"))
    elif model:
        reader.read.append(FlagNote(args.written["--model"], "the model"))
    reader.unknown += [f"{p}{_NO_FLAG}" for p in positional]
    _weights(reader, vl.QUANTIZATION, lambda v: v in vl.PLAIN_FP8_KV, VLLM_KV_NAMES, vl.KV_NOT_PLANNED)
    _context_and_layout(
        reader, "--max-model-len", human_int, (("--tensor-parallel-size", "-tp"), ("--pipeline-parallel-size", "-pp"))
    )
    reader.number("inference.replicas", ("--data-parallel-size", "-dp"), int, 1)
    reader.number("inference.gpu_memory_utilization", ("--gpu-memory-utilization",), float, 0.0)
    reader.number("inference.max_num_seqs", ("--max-num-seqs",), int, 0)
    reader.number("inference.max_num_batched_tokens", ("--max-num-batched-tokens",), human_int, 0)
    limits = reader.value("--limit-mm-per-prompt")
    reader.set("inference.text_only", vl.text_only_limits(limits or ""), ("--limit-mm-per-prompt",) if limits else ())
    eager = reader.switch(vl.ENFORCE_EAGER)
    reader.switch("--no-enforce-eager")
    reader.set("inference.cuda_graphs", not eager, (vl.ENFORCE_EAGER,) if eager else ())
    caching = PrefixCaching.DEFAULT
    for setting, flag in vl.PREFIX_CACHING_FLAGS.items():
        if reader.switch(flag):
            caching = setting
    reader.set("inference.prefix_caching", caching, tuple(vl.PREFIX_CACHING_FLAGS.values()))
    reader.fields["inference.engine"] = Engine.VLLM
    return reader, model


def _sglang(args: _Args) -> tuple[_Reader, str]:
    reader = _Reader(Engine.SGLANG, args)
    model = reader.value("--model-path", "--model") or ""
    reader.read += [FlagNote(args.written[f], "the model") for f in ("--model", "--model-path") if f in args.written]
    reader.unknown += [f"{p}{_NO_FLAG}" for p in args.positional]
    _weights(reader, sg.QUANTIZATION, lambda v: v.startswith("fp8"), {})
    _context_and_layout(
        reader,
        "--context-length",
        int,
        (("--tp-size", "--tensor-parallel-size"), ("--pp-size", "--pipeline-parallel-size")),
    )
    dp = ("--dp-size", "--data-parallel-size")
    if "--enable-dp-attention" in args.switches and any(f in args.values for f in dp):
        # sglang 0.4.6 server_args.py 290-295: with DP attention 1 < dp-size <= tp-size, tp-size % dp-size == 0; the
        # attention's data-parallel ranks are the TP group's GPUs ("data parallelism for attention and tensor
        # parallelism for FFN"): no replica more
        reader.value(*dp)
        reader.fields["inference.replicas"] = 1
        for flag in (f for f in dp if f in args.values):
            reader.cannot(
                flag,
                "with --enable-dp-attention the attention's data parallel ranks split inside the "
                "tensor-parallel group (tp-size GPUs in all): no replicas; DP attention is not modelled",
            )
    else:
        reader.number("inference.replicas", dp, int, 1)
    reader.number("inference.mem_fraction_static", ("--mem-fraction-static",), float, 0.0)
    graphs_off = reader.switch(sg.DISABLE_CUDA_GRAPH)
    reader.set("inference.cuda_graphs", not graphs_off, (sg.DISABLE_CUDA_GRAPH,) if graphs_off else ())
    multimodal = reader.switch(sg.ENABLE_MULTIMODAL)
    reader.set("inference.sglang_enable_multimodal", multimodal, (sg.ENABLE_MULTIMODAL,) if multimodal else ())
    reader.fields["inference.engine"] = Engine.SGLANG
    return reader, model


def _version_fields(text: str, start: _Start, engine: Engine) -> tuple[dict[str, Any], list[str]]:
    """The release a docker image's tag or an export's header names (SGLang's pip line, vLLM's first), where the
    plan has its line."""
    found: dict[str, Any] = {}
    notes: list[str] = []
    tag = start.image_version.removeprefix("v")
    if engine is Engine.VLLM and not tag:  # an export's own header names its line
        header = next((line for line in text.splitlines() if line.startswith(f"# {vl.FLAGS_MARK}")), "")
        tag = header.removeprefix(f"# {vl.FLAGS_MARK}").removesuffix(")")
    if engine is Engine.LLAMACPP:
        build, why = _llamacpp_build(text, start)
        if build is not None:
            found["inference.llamacpp_build"] = build
        notes += [why] if why else []
        return found, notes
    if engine is Engine.SGLANG:
        tag = _sglang_tag(text, start)
        release = re.match(r"\d+\.\d+\.\d+", tag)
        if release and release.group(0) in {v.value for v in SglangVersion}:
            found["inference.sglang_version"] = SglangVersion(release.group(0))
        elif tag:
            notes.append(f"SGLang {one_line(tag)[:40]}: not a release the planner has rules for; the plan's is kept")
    elif tag:
        line = re.match(r"\d+\.\d+", tag)
        if line and line.group(0) in {v.value for v in VllmVersion}:
            found["inference.vllm_version"] = VllmVersion(line.group(0))
        else:
            notes.append(f"vLLM {one_line(tag)[:40]}: not a release line the planner has rules for; the plan's is kept")
    return found, notes


def _sglang_tag(text: str, start: _Start) -> str:
    """The SGLang version an export's ``# pip install sglang==X`` header names, else the image's tag (no ``v``)."""
    header = next((line for line in text.splitlines() if line.startswith(f"# {sg.PIP_MARK}")), "")
    tag = start.image_version.removeprefix("v")
    return header.removeprefix(f"# {sg.PIP_MARK}").split()[0] if header.split() else tag


# llama.cpp's --version output (common/arg.cpp's --version: fprintf(stderr, "version: %d (%s)\n", LLAMA_BUILD_NUMBER,
# LLAMA_COMMIT), "version: 4589 (eb7cf15a)".
_LLAMACPP_VERSION_LINE: Final = re.compile(r"^\s*version: (\d+) \(\w+\)\s*$", re.MULTILINE)


def _llamacpp_build(text: str, start: _Start) -> tuple[int | None, str]:
    """The llama.cpp build the text names, an image tag's ``bN`` or a pasted ``--version`` line's number, and a note
    where a tag names none."""
    tag = start.image_version.removeprefix("v")
    build = re.search(r"(?:^|-)b(\d+)$", tag)
    if build and 0 < int(build.group(1)) <= MAX_LLAMACPP_BUILD:
        return int(build.group(1)), ""
    printed = _LLAMACPP_VERSION_LINE.search(text)
    if printed and 0 < int(printed.group(1)) <= MAX_LLAMACPP_BUILD:
        return int(printed.group(1)), f"build {printed.group(1)}: the pasted --version output's"
    if tag:
        return None, f"llama.cpp image {one_line(tag)[:40]}: names no build (bN); the plan's build is kept"
    return None, ""


# Environment variables a launch line sets in front that no engine reads for what it holds or how fast it runs, by
# what they do: each is listed as ignored with its group's words. CUDA_VISIBLE_DEVICES is read (the GPUs visible).
_ENV_NO_EFFECT: Final = {
    "where models are downloaded and cached": """HF_HOME HF_HUB_CACHE HUGGINGFACE_HUB_CACHE TRANSFORMERS_CACHE
        HF_DATASETS_CACHE HF_HUB_OFFLINE TRANSFORMERS_OFFLINE HF_HUB_ENABLE_HF_TRANSFER HF_HUB_DOWNLOAD_TIMEOUT
        HF_ENDPOINT XDG_CACHE_HOME VLLM_CONFIG_ROOT VLLM_USE_MODELSCOPE LLAMA_CACHE""",
    # LLAMA_CACHE: llama.cpp common/common.cpp fs_get_cache_directory, where -hf downloads go
    "a token or key": "HF_TOKEN HUGGING_FACE_HUB_TOKEN VLLM_API_KEY",
    "the shell's and Python's own": """PATH HOME USER SHELL PWD LANG LC_ALL TERM TZ TMPDIR PYTHONPATH PYTHONUNBUFFERED
        PYTHONWARNINGS PYTHONDONTWRITEBYTECODE UV_TORCH_BACKEND""",
    "logs and usage statistics": """VLLM_LOGGING_LEVEL VLLM_CONFIGURE_LOGGING VLLM_NO_USAGE_STATS VLLM_DO_NOT_TRACK
        DO_NOT_TRACK NCCL_DEBUG NCCL_DEBUG_SUBSYS TORCH_CPP_LOG_LEVEL""",
    "the server's address": "VLLM_HOST VLLM_PORT",
    "CPU threads; the work on the GPU is the plan's": "OMP_NUM_THREADS MKL_NUM_THREADS TOKENIZERS_PARALLELISM",
    "the order the GPUs are numbered in": "CUDA_DEVICE_ORDER",
}
ENV_IGNORED: Final = {name: f"{why}: {NO_EFFECT}" for why, names in _ENV_NO_EFFECT.items() for name in names.split()}
# Variables that change memory or speed but the plan has no setting for, with why (the rest of their engine's
# prefixes: NOT_MODELLED). vLLM 0.19.0 vllm/envs.py; NCCL's environment (docs.nvidia.com NCCL "Environment Variables").
_ENV_WHY: Final = {
    "VLLM_USE_V1": "the engine (V0 or V1) follows the plan's vLLM release line, not this variable",
    "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "whether vLLM sets CUDA-graph memory aside before the KV cache: the "
    "plan follows the release line's default (core.serving.vllm_versions)",
    # vllm/envs.py VLLM_CACHE_ROOT (~/.cache/vllm): where the compile cache is kept (vllm/compilation/backends.py
    # VllmBackend.__call__, torch_compile_cache/ under it); whether a start finds it warm is the folder's lot
    "VLLM_CACHE_ROOT": "where vLLM keeps its compile cache: a start finds it warm or cold by whether that folder "
    "outlived the last start, which the plan's compile cache setting (--compile-cache) says",
    # vllm/envs.py reads it to 0.14.1 and not from 0.15.1 (the wheels' envs.py), where validate_environ warns
    # "Unknown vLLM environment variable detected" (0.20.2): the per-token-head caches (0.20 on) never meet it
    "VLLM_ATTENTION_BACKEND": "the attention backend to vLLM 0.14; from 0.15 vLLM ignores it ('Unknown vLLM "
    "environment variable detected: VLLM_ATTENTION_BACKEND') and --attention-backend names the backend",
    "NCCL_NVLS_ENABLE": "NCCL's NVLS buffers on NVSwitch cards: the plan's multi-GPU reserve is the one measured with "
    "NCCL's default (core.serving.fit)",
    "NCCL_BUFFSIZE": "NCCL's buffer per channel: the plan's multi-GPU reserve is the one measured with NCCL's default "
    "(core.serving.fit)",
}
# Each variable's engine: read by it alone.
_ENV_OWNER: Final = (("VLLM_", Engine.VLLM), ("SGLANG_", Engine.SGLANG), ("GGML_", Engine.LLAMACPP))
# core.inputs VllmSampler; vllm 0.19.0 vllm/envs.py reads VLLM_USE_FLASHINFER_SAMPLER as bool(int(value)).
_FLASHINFER_SAMPLER: Final = "VLLM_USE_FLASHINFER_SAMPLER"
# vLLM reads it only under WSL2 (vllm-project/vllm PR 41496, vllm/platforms/cuda.py is_pin_memory_available: pinned
# memory "supported but disabled by default" there, "Set to 1 when pinned memory or UVA is required"): a line that
# sets it is written for WSL2, the plan's platform (core.platform_rules).
_WSL2_PIN_MEMORY: Final = "VLLM_WSL2_ENABLE_PIN_MEMORY"


def _environment(start: _Start, reader: _Reader, stopped: list[str]) -> None:
    """The variables set in front of the command: read into the plan where it has the setting, else listed
    (ignored, not expressed or not understood); a value that stops the engine is put in ``stopped``."""
    from core.allocator import ENV_NAME, parse_alloc_conf
    from core.inputs import CompileCache, VllmSampler

    label = ENGINE_LABELS[reader.engine]
    for key, value in start.env.items():
        shown = f"{key}={one_line(value)[:60]}"
        owner = next((engine for prefix, engine in _ENV_OWNER if key.startswith(prefix)), None)
        if key == "CUDA_VISIBLE_DEVICES":
            continue
        if key in ENV_IGNORED:
            reader.ignored.append(FlagNote(shown, ENV_IGNORED[key]))
        elif owner is not None and owner is not reader.engine:
            reader.ignored.append(FlagNote(shown, f"{ENGINE_LABELS[owner]}'s variable, which {label} does not read"))
        elif key in (sg.LONGER_CONTEXT_ENV, VLLM_LONG_ENV):
            # vllm 0.19.0 vllm/envs.py: "1" or "true" (stripped, any case); sglang 0.5.23 srt/environ.py EnvBool: also
            # "yes" and "y"
            truths = ("1", "true") if key == VLLM_LONG_ENV else ("1", "true", "yes", "y")
            allowed = value.strip().lower() in truths
            reader.fields["inference.long_context"] = allowed
            reader.read.append(
                FlagNote(shown, shown_setting("inference.long_context", allowed), "inference.long_context")
            )
        elif key == _WSL2_PIN_MEMORY:
            from core.inputs import Platform

            reader.fields["hardware.platform"] = Platform.WSL2
            setting = shown_setting("hardware.platform", Platform.WSL2)
            reader.read.append(FlagNote(shown, f"{setting} (vLLM reads it under WSL2 alone)", "hardware.platform"))
        elif key in (_FLASHINFER_SAMPLER, vl.DISABLE_COMPILE_CACHE):
            try:
                on = bool(int(value))
            except ValueError:
                reader.unknown.append(f"{shown} (vLLM reads it as bool(int(value)): not an integer)")
                continue
            name, setting = (
                ("inference.vllm_sampler", VllmSampler.FLASHINFER if on else VllmSampler.NATIVE)
                if key == _FLASHINFER_SAMPLER
                else ("inference.compile_cache", CompileCache.COLD if on else CompileCache.WARM)
            )
            reader.fields[name] = setting
            reader.read.append(FlagNote(shown, shown_setting(name, setting), name))
        elif key == ENV_NAME and reader.engine is Engine.LLAMACPP:
            reader.ignored.append(FlagNote(shown, f"PyTorch's allocator: llama.cpp does not run PyTorch: {NO_EFFECT}"))
        elif key == ENV_NAME:
            try:
                parse_alloc_conf(value)
            except PlanError as exc:
                reader.unknown.append(f"{shown} ({one_line(exc.reason or exc.allowed)[:120]})")
                stopped.append(f"PyTorch refuses {ENV_NAME}={one_line(value)[:60]}: {label} would not start")
                continue
            reader.fields["hardware.alloc_conf"] = value
            setting = shown_setting(
                "hardware.alloc_conf", value
            )  # core.inputs: training_only, no serving rule reads it
            reader.read.append(FlagNote(shown, f"{setting} (the training estimate's)", "hardware.alloc_conf"))
        elif key in _ENV_WHY:
            reader.unexpressed.append(FlagNote(shown, _ENV_WHY[key]))
        elif key.startswith(("VLLM_", "SGLANG_", "PYTORCH_", "NCCL_", "TORCH_", "GGML_")):
            reader.unexpressed.append(FlagNote(shown, NOT_MODELLED))
        else:
            reader.unknown.append(shown)


ConfigLoader = Callable[[str], bytes]  # a --config path as written -> the file's bytes (PlanFileError if not read)
CONFIG_SUFFIXES: Final = (".yaml", ".yml")


def config_words(
    raw: bytes, where: str, engine: Engine = Engine.VLLM, refused: list[str] | None = None, model_slot: str = ""
) -> tuple[list[str], list[str]]:
    """A ``--config`` YAML as the flags it stands for, and notes. vLLM's as ``FlexibleArgumentParser.load_config_file``
    turns it into them (vllm 0.19.0 wheel, vllm/utils/argparse_utils.py: ``key: value`` -> ``--key value``, ``true``
    -> ``--key``, ``false`` -> nothing (``--no-key`` came after the 0.19 line, vllm-project/vllm PR #51573, and even
    then not for ``vllm serve``, whose root parser has no ``--no-`` options: issue #51401, PR #58102), a list -> its
    items after ``--key`` (here one word), a mapping -> its JSON); SGLang's as
    ``ConfigArgumentMerger._convert_config_to_args`` (sglang 0.5.23 wheel,
    sglang/srt/utils/server_args_config_parser.py: a store_true flag's ``true`` -> ``--key``,
    its ``false`` -> nothing, any other bool -> ``--key true|false``, a list -> ``--key`` and one word per item, a
    mapping -> its JSON). The file is plain data only (PyYAML's safe loader through
    core.files.runconfig.reading.parse_text: sizes, nesting and entries capped, aliases counted as used); one that
    is not a mapping, not text or too large is one PlanFileError line. A key the engine would not start with (no flag
    of it: argparse's "unrecognized arguments"; SGLang: one ``ConfigArgumentMerger`` refuses; vLLM: a value given to
    a switch, left over) is left out of the words and put in ``refused``, with why. ``model_slot``: "serve" where
    ``vllm serve``'s positional model is not on the command line (the first word left over fills it), "api" for the
    api_server entry point's (make_arg_parser's ``model_tag``, which only ``vllm serve`` reads)."""
    from core.files.runconfig.reading import parse_text

    label = ENGINE_LABELS[engine]
    try:
        document = parse_text(raw, where, ".yaml")
    except PlanFileError as exc:  # the training configs' reader's words, said of this file
        raise PlanFileError(exc.path, exc.reason.replace("a training config", f"a {label} config")) from None
    words: list[str] = []
    notes: list[str] = []
    left_out = 0
    slot = [model_slot]  # vLLM: who takes the first word no option reads (make_arg_parser's positional model_tag)
    for key, value in document.items():
        flag = "--" + key
        if engine is Engine.SGLANG:
            why = _sglang_refuses(str(key), where)
        else:
            why = "" if value is False else _vllm_refuses(str(key), value, where, slot, notes)
        if why.startswith("-"):  # a switch given a value: argparse sets the switch, the value is left over
            words.append(flag)
            why = why[1:]
            if not why:
                continue
        if why:
            left_out += len(flag) + len(str(value))  # still counted against the size cap below
            if refused is not None:
                shown = json.dumps(value) if isinstance(value, bool) else one_line(str(value))[:60]
                refused.append(f"{key}: {shown} ({why})")
            continue
        if isinstance(value, bool) and engine is Engine.SGLANG:
            switch = _flag_name(Engine.SGLANG, "--" + key.replace("_", "-"))
            if switch not in SGLANG_SWITCHES or switch in SGLANG_VALUED:
                words += [flag, str(value).lower()]
            elif value:
                words.append(flag)
            else:
                notes.append(f"{where}: {key}: false, which SGLang passes as nothing (the default)")
        elif isinstance(value, bool):
            if value:
                words.append(flag)
            else:
                notes.append(f"{where}: {key}: false, which vLLM passes as nothing (the default)")
        elif isinstance(value, list):
            if value and engine is Engine.SGLANG:
                words += [flag, *(str(v) for v in value)]
            elif value:
                words += [flag, " ".join(str(v) for v in value)]
        elif isinstance(value, dict):
            words += [flag, json.dumps(value)]
        else:
            words += [flag, str(value)]
    if sum(len(w) for w in words) + left_out > MAX_COMMAND_CHARS:
        raise PlanFileError(
            where, f"holds more than {MAX_COMMAND_CHARS:,} characters of options; a {label} config a few"
        )
    return words, notes


def _vllm_refuses(key: str, value: object, where: str, slot: list[str], notes: list[str]) -> str:
    """Why vLLM 0.19.0 would not start with ``key: value`` in its --config file ("" when it takes it; after a "-"
    where the key is a switch given a value, which argparse sets, leaving the value over). Its words reach argparse
    as written less ``_`` (FlexibleArgumentParser.parse_args); a word no option reads fills the positional model where
    it is free (``slot``, used up), else argparse stops on it."""
    name = _flag_name(Engine.VLLM, "--" + key)
    known = _resolve(name.partition(".")[0], VLLM_SWITCHES | VLLM_VALUED)
    left = (
        json.dumps(value)
        if isinstance(value, dict)
        else " ".join(map(str, value))
        if isinstance(value, list)
        else str(value)
    )
    if known is None:
        if not isinstance(value, bool) and slot[0]:
            slot[0] = ""  # its value is a word no option reads: the positional takes it
        return f"a key of {where} that is no vLLM option: vLLM stops, 'unrecognized arguments: {name}'"
    if known not in VLLM_SWITCHES or known in VLLM_VALUED or isinstance(value, bool):
        return ""
    shown = one_line(left)[:60]
    if slot[0] == "api":
        slot[0] = ""
        notes.append(
            f"{where}: {key}: {shown}: {known} takes no value; api_server's positional model_tag takes {shown}, unread"
        )
        return "-"
    if slot[0] == "serve":
        slot[0] = ""
        return (
            f"-{known} takes no value: vllm serve takes {shown} as the model to serve (its positional), not the file's"
        )
    return f"-{known} takes no value: vLLM stops, 'unrecognized arguments: {shown}'"


def _sglang_refuses(key: str, where: str) -> str:
    """Why SGLang 0.5.23 would not start with ``key`` in its --config file ("" when it takes it)."""
    action = SGLANG_CONFIG_REFUSED.get(key.replace("-", "_"))
    if action is not None:
        return f"SGLang refuses it in {where}: 'Unsupported config option' ({action}); give it on the command line"
    if _resolve("--" + key, SGLANG_SWITCHES | SGLANG_VALUED) is None:
        return f"a key of {where} that is no SGLang option: SGLang stops, 'unrecognized arguments: --{key}'"
    return ""


def _with_config(
    args: list[str],
    load: ConfigLoader | None,
    notes: list[str],
    engine: Engine,
    refused: list[str] | None = None,
    entry: str = "serve",
    stops: list[str] | None = None,
) -> tuple[list[str], str]:
    """The engine's arguments with the ``--config`` file's options put where the engine puts them, and the words
    ``--config FILE`` as written ("" when none). Both read the file for ``--config FILE`` as two words only
    (``"--config" in args``; ``--config=FILE`` is the option's own value, the file unread), one file only. vLLM 0.19.0
    (``FlexibleArgumentParser._pull_args_from_config``): after the model, before the rest; ``vllm serve`` (``entry``
    "serve"; "api" for the api_server entry point) with no model on the command line nor a ``model`` key stops
    (put in ``stops``). SGLang 0.5.23 (``prepare_server_args``, ``ConfigArgumentMerger.merge_config_with_args``):
    before every word of the command. Either way the command line's own flags win (argparse keeps the last)."""
    sglang = engine is Engine.SGLANG
    label = ENGINE_LABELS[engine]
    found = [i for i, w in enumerate(args) if w == "--config"]
    if any(w.startswith("--config=") for w in args):
        where = "prepare_server_args" if sglang else "FlexibleArgumentParser.parse_args"
        notes.append(f"--config=FILE: {label} reads the file only for --config FILE, two words ({where})")
    if not found or load is None:
        return args, ""
    if len(found) > 1:  # SGLang's _extract_config_file_path; vLLM's _pull_args_from_config asserts it
        error = "Multiple config files specified" if sglang else "More than one config file specified!"
        raise PlanFileError(WHERE, f'gives --config twice: {label} takes one file ("{error}")')
    at = found[0]
    if at + 1 >= len(args):
        return args, ""
    path, end = args[at + 1], at + 2
    if not path.lower().endswith(CONFIG_SUFFIXES):  # vLLM: "Config file must be of a yaml/yml type"; SGLang alike
        raise PlanFileError(one_line(path)[:200], f"is not a .yaml / .yml file, which {label}'s --config refuses")
    model = 1 if args[:1] and not args[0].startswith("-") and not sglang else 0
    given = model or any(w == "--model" or w.startswith("--model=") for w in args)  # serve moves --model first
    slot = "" if sglang or (given and entry == "serve") or model else entry
    words, said = config_words(load(path), one_line(path)[:200], engine, refused, slot)
    notes += said
    if not sglang and entry == "serve" and not given and "--model" not in words and stops is not None:
        stops.append(
            "vLLM would not start: 'No model specified! Please specify model either as a positional argument or in "
            "a config file.'"
        )
    return [*args[:model], *words, *args[model:at], *args[end:]], f"--config {path}"


def read_command(
    text: str,
    where: str = WHERE,
    load_config: ConfigLoader | None = None,
    vllm_version: VllmVersion | None = None,
    sglang_version: SglangVersion | None = None,
) -> CommandRead:
    """The serving fields of a pasted launch command and what was not used of it; a PlanFileError, one line,
    for a text that is not one. ``load_config`` reads a vLLM ``--config`` file the command names (without it
    the flag is listed as not read). ``vllm_version`` / ``sglang_version``: the release a vLLM / SGLang command's
    flags are checked against where the text names none (an image's tag does): the plan's; None, the default."""
    text = command_text(text, where)
    if gguf.is_ollama(text):
        return _read_ollama(text, where)
    words, notes = _segment(_words(text, where))
    start = _find_start(words)
    config = ""
    refused: list[str] = []  # the --config file's keys the engine would not start with
    stopped: list[str] = [start.stops] if start.stops else []  # the image's entrypoint; vLLM's --config: no model
    entry = "api" if "vllm.entrypoints.openai.api_server" in text else "serve"  # the vllm-openai image: serve
    if start.engine in (Engine.VLLM, Engine.SGLANG):
        start.args, config = _with_config(start.args, load_config, notes, start.engine, refused, entry, stopped)
    llama: gguf.GgufRead | None = None
    build = _llamacpp_build(text, start)[0] if start.engine is Engine.LLAMACPP else None
    env = (
        gguf.env_flags(start.env, start.args, start.program, build)
        if start.engine is Engine.LLAMACPP
        else gguf.EnvFlags()
    )
    args = _parse(start.engine, start.args, env, start.program, build)
    if start.serve_model and args.written.get("--model-path") == f"--model-path {start.serve_model}":
        args.written["--model-path"] = start.serve_model  # shown as written
    if start.engine is Engine.LLAMACPP:
        reader = _Reader(Engine.LLAMACPP, args)
        reader.unknown += env.unknown
        reader.ignored += [FlagNote(shown, why) for shown, why in env.ignored]
        for key in env.used:
            del start.env[key]
        llama = gguf.read_llamacpp(reader, start.program, start.gpus)
        reader.unknown += [f"{p}{_NO_FLAG}" for p in args.positional]
        model = llama.model_ref
        ignored_set, why = gguf.LLAMACPP_IGNORED, gguf.LLAMACPP_WHY
    else:
        reader, model = _vllm(args, entry) if start.engine is Engine.VLLM else _sglang(args)
        reader.unknown += refused
        ignored_set, why = (VLLM_IGNORED, VLLM_WHY) if start.engine is Engine.VLLM else (SGLANG_IGNORED, SGLANG_WHY)
    ignored = _not_used(start.engine, args, reader, ignored_set, why)
    versions, version_notes = _version_fields(text, start, start.engine)
    if start.engine in (Engine.VLLM, Engine.SGLANG):
        _check_release(text, start, versions, (vllm_version, sglang_version), reader, args, stopped)
    _environment(start, reader, stopped)
    fields = dict(reader.fields)
    dtype_given = bool(fields.pop("_dtype_given", True))
    layers_given = not fields.pop("_ngl_default", False)
    fields.update(versions)
    notes += start.notes + version_notes + args.abbreviated
    if llama is not None:
        notes += llama.notes
    if config:
        reader.read.insert(0, FlagNote(config, "its options, read as the flags below (the command's own win)"))
    if start.gpus is not None:
        notes.append(f"GPUs visible: {start.gpus}")
    read = CommandRead(
        engine=start.engine,
        model_ref=model,
        fields=fields,
        read=tuple(reader.read),
        ignored=tuple([*reader.ignored, *ignored]),
        unexpressed=tuple(reader.unexpressed),
        unknown=tuple(reader.unknown),
        notes=tuple(notes),
        context_given="inference.context" in fields,
        dtype_given=dtype_given,
        model_name=llama.model_name if llama is not None else "",
        program=start.program,
        layers_given=layers_given,
        stops=_stops(start, args, refused, stopped),
    )
    return read if start.gpus is None else _with_gpus(read, start.gpus)


def _check_release(
    text: str,
    start: _Start,
    versions: dict[str, Any],
    asked: tuple[VllmVersion | None, SglangVersion | None],
    reader: _Reader,
    args: _Args,
    stopped: list[str],
) -> None:
    """A vLLM or SGLang command's options and values against the release it runs: what that release's argparse
    refuses joins ``stopped``, after what stops before argparse runs (the image's entrypoint, the --config file)."""
    release = _checked_release(start.engine, text, start, versions, asked)
    parsing = len(stopped)
    _release_refuses(start.engine, release, start.args, reader, stopped)
    _value_refusals(release, args, stopped, parsing)
    if start.engine is Engine.VLLM and not stopped:
        _backend_refusal(VllmVersion(release.name.split()[-1]), args, reader, stopped)


# vLLM's per-token-head caches and an explicit --attention-backend (0.13 on; ``auto`` is none: vllm/config/attention.py
# AttentionConfig.validate_backend_before upper-cases the name). With one named, the platform validates that backend
# alone and stops on any reason (0.20.2 - 0.34.0 vllm/platforms/cuda.py and rocm.py get_attn_backend_cls: "Selected
# backend {selected_backend} is not valid for this configuration. Reason: {invalid_reasons}", the enum member printed
# as AttentionBackendEnum.NAME); TRITON_ATTN's supported_kv_cache_dtypes is the only list naming these caches
# (vllm/v1/attention/backends/triton_attn.py; the base class's is auto / float16 / bfloat16), so every other backend
# gives validate_configuration's "kv_cache_dtype not supported" (vllm/v1/attention/backend.py). One exception: on
# 0.20 and 0.21 FLASH_ATTN's supports_kv_cache_dtype takes any name is_quantized_kv_cache covers (``*_per_token_head``
# among them) where FlashAttention 3 runs (a Hopper card: fa_utils.flash_attn_supports_fp8); from 0.22 only fp8 and
# fp8_e4m3 (vllm 0.22.1 flash_attn.py).
TRITON_ATTN: Final = "TRITON_ATTN"
FA_ANY_QUANTISED_LINES: Final = frozenset((VllmVersion.V0_20, VllmVersion.V0_21))


def _backend_refusal(line: VllmVersion, args: _Args, reader: _Reader, stopped: list[str]) -> None:
    """An --attention-backend other than TRITON_ATTN beside a per-token-head --kv-cache-dtype the line takes: vLLM's
    own refusal joins ``stopped`` (FLASH_ATTN on 0.20 / 0.21 said as the card's to decide); TRITON_ATTN is read as
    the backend the plan already runs these caches on."""
    backend, kv = args.values.get("--attention-backend"), args.values.get("--kv-cache-dtype")
    if backend is None or backend.lower() == "auto" or kv not in VLLM_KV_NAMES.values():
        return
    written = args.written.get("--attention-backend", f"--attention-backend {backend}")
    reader.unexpressed = [n for n in reader.unexpressed if n.words != written]
    name = backend.upper()
    if name == TRITON_ATTN:
        reader.read.append(FlagNote(written, f"the backend vLLM keeps {kv} on: the plan's"))
    elif name == "FLASH_ATTN" and line in FA_ANY_QUANTISED_LINES:
        why = (
            f"vLLM {line.value}'s FLASH_ATTN takes {kv} on a Hopper card with FlashAttention 3 and refuses it "
            "elsewhere ('kv_cache_dtype not supported'); the cache's bytes are the same"
        )
        reader.unexpressed.append(FlagNote(written, why))
    else:
        reader.unexpressed.append(FlagNote(written, f"vLLM keeps {kv} on TRITON_ATTN alone"))
        stopped.append(
            f"vLLM {line.value} would not start: 'Selected backend AttentionBackendEnum.{name} is not valid for this "
            "configuration. Reason: ['kv_cache_dtype not supported']'"
        )


def _not_used(
    engine: Engine, args: _Args, reader: _Reader, ignored_set: frozenset[str], why: dict[str, str]
) -> list[FlagNote]:
    """The command's flags the reader did not use, in its word order: those the engine's table says change
    nothing returned as ignored, the rest said to the reader as not modelled (the model's own flag skipped)."""
    ignored: list[FlagNote] = []
    for flag in [f for f in args.written if f in args.switches or f in args.values]:
        if flag in reader.used:
            continue
        base = flag.partition(".")[0] if engine is Engine.VLLM else flag
        if base in ignored_set:
            ignored.append(FlagNote(args.written[flag], NO_EFFECT))
        elif base not in ("--model", "--model-path"):
            reader.cannot(flag, why.get(base, NOT_MODELLED))
    return ignored


@dataclass(frozen=True)
class _Release:
    """The release a pasted command's flags are checked against: its name as said, its parser's option strings
    and the name argparse gives itself in an error."""

    name: str  # "vLLM 0.19", "SGLang 0.4.6.post5"
    flags: frozenset[str]
    prog: str
    # what the release takes for an option whose choices the tables record (engine_flags.vllm_release_values /
    # sglang_release_values), and the releases read, oldest first, with what each takes
    values: Callable[[str], Choices | None] = lambda _option: None
    history: tuple[tuple[str, ...], Callable[[str, str], Choices | None]] = ((), lambda _release, _option: None)


def _release_refuses(engine: Engine, release: _Release, words: list[str], reader: _Reader, stopped: list[str]) -> None:
    """The flags of ``words`` the release's parser has no option for (engine_flags.vllm_release_flags /
    sglang_release_flags: read from that release's wheel), said in ``stopped`` as argparse stops on them, in its own
    words; a word the reader's own tables do not know but the release takes is moved from not understood to not
    expressed."""
    if not release.flags:
        return
    refused: list[str] = []
    ambiguous: list[str] = []
    for word in words:
        if not word.startswith("-") or word == "-" or _is_number(word):
            continue
        name = _flag_name(engine, word.partition("=")[0]).partition(".")[0]
        if engine is Engine.VLLM and name.startswith("-O") and not name.startswith("--"):
            continue  # -O, -O3, -O.x: FlexibleArgumentParser rewrites each into an option its line has (-O to 0.11,
            # --optimization-level / -cc from 0.12: vllm/utils/argparse_utils.py parse_args)
        if _resolve(name, release.flags) is not None:
            continue
        prefixed = [f for f in release.flags if name.startswith("--") and f.startswith(name)]
        (ambiguous if len(prefixed) > 1 else refused).append(name)
    # a word no option takes: vllm serve's one positional (model_tag, nargs="?") holds the model, argparse leaves it;
    # SGLang's parser has no positional at all
    refused += [e.removesuffix(_NO_FLAG) for e in reader.unknown if e.endswith(_NO_FLAG)]
    for entry in list(reader.unknown):
        name = _flag_name(engine, entry.split(" ")[0].partition("=")[0]).partition(".")[0]
        if name.startswith("-") and " (" not in entry and _resolve(name, release.flags) is not None:
            reader.unknown.remove(entry)
            reader.unexpressed.append(
                FlagNote(entry, f"an option of {release.name} the planner does not read: its effect is not modelled")
            )
    label = f"{release.name} would not start: '{release.prog}: error:"
    if refused:
        stopped.append(f"{label} unrecognized arguments: {' '.join(dict.fromkeys(refused))}'")
    elif ambiguous:
        # argparse's _parse_optional: "ambiguous option: %(option)s could match %(matches)s", the matches joined with
        # ", " in the order the parser registered them (sorted here: the tables keep no order)
        matches = ", ".join(sorted(f for f in release.flags if f.startswith(ambiguous[0])))
        stopped.append(f"{label} ambiguous option: {ambiguous[0]} could match {matches}'")


def _checked_release(
    engine: Engine,
    text: str,
    start: _Start,
    fields: dict[str, Any],
    plan: tuple[VllmVersion | None, SglangVersion | None],
) -> _Release:
    """vLLM: the line the image's tag names, else the plan's (``plan``'s first), else the default. SGLang: the wheel an
    image tag or an export's ``pip install sglang==`` names exactly (``v0.4.6.post5``), else every wheel read of
    the release it names, else of the plan's release: a command that names no .postN is refused only what none of
    its release's wheels read takes."""
    if engine is Engine.VLLM:
        line = VllmVersion(fields.get("inference.vllm_version") or plan[0] or BY_PATH["inference.vllm_version"].default)
        lines = [v.value for v in VllmVersion]
        return _Release(
            f"vLLM {line.value}",
            vllm_release_flags(line),
            "vllm serve",
            lambda option: vllm_release_values(line.value, option),
            (tuple(lines), vllm_release_values),
        )
    named = _sglang_tag(text, start)
    exact = re.match(r"\d+\.\d+\.\d+(?:\.post\d+)?", named)
    wheel = exact.group(0) if exact and sglang_release_flags(exact.group(0)) else ""
    release = SglangVersion(
        fields.get("inference.sglang_version") or plan[1] or BY_PATH["inference.sglang_version"].default
    )
    history = (sglang_wheels(), sglang_release_values)
    if wheel:
        return _Release(
            f"SGLang {wheel}",
            sglang_release_flags(wheel),
            sglang_prog(wheel),
            lambda option: sglang_release_values(wheel, option),
            history,
        )
    return _Release(
        f"SGLang {release.value}",
        sglang_release_flags(release, every_patch=True),
        sglang_prog(release.value),
        lambda option: sglang_release_values(release.value, option, every_patch=True),
        history,
    )


# The options whose values the tables record (tools/engine_flags/choices.py), each as argparse names it in an error
# (``_get_action_name``: its option strings joined by "/"; vLLM's ``--quantization`` has ``-q`` too, SGLang's not).
_CHECKED_VALUES: Final = ("--dtype", "--quantization", "-q", "--kv-cache-dtype", "--load-format", "--attention-backend")


def _value_refusals(release: _Release, args: _Args, stopped: list[str], parsing: int) -> None:
    """A value of a checked option that the release does not take, said in ``stopped`` as the engine stops on it:
    argparse's "invalid choice" line (``_check_value``: the value and the choices, each repr'd) put before any
    other argparse line (from index ``parsing`` of ``stopped``), since argparse checks a value as it parses it and
    the unrecognised words after; vLLM 0.9
    on takes any ``--quantization`` name at parse time and stops at start-up (``ModelConfig._verify_quantization``:
    "Unknown quantization method: X. Must be one of [...]"), said after them. Each names the first covered release
    that takes the value."""
    argparse_lines: list[str] = []
    later: list[str] = []
    for flag in _CHECKED_VALUES:
        value = args.values.get(flag)
        option = "--quantization" if flag == "-q" else flag
        choices = release.values(option)
        if value is None or choices is None or choices.takes(value):
            continue
        shown = f"{option}/-q" if option == "--quantization" and "-q" in release.flags else option
        since = _which_release_takes(release, option, value)
        if choices.free:
            later.append(
                f"{release.name} would not start: 'Unknown quantization method: {value}. Must be one of "
                f"{list(choices.names)}.'{since}"
            )
        else:
            listed = ", ".join(repr(c) for c in choices.names)
            argparse_lines.append(
                f"{release.name} would not start: '{release.prog}: error: argument {shown}: invalid choice: "
                f"{value!r} (choose from {listed})'{since}"
            )
    stopped[:] = [*stopped[:parsing], *argparse_lines, *stopped[parsing:], *later]


def _which_release_takes(release: _Release, option: str, value: str) -> str:
    """ "; vLLM 0.10 is the first that takes it" (a later release), "; vLLM 0.27 is the last that takes it" (only
    earlier ones), or that no release read does."""
    engine, current = release.name.split()
    later, earlier = releases_taking(option, value, *release.history, current)
    if later:
        return f"; {engine} {later} is the first that takes it"
    if earlier:
        return f"; {engine} {earlier} is the last that takes it"
    return f"; no {engine} release read takes it"


def _stops(start: _Start, args: _Args, refused: list[str], stopped: list[str]) -> str:
    """One line: why the program would not start with these words, where the reader knows it would not."""
    if stopped:
        return stopped[0]
    if refused:
        keys = ", ".join(r.partition(":")[0] for r in refused)
        label = ENGINE_LABELS[start.engine]
        return f"{label} would not start with its --config file: it refuses the key(s) {keys} (see Not understood)"
    if args.refused:
        names = ", ".join(dict.fromkeys(args.refused))
        return f"{start.program} would not start ('error: invalid argument'): no option of it: {names}"
    return ""


def _read_ollama(text: str, where: str) -> CommandRead:
    """Ollama's shell text (``ollama serve`` / ``run`` / ``create``, its environment, a Modelfile)."""
    reader = _Reader(Engine.LLAMACPP, _Args())

    def words_of(line: str) -> list[str]:
        try:  # a subshell's ( ) and a `bash -c "..."` around it: the command inside
            return inline_shells(shell_words(_subshell(_CONTINUATION.sub(" ", line).strip())))
        except ValueError as exc:
            raise PlanFileError(where, f"cannot be split into words as a shell would: {exc}") from None

    out = gguf.read_ollama_lines(_CONTINUATION.sub(" ", text), reader, words_of)
    return CommandRead(
        engine=Engine.LLAMACPP,
        model_ref=out.model_ref,
        fields=dict(reader.fields),
        read=tuple(reader.read),
        ignored=tuple(reader.ignored),
        unexpressed=tuple(reader.unexpressed),
        unknown=tuple(reader.unknown),
        notes=tuple(out.notes),
        context_given=out.context_given,
        model_name=out.model_name,
        program="ollama",
    )


def _with_gpus(read: CommandRead, visible: int) -> CommandRead:
    """A launch that asks more GPUs (TP x PP x replicas) than CUDA_VISIBLE_DEVICES or docker's --gpus lets it see
    does not start: said so; fewer leaves the rest idle."""
    asked = 1
    for name in ("inference.tensor_parallel", "inference.pipeline_parallel", "inference.replicas"):
        asked *= int(read.fields.get(name, 1))
    if visible == 0:
        llama = read.engine is Engine.LLAMACPP
        where = "llama.cpp runs on the CPU" if llama else f"{read.engine_label} finds no CUDA device and stops"
        note = f"CUDA_VISIBLE_DEVICES hides every GPU: {where}; the plan keeps its card"
        stops = read.stops if llama else note
        return replace(read, notes=(*read.notes, note), stops=read.stops or stops)
    if asked > visible:
        note = f"the launch asks {asked} GPU(s) (TP x PP x replicas) but sees {visible}: the engine would not start"
        return replace(read, notes=(*read.notes, note), stops=read.stops or note)
    elif visible > asked:
        note = f"{visible} GPUs visible, the launch uses {asked} (TP x PP x replicas): the rest stay idle"
    else:
        return read
    return replace(read, notes=(*read.notes, note))


# ---- the plan ------------------------------------------------------------------------------------------
# Checkpoint names that say how the weights are stored (Qwen's -AWQ / -GPTQ-Int4 / -GPTQ-Int8 / -FP8, Unsloth's
# -bnb-4bit): the engine reads the format from the checkpoint's config, so a command without --quantization serves
# them quantised. Read from the name only where the command does not say.
_NAME_FORMATS: Final = (
    (re.compile(r"[-_.](int4[-_.])?awq([-_.]int4)?$", re.I), WeightFormat.AWQ_INT4),  # gemma-3-27b-it-int4-awq
    (re.compile(r"[-_.]gptq[-_.]int4$", re.I), WeightFormat.GPTQ_INT4),
    (re.compile(r"[-_.]gptq[-_.]int8$", re.I), WeightFormat.GPTQ_INT8),
    (re.compile(r"[-_.]fp8(-dynamic)?$", re.I), WeightFormat.FP8),
    (re.compile(r"[-_.]bnb[-_.]4bit$", re.I), WeightFormat.NF4),
)
_OTHER_QUANT: Final = re.compile(r"[-_.](quantized[-_.])?(w8a8|w4a16|w8a16|int4|int8|nvfp4|fp4|gguf)$", re.I)
# A dated re-release, the same shapes: Qwen's -2507 (year, month), DeepSeek's -0324 / -0528 (month, day).
_DATE: Final = re.compile(r"-(2\d{3}|[01]\d[0-3]\d)$")


def _checkpoint_name(ref: str) -> tuple[str, WeightFormat | None, str]:
    """The model's name less the suffixes of a quantised checkpoint or a dated re-release, the format the name
    says, and a word for the quantisation the plan has no format for."""
    name = ref.strip().rstrip("/").rsplit("/", 1)[-1]
    fmt = None
    other = ""
    for pattern, found in _NAME_FORMATS:
        if pattern.search(name):
            name, fmt = pattern.sub("", name), found
            break
    else:
        match = _OTHER_QUANT.search(name)
        if match:
            other, name = match.group(0)[1:], _OTHER_QUANT.sub("", name)
    return _DATE.sub("", name), fmt, other


def _model_for(read: CommandRead, base: Plan, keep_model: bool) -> ModelChoice:
    if keep_model:
        return ModelChoice(base.model, base.model_id, f"{base.model.name}, given beside the command", None)
    if not read.model_ref:
        raise PlanFileError(
            WHERE,
            f"names no model: give {read.engine_label}'s model (vllm serve MODEL, the api_server's --model, "
            "--model-path, llama-server -m FILE.gguf, ollama run MODEL)",
        )
    found = model_choice(read.model_ref, Path.cwd())
    if found is not None and found.spec is not None:
        return found
    # A Hub id is answered by the one rule for names (core.hub_names), the same answer as everywhere else; a file's
    # or an Ollama tag's name (read.model_name) is asked on its own.
    name = read.model_name if not is_hub_id(read.model_ref) else ""
    bare = model_choice(name, Path.cwd()) if name and name != read.model_ref else None
    if bare is not None and bare.spec is not None:
        return bare
    close = (found.candidates if found is not None else ()) or (bare.candidates if bare is not None else ())
    names = {m.id: m.name for m in load_models()}
    nearest = "; ".join(f"{c} ({names.get(c, c)})" for c in close) or "none near it (see `vramplan models`)"
    raise ModelNotFound(
        f"'{one_line(read.model_ref)[:120]}' is not a local model folder, a model in the Hugging Face cache or a "
        f"catalogue model; the closest catalogue models: {nearest} (a catalogue id in the command is taken as its "
        "model)",
        tuple(close),
    )


class ModelNotFound(PlanFileError):
    """The command's model is not found; ``candidates``: the closest catalogue ids, closest first."""

    def __init__(self, reason: str, candidates: tuple[str, ...]) -> None:
        super().__init__(WHERE, reason)
        self.candidates = candidates

    def __reduce__(self) -> tuple[type[ModelNotFound], tuple[str, tuple[str, ...]]]:  # type: ignore[override]
        return (type(self), (self.reason, self.candidates))


def _gguf_fields(read: CommandRead, fields: dict[str, Any], spec: Any, notes: list[str]) -> None:
    """llama.cpp's and Ollama's defaults that depend on the model: the context (-c 0 or none: the model's length
    over the slots), -ngl auto on a mixture of experts (llama.cpp's fit of one is not modelled: every layer), and
    the newest Ollama line that takes the model."""
    slots = int(fields.get("inference.concurrent", 1))
    if not read.context_given and read.program != "ollama":
        fields["inference.context"] = max(1, spec.max_position_embeddings // slots)
        what = "slot(s)" if read.program in ("llama-server", "server") else "sequence(s)"
        notes.append(f"context: the model's own {spec.max_position_embeddings:,} over {slots} {what}")
    if not read.layers_given and spec.num_experts > 1:
        fields["inference.gpu_layers"] = 999
        notes.append("GPU layers: all (-ngl not given; llama.cpp's fit of a mixture of experts is not modelled)")
    if read.program == "ollama":  # the line's default num_ctx when none is given (core.serving.ollama_defaults)
        fields.setdefault("inference.context", min(4096, spec.max_position_embeddings))
    if read.program == "ollama" and "inference.ollama_version" not in fields:
        from core.files.launch.ollama import newest_line

        probe = Plan(model=spec).with_inference(
            engine=Engine.LLAMACPP, gpu_layers=fields.get("inference.gpu_layers", 999)
        )
        fields["inference.ollama_version"] = newest_line(probe)
        notes.append(f"Ollama: the {fields['inference.ollama_version'].value} line (the newest covered that takes it)")


@dataclass(frozen=True)
class CommandPlan:
    plan: Plan
    model: ModelChoice
    notes: tuple[str, ...]  # what the plan took besides the flags: the model's length, the checkpoint's format


def plan_from_command(
    read: CommandRead, base: Plan, *, keep_model: bool = False, model: ModelChoice | None = None
) -> CommandPlan:
    """``base`` served as the command says: its model (``base``'s where ``keep_model``: the command line's --model;
    ``model`` where given: the window's choice), engine and flags; the card and everything the command does not set
    stay ``base``'s. Raises PlanFileError (one line; ModelNotFound with the closest catalogue ids) when the model is
    not found or a value does not fit the plan."""
    choice = model if model is not None and model.spec is not None else _model_for(read, base, keep_model)
    spec = choice.spec
    assert spec is not None
    fields = dict(read.fields)
    notes: list[str] = [f"model: {choice.how}"]
    if read.engine is Engine.LLAMACPP:
        _gguf_fields(read, fields, spec, notes)
    elif not read.context_given:
        fields["inference.context"] = spec.max_position_embeddings
        notes.append(f"context: the model's own {spec.max_position_embeddings:,} ({read.engine_label}'s default)")
    _, name_format, other = _checkpoint_name(read.model_ref)
    if read.engine is Engine.LLAMACPP:
        pass  # the GGUF file's type is the weights' format
    elif not any(n.words.startswith(("--quantization", "-q")) for n in (*read.read, *read.unexpressed)):
        if name_format is not None:
            fields["inference.weight_dtype"] = name_format
            notes.append(f"weights: {name_format.value}, as the checkpoint's name says (the engine reads its config)")
        elif other:
            notes.append(f"weights: the checkpoint's name says {other}, not a format the plan has: 16-bit planned")
    if not read.dtype_given and choice.torch_dtype in ("bf16", "fp16", "fp32"):
        dtype = WeightFormat(choice.torch_dtype)
        if fields.get("inference.weight_dtype") in _KV_OF:
            fields["inference.weight_dtype"] = dtype
        if fields.get("inference.kv_dtype") in _KV_OF.values():
            fields["inference.kv_dtype"] = _KV_OF[dtype]
        notes.append(f"dtype: auto, the checkpoint's {choice.torch_dtype}")
    context = int(fields["inference.context"])
    if base.inference.new_tokens >= context:
        fields["inference.new_tokens"] = max(0, context // 2)
        notes.append(f"generated tokens: {fields['inference.new_tokens']:,}, half the context (the plan's did not fit)")
    try:
        own = {name.partition(".")[2]: v for name, v in fields.items() if name.startswith("inference.")}
        inference = replace(base.inference, **own)
        hardware = replace(
            base.hardware, **{n.partition(".")[2]: v for n, v in fields.items() if n.startswith("hardware.")}
        )
        frozen = min(base.frozen_layers, spec.num_layers)
        plan = replace(  # the adapter targets as the model has them before it is checked (MLA: no q_proj / v_proj)
            base.targets_for(spec),
            model=spec,
            model_id=choice.model_id,
            frozen_layers=frozen,
            inference=inference,
            hardware=hardware,
        )
        if read.program == "ollama":
            plan = ollama_defaults(plan, gpu_for(plan), frozenset(read.fields))
            if plan.inference.new_tokens >= plan.inference.context:
                plan = plan.with_inference(new_tokens=plan.inference.context // 2)
    except PlanError as exc:  # named by the words that set the field, where a flag did
        words = next((n.words for n in read.read if n.field == exc.field), "")
        said = f"{words}: {exc}" if words else str(exc)
        # where the engine would not start either (a value its release refuses: --quantization mxfp4 on vLLM 0.8),
        # its own words first
        raise PlanFileError(WHERE, f"{read.stops}. As a plan: {said}" if read.stops else said) from None
    except (TypeError, ValueError) as exc:
        raise PlanFileError(WHERE, f"cannot be planned: {one_line(str(exc))[:200]}") from None
    return CommandPlan(plan, choice, tuple(notes))
