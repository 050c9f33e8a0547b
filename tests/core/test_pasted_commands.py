"""Launch commands as people paste them (issue 23's remaining gaps), read by core.files.launch.serve_command.

* llama.cpp's programs each take their own options: ggml-org/llama.cpp common/arg.cpp at 145b6280, every ``add_opt``'s
  ``set_examples`` / ``set_excludes`` (core.files.launch.engine_flags.LLAMACPP_TAKEN_BY). A flag the program does not
  take stops it ("error: invalid argument: X", ``common_params_parse_ex``); its variable is never read.
* The shell around the command: wrappers (nohup, sudo, env, exec, time), ``export K=V;`` in front, redirections,
  pipes, a background ``&``, CRLF line ends and ``\\`` continuations, docker's ``-e``, ``python -m`` entry points.
* Hostile text: one line, nothing read.
* SGLang's ``--config`` keys SGLang 0.5.23 would not start with, and other launches that would not start
  (``CommandRead.stops``).
"""

from __future__ import annotations

import pytest

from core.errors import PlanFileError
from core.files.launch.engine_flags import (
    LLAMACPP_ENV,
    LLAMACPP_SWITCHES,
    LLAMACPP_TAKEN_BY,
    LLAMACPP_TWO_VALUES,
    LLAMACPP_VALUED,
    llamacpp_takes,
)
from core.files.launch.serve_command import MAX_COMMAND_CHARS, NO_EFFECT, read_command
from core.plan import Engine, PrefixCaching

MODEL = "Qwen3-8B-Q4_K_M.gguf"


# ---- llama.cpp: each program's own options --------------------------------------------------------------------
def test_the_table_names_only_llama_cpp_options_and_an_option_is_one_set() -> None:
    known = LLAMACPP_SWITCHES | LLAMACPP_VALUED | LLAMACPP_TWO_VALUES
    assert set(LLAMACPP_TAKEN_BY) <= known
    # Every spelling of one add_opt shares its examples: the variables' options (LLAMACPP_ENV) prove it per option.
    for spellings in LLAMACPP_ENV.values():
        names = [s for s in spellings if s != "/"]
        assert len({LLAMACPP_TAKEN_BY.get(n) for n in names}) == 1, names
    # arg.cpp 145b6280: --port .set_examples({LLAMA_EXAMPLE_SERVER}); -p .set_excludes({LLAMA_EXAMPLE_SERVER});
    # --cache-ram {SERVER, CLI}; -gaw {COMPLETION}; -c has no set_examples (LLAMA_EXAMPLE_COMMON, every program).
    assert LLAMACPP_TAKEN_BY["--port"] == {"llama-server"}
    assert LLAMACPP_TAKEN_BY["-p"] == {"llama-cli", "llama-completion"}
    assert LLAMACPP_TAKEN_BY["--cache-ram"] == {"llama-server", "llama-cli"}
    assert LLAMACPP_TAKEN_BY["-gaw"] == {"llama-completion"}
    assert all(llamacpp_takes(p, "-c") for p in ("llama-server", "llama-cli", "llama-completion", "main"))
    # ./main and ./server predate the per-program sets (ggml-org/llama.cpp #9308, September 2024): every option.
    assert llamacpp_takes("main", "--port") and llamacpp_takes("server", "-p")


def test_a_flag_the_program_does_not_take_is_refused_as_the_program_refuses_it() -> None:
    read = read_command(f"llama-cli -m {MODEL} --port 8080 -c 4096 -co on")
    assert read.unknown == ("--port 8080 (not an option of llama-cli: it stops, 'error: invalid argument: --port')",)
    assert read.fields["inference.context"] == 4096  # the rest is read as before
    assert read.stops == "llama-cli would not start ('error: invalid argument'): no option of it: --port"
    server = read_command(f"llama-server -m {MODEL} -p 'hello there' -sys be-brief --port 8080")
    assert [u.split(" (")[0] for u in server.unknown] == ["-p hello there", "-sys be-brief"]
    assert [n.words for n in server.ignored] == ["--port 8080"]  # llama-server's own: no effect on memory
    assert "-p, -sys" in server.stops
    # A switch of another program takes no value: -i (llama-completion's) leaves -c 2048 to be read.
    completion = read_command(f"llama-server -m {MODEL} -i -c 2048")
    assert completion.unknown[0].startswith("-i (not an option of llama-server")
    assert completion.fields["inference.context"] == 2048
    # llama-completion has no --cache-ram ({SERVER, CLI}); llama-cli has, with no effect on the GPU.
    assert read_command(f"llama-completion -m {MODEL} --cache-ram 100").unknown[0].startswith("--cache-ram 100 (not")
    cli = read_command(f"llama-cli -m {MODEL} --cache-ram 100")
    assert (cli.unknown, cli.stops, [n.words for n in cli.ignored]) == ((), "", ["--cache-ram 100"])


def test_a_variable_of_an_option_the_program_does_not_take_is_ignored() -> None:
    # LLAMA_ARG_PORT: --port's set_env, an option llama-cli does not add: common_params_parse_ex never reads it.
    read = read_command(f"LLAMA_ARG_PORT=8080 LLAMA_ARG_CTX_SIZE=8192 llama-cli -m {MODEL}")
    assert [(n.words, n.why) for n in read.ignored] == [
        ("LLAMA_ARG_PORT=8080", "not an option of llama-cli: it never reads the variable (common/arg.cpp)")
    ]
    assert read.fields["inference.context"] == 8192 and read.unknown == () and read.stops == ""
    # The same variable in front of llama-server is its --port: read (and ignored as the address, no memory).
    server = read_command(f"LLAMA_ARG_PORT=8080 llama-server -m {MODEL}")
    assert [(n.words, n.why) for n in server.ignored] == [("LLAMA_ARG_PORT=8080", NO_EFFECT)]


def test_the_old_programs_take_every_option() -> None:
    read = read_command(f"./main -m {MODEL} -p hi --port 8080 -c 2048")
    assert (read.unknown, read.stops) == ((), "")
    assert read.fields["inference.context"] == 2048


# ---- the shell around the command ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        "export OLLAMA_NUM_PARALLEL=2; ollama run llama3.1:8b",
        "export OLLAMA_NUM_PARALLEL=2 && ollama run llama3.1:8b",
        "OLLAMA_NUM_PARALLEL=2 ollama run llama3.1:8b",
        "env OLLAMA_NUM_PARALLEL=2 ollama run llama3.1:8b",
        "sudo OLLAMA_NUM_PARALLEL=2 ollama run llama3.1:8b",
        "OLLAMA_NUM_PARALLEL=2 nohup ollama run llama3.1:8b > ollama.log 2>&1 &",
        "export OLLAMA_NUM_PARALLEL=2\r\nollama run llama3.1:8b 2>&1 | tee ollama.log\r\n",
        "bash -lc 'export OLLAMA_NUM_PARALLEL=2; ollama run llama3.1:8b'",
        "(OLLAMA_NUM_PARALLEL=2 ollama run llama3.1:8b &)",
    ],
)
def test_ollama_in_the_shell_forms_people_paste(text: str) -> None:
    # Before: the model, and with nohup / sudo / env the variables too, were dropped unsaid.
    read = read_command(text)
    assert (read.program, read.model_ref, read.unknown) == ("ollama", "llama3.1:8b", ())
    assert read.fields["inference.concurrent"] == 2  # OLLAMA_NUM_PARALLEL=2 as written


def test_ollama_serve_behind_nohup_keeps_its_environment() -> None:
    read = read_command(
        "OLLAMA_FLASH_ATTENTION=1 OLLAMA_KV_CACHE_TYPE=q8_0 nohup ollama serve > /tmp/ollama.log 2>&1 &"
    )
    assert [n.words for n in read.read] == [
        "ollama serve",
        "OLLAMA_FLASH_ATTENTION=1",
        "OLLAMA_KV_CACHE_TYPE=q8_0",
    ]
    assert f"run through nohup: {NO_EFFECT}" in read.notes
    assert any(n.endswith("> /tmp/ollama.log 2>&1") for n in read.notes)


VLLM_FORMS = [
    "env VLLM_USE_V1=1 vllm serve Qwen/Qwen3-8B --max-model-len 8192",
    "vllm serve Qwen/Qwen3-8B \\\r\n  --max-model-len 8192 \\\r\n  --port 8000\r\n",
    "vllm serve Qwen/Qwen3-8B \\  \n  --max-model-len 8192",  # spaces after the backslash, as editors leave them
    "docker run --gpus all -e VLLM_USE_V1=1 -e HF_TOKEN=x -p 8000:8000 vllm/vllm-openai:v0.10.2 "
    "--model Qwen/Qwen3-8B --max-model-len 8192",
    "python -m vllm.entrypoints.openai.api_server --model Qwen/Qwen3-8B --max-model-len 8192",
    "nohup vllm serve Qwen/Qwen3-8B --max-model-len 8192 > vllm.log 2>&1 &",
    "sudo -E vllm serve Qwen/Qwen3-8B --max-model-len 8192",
    "vllm serve Qwen/Qwen3-8B --max-model-len 8192 2>&1 | tee -a vllm.log",
    "time vllm serve Qwen/Qwen3-8B --max-model-len 8192",
    "$ exec vllm serve Qwen/Qwen3-8B --max-model-len 8192",
    # A compose file's or a container's command: sh -c / bash -lc "SCRIPT" runs SCRIPT; a subshell ( ... &).
    'bash -c "vllm serve Qwen/Qwen3-8B --max-model-len 8192"',
    "/bin/sh -lc 'nohup vllm serve Qwen/Qwen3-8B --max-model-len 8192 > vllm.log 2>&1 &'",
    "(vllm serve Qwen/Qwen3-8B --max-model-len 8192 &)",
]


@pytest.mark.parametrize("text", VLLM_FORMS)
def test_vllm_in_the_shell_forms_people_paste(text: str) -> None:
    read = read_command(text)
    assert (read.engine, read.model_ref, read.unknown) == (Engine.VLLM, "Qwen/Qwen3-8B", ())
    assert read.fields["inference.context"] == 8192
    assert not any(n.startswith("before the command, not read") for n in read.notes)


def test_sglang_entry_points_behind_the_shell() -> None:
    read = read_command(
        "CUDA_VISIBLE_DEVICES=0,1 nohup python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --tp 2 "
        "> sglang.log 2>&1 &"
    )
    assert (read.engine, read.model_ref, read.unknown) == (Engine.SGLANG, "Qwen/Qwen3-8B", ())
    assert read.fields["inference.tensor_parallel"] == 2 and "GPUs visible: 2" in read.notes


def test_cuda_visible_devices_sets_the_gpus_where_the_engine_counts_them() -> None:
    # llama.cpp splits layers over every GPU it sees (-sm layer, the default): two visible, two stages.
    llama = read_command(f"CUDA_VISIBLE_DEVICES=0,1 llama-server -m {MODEL}")
    assert llama.fields["inference.pipeline_parallel"] == 2
    # Ollama: the GPUs visible, as its export writes them.
    assert read_command("CUDA_VISIBLE_DEVICES=0,1 ollama serve").fields["inference.pipeline_parallel"] == 2
    # vLLM and SGLang take the GPU count from TP x PP x replicas: the visible count is said, not planned.
    vllm = read_command("CUDA_VISIBLE_DEVICES=0,1 vllm serve Qwen/Qwen3-8B")
    assert vllm.fields["inference.tensor_parallel"] == 1
    assert "2 GPUs visible, the launch uses 1 (TP x PP x replicas): the rest stay idle" in vllm.notes
    # A variable before sudo may not reach the command (sudoers' env_reset): read, and said.
    sudo = read_command("CUDA_VISIBLE_DEVICES=0,1 sudo vllm serve Qwen/Qwen3-8B -tp 2")
    assert any("set before sudo" in n for n in sudo.notes) and "GPUs visible: 2" in sudo.notes
    assert not any("set before sudo" in n for n in read_command("sudo -E vllm serve Qwen/Qwen3-8B").notes)


def test_env_unsets_and_clears_as_env_does() -> None:
    # POSIX env: -u NAME takes NAME out, -i starts from an empty environment.
    unset = read_command("CUDA_VISIBLE_DEVICES=0,1 env -u CUDA_VISIBLE_DEVICES vllm serve Qwen/Qwen3-8B")
    assert "GPUs visible: 2" not in unset.notes
    cleared = read_command("CUDA_VISIBLE_DEVICES=0,1 env -i CUDA_VISIBLE_DEVICES=3 vllm serve Qwen/Qwen3-8B")
    assert "GPUs visible: 1" in cleared.notes


# ---- hostile text: one line, nothing read -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("vllm serve Qwen/Qwen3-8B " + "x" * (10 * 1024 * 1024), f"a launch command is at most {MAX_COMMAND_CHARS:,}"),
        ("vllm serve Qwen/Qwen3-8B \x00\x01\x02", "holds control characters"),
        ("vllm serve 'Qwen/Qwen3-8B --max-model-len 8192", "No closing quotation"),
        ('llama-server -m "x.gguf', "No closing quotation"),
        ('bash -c "vllm serve \'Qwen/Qwen3-8B"', "No closing quotation"),  # inside the -c script
        ('bash -c "ollama run \'llama3.1:8b"', "No closing quotation"),
        ("frobnicate --model Qwen/Qwen3-8B --port 8000", "is not a vLLM, SGLang, llama.cpp or Ollama server launch"),
        ("llama-bench -m x.gguf -p 512", "runs llama-bench, a llama.cpp tool that serves no model"),
        ("CUDA_VISIBLE_DEVICES=0 ./build/bin/llama-perplexity -m x.gguf", "runs llama-perplexity, a llama.cpp tool"),
        ("frobnicate llama-3-8b.gguf", "is not a vLLM, SGLang, llama.cpp or Ollama server launch"),  # a file name
        ("   \r\n  ", "is empty"),
    ],
)
def test_hostile_text_is_one_line(text: str, said: str) -> None:
    with pytest.raises(PlanFileError) as error:
        read_command(text)
    assert said in str(error.value) and "\n" not in str(error.value) and len(str(error.value)) < 600


def test_ten_megabytes_of_bytes_are_refused_before_decoding() -> None:
    from core.files.launch.serve_command import command_text

    with pytest.raises(PlanFileError, match="bytes: a launch command is at most"):
        command_text(b"\xff" * (10 * 1024 * 1024))


# ---- SGLang's --config: the keys 0.5.23 would not start with -----------------------------------------------------
# sglang 0.5.23 wheel: sglang/srt/server_args.py prepare_server_args merges the file (ConfigArgumentMerger) and then
# calls parser.parse_args, which stops at a word no option reads ("unrecognized arguments"); the merger itself raises
# "Unsupported config option" for a key whose action is neither store_true nor one-valued (--disable-cuda-graph's
# DeprecatedStoreTrueAction, --lora-paths' LoRAPathAction, the BooleanOptionalAction fields).
SGLANG_CONFIG = b"""\
model-path: Qwen/Qwen3-8B
tp-size: 2
context-length: 8192
disable-cuda-graph: true
frobnicate: 3
tp_size: 4
"""


def _sglang_config(name: str) -> bytes:
    assert name == "serve.yaml"
    return SGLANG_CONFIG


def test_sglang_config_keys_sglang_would_not_start_with_are_said() -> None:
    read = read_command("python -m sglang.launch_server --config serve.yaml", load_config=_sglang_config)
    assert read.unknown == (
        "disable-cuda-graph: true (SGLang refuses it in serve.yaml: 'Unsupported config option' "
        "(DeprecatedStoreTrueAction); give it on the command line)",
        "frobnicate: 3 (a key of serve.yaml that is no SGLang option: SGLang stops, 'unrecognized arguments: "
        "--frobnicate')",
        # SGLang passes a key as written (--tp_size): its parser has only --tp-size, so the key is refused.
        "tp_size: 4 (a key of serve.yaml that is no SGLang option: SGLang stops, 'unrecognized arguments: --tp_size')",
    )
    assert read.stops == (
        "SGLang would not start with its --config file: it refuses the key(s) disable-cuda-graph, frobnicate, tp_size "
        "(see Not understood)"
    )
    # The keys it takes are read as before: tp-size 2 (not the refused tp_size 4), context-length 8192.
    assert (read.fields["inference.tensor_parallel"], read.fields["inference.context"]) == (2, 8192)
    # On the command line --disable-cuda-graph is SGLang's flag: read, nothing stops.
    flag = read_command("python -m sglang.launch_server --model-path Qwen/Qwen3-8B --disable-cuda-graph")
    assert (flag.stops, flag.unknown, flag.fields["inference.cuda_graphs"]) == ("", (), False)


def test_a_clean_sglang_config_stops_nothing() -> None:
    ok = b"model-path: Qwen/Qwen3-8B\ntp: 2\nenable-metrics: true\n"  # tp: argparse's unique prefix of --tp-size
    read = read_command("sglang serve --config ok.yaml", load_config=lambda _: ok)
    assert (read.stops, read.unknown, read.fields["inference.tensor_parallel"]) == ("", (), 2)


def test_too_few_gpus_visible_is_a_launch_that_would_not_start() -> None:
    read = read_command("CUDA_VISIBLE_DEVICES=0 vllm serve Qwen/Qwen3-8B -tp 2")
    assert read.stops == "the launch asks 2 GPU(s) (TP x PP x replicas) but sees 1: the engine would not start"


def test_the_command_line_says_a_launch_would_not_start(capsys: pytest.CaptureFixture[str]) -> None:
    from core.cli.app import main

    code = main(["import-command", f"llama-cli -m {MODEL} -c 8192 --port 8080", "--gpu", "rtx-4090", "--json"])
    out = capsys.readouterr().out
    assert code == 0  # the plan is still estimated from what was read
    said = "llama-cli would not start ('error: invalid argument'): no option of it: --port"
    assert f'"would_not_start": "{said}"' in out
    code = main(["import-command", f"llama-cli -m {MODEL} -c 8192 --port 8080", "--gpu", "rtx-4090"])
    out = capsys.readouterr().out
    assert "From the llama.cpp launch command\n  llama-cli would not start" in out


def test_cuda_visible_devices_is_counted_as_cuda_counts_it() -> None:
    from core.files.launch.serve_command import visible_gpus

    # pytorch/pytorch torch/cuda/__init__.py _parse_visible_devices (PR #84879), CUDA's own rule: ordinals read as
    # strtoul up to the first negative one, "1gpu2" is 1, UUIDs up to the first without GPU- / MIG-, a repeat hides all.
    cases = {"0,1": 2, "-1": 0, "0,-1,2": 1, "1gpu2,2ampere": 2, "GPU-8932f937,GPU-1b2c": 2, "GPU-8932f937,1": 1}
    assert {v: visible_gpus(v) for v in cases} == cases
    assert (visible_gpus("0,0"), visible_gpus("all"), visible_gpus("device=2")) == (0, None, 1)
    # -1 was counted as one GPU; it hides them all: vLLM finds no device, llama.cpp and Ollama run on the CPU.
    vllm = read_command("CUDA_VISIBLE_DEVICES=-1 vllm serve Qwen/Qwen3-8B")
    assert (
        vllm.stops
        == "CUDA_VISIBLE_DEVICES hides every GPU: vLLM finds no CUDA device and stops; the plan keeps its card"
    )
    llama = read_command(f"CUDA_VISIBLE_DEVICES=-1 llama-server -m {MODEL}")
    assert llama.stops == "" and llama.fields["inference.pipeline_parallel"] == 1
    assert any("llama.cpp runs on the CPU" in n for n in llama.notes)
    ollama = read_command("CUDA_VISIBLE_DEVICES=-1 ollama serve")
    assert [n.words for n in ollama.unexpressed] == ["CUDA_VISIBLE_DEVICES=-1"]
    assert ollama.fields["inference.pipeline_parallel"] == 1
    few = read_command("CUDA_VISIBLE_DEVICES=0,-1,2 vllm serve Qwen/Qwen3-8B -tp 2")  # one GPU before the -1
    assert few.stops.startswith("the launch asks 2 GPU(s) (TP x PP x replicas) but sees 1")


# ---- vLLM's --config: the keys 0.19.0 would not start with -------------------------------------------------------
# vllm 0.19.0 wheel, vllm/utils/argparse_utils.py: FlexibleArgumentParser.parse_args pulls the file in only for
# "--config" as a word of its own (`if "--config" in args`), before it turns "_" into "-" in every --name; then
# load_config_file makes `key: v` "--key v", `true` "--key", `false` nothing, a list "--key" and its items, a mapping
# its JSON; _pull_args_from_config puts them after `serve MODEL` and raises "No model specified! ..." when neither the
# command nor the file (its `model` key, "--model") names one. argparse then stops at a word no option reads.
# The first four keys: vLLM's own example, docs/configuration/serve_args.md ("Configuration file").
VLLM_CONFIG = b"""\
model: meta-llama/Llama-3.1-8B-Instruct
host: "127.0.0.1"
port: 6379
uvicorn-log-level: "info"
frobnicate: 3
model_tag: x
enforce-eager: 1
max_model_len: 8192
"""


def test_vllm_config_keys_vllm_would_not_start_with_are_said() -> None:
    # Checked with the 0.19.0 wheel's FlexibleArgumentParser on a serve parser of these options: it prints
    # "vllm: error: unrecognized arguments: --frobnicate --model-tag x 1" (the 3 fills the free positional model).
    read = read_command("vllm serve --config serve.yaml", load_config=lambda _: VLLM_CONFIG)
    assert read.model_ref == "meta-llama/Llama-3.1-8B-Instruct"  # the `model` key is --model, which serve takes
    assert [n.words for n in read.ignored] == ["--host 127.0.0.1", "--port 6379", "--uvicorn-log-level info"]
    assert read.unknown == (
        "frobnicate: 3 (a key of serve.yaml that is no vLLM option: vLLM stops, 'unrecognized arguments: "
        "--frobnicate')",
        # vLLM makes --model_tag --model-tag before parsing: the positional's name is no option.
        "model_tag: x (a key of serve.yaml that is no vLLM option: vLLM stops, 'unrecognized arguments: --model-tag')",
        # --enforce-eager takes no value: argparse leaves the 1 over.
        "enforce-eager: 1 (--enforce-eager takes no value: vLLM stops, 'unrecognized arguments: 1')",
    )
    assert read.stops == (
        "vLLM would not start with its --config file: it refuses the key(s) frobnicate, model_tag, enforce-eager "
        "(see Not understood)"
    )
    assert read.fields["inference.context"] == 8192  # max_model_len is --max-model-len: read as before
    # The first word left over fills vllm serve's positional model where the command gives none: the same parser
    # gives model_tag='1' for `model: m` and `enforce-eager: 1`, and serve.py serves args.model = model_tag.
    alone = read_command("vllm serve --config s.yaml", load_config=lambda _: b"model: m\nenforce-eager: 1\n")
    assert alone.unknown == (
        "enforce-eager: 1 (--enforce-eager takes no value: vllm serve takes 1 as the model to serve (its positional), "
        "not the file's)",
    )
    assert alone.fields["inference.cuda_graphs"] is False  # --enforce-eager itself is set


def test_vllm_config_false_and_the_model() -> None:
    # 0.19.0's load_config_file passes a false as nothing, even for a key no option reads (argparse never sees it).
    raw = b"model: Qwen/Qwen3-8B\nenable-prefix-caching: false\nfrobnicate: false\n"
    read = read_command("vllm serve --config c.yaml", load_config=lambda _: raw)
    assert (read.stops, read.unknown, read.fields["inference.prefix_caching"]) == ("", (), PrefixCaching.DEFAULT)
    assert "c.yaml: frobnicate: false, which vLLM passes as nothing (the default)" in read.notes
    # No model on the command line nor in the file: _pull_args_from_config raises before anything is parsed.
    bare = read_command("vllm serve --config c.yaml --max-model-len 4096", load_config=lambda _: b"port: 8000\n")
    assert bare.stops == (
        "vLLM would not start: 'No model specified! Please specify model either as a positional argument or in a "
        "config file.'"
    )
    # --config=FILE is --config's own value to argparse: vLLM never opens the file.
    joined = read_command("vllm serve Qwen/Qwen3-8B --config=c.yaml", load_config=lambda _: raw)
    assert "inference.prefix_caching" not in [n.field for n in joined.read]
    assert any(n.startswith("--config=FILE: vLLM reads the file only for --config FILE") for n in joined.notes)


# ---- notes name only what the named program does ----------------------------------------------------------------
def test_the_slot_note_is_the_programs_own() -> None:
    # common/arg.cpp 145b6280: -np is every program's option ("number of parallel sequences to decode", no
    # set_examples), its default common_params.n_parallel = 1; slots are llama-server's alone.
    cli = read_command(f"llama-cli -m {MODEL} -c 4096")
    assert not any("llama-server" in n or "slot" in n for n in cli.notes)
    assert "-np not given: one sequence, llama-cli's default (common_params.n_parallel = 1)" in cli.notes
    assert cli.fields["inference.concurrent"] == 1
    completion = read_command(f"llama-completion -m {MODEL}")
    assert not any("slot" in n for n in completion.notes)
    assert any(n.startswith("-c not given: the model's own length") and "1 sequence" in n for n in completion.notes)
    server = read_command(f"llama-server -m {MODEL} -c 4096")
    assert "-np not given: one slot planned (llama-server's default slot count varies by build)" in server.notes


# ---- the environment: what is no engine setting, what the plan has ------------------------------------------------
def test_shell_variables_that_set_nothing_are_ignored_with_why() -> None:
    read = read_command(
        "PATH=/usr/local/bin:/usr/bin HOME=/root HF_HOME=/data/hf HF_TOKEN=x TRANSFORMERS_CACHE=/data/tf "
        "PYTHONUNBUFFERED=1 OMP_NUM_THREADS=8 NCCL_DEBUG=INFO vllm serve Qwen/Qwen3-8B"
    )
    assert read.unknown == ()  # PATH, HOME and TRANSFORMERS_CACHE were not understood
    ignored = {n.words.partition("=")[0]: n.why for n in read.ignored}
    assert list(ignored) == [
        "PATH",
        "HOME",
        "HF_HOME",
        "HF_TOKEN",
        "TRANSFORMERS_CACHE",
        "PYTHONUNBUFFERED",
        "OMP_NUM_THREADS",
        "NCCL_DEBUG",
    ]
    assert all(why.endswith(NO_EFFECT) for why in ignored.values())
    assert ignored["HF_HOME"].startswith("where models are downloaded")
    assert not any(n.startswith("environment with") for n in read.notes)


def test_variables_the_plan_has_are_read_into_it() -> None:
    from core.inputs import VllmSampler

    # vllm 0.19.0 vllm/envs.py: VLLM_USE_FLASHINFER_SAMPLER is bool(int(value)); core.serving.vllm_rules.sampler_path.
    read = read_command("VLLM_USE_FLASHINFER_SAMPLER=1 vllm serve Qwen/Qwen3-8B")
    assert read.fields["inference.vllm_sampler"] is VllmSampler.FLASHINFER
    assert [n.words for n in read.read if n.field == "inference.vllm_sampler"] == ["VLLM_USE_FLASHINFER_SAMPLER=1"]
    off = read_command("VLLM_USE_FLASHINFER_SAMPLER=0 vllm serve Qwen/Qwen3-8B")
    assert off.fields["inference.vllm_sampler"] is VllmSampler.NATIVE
    bad = read_command("VLLM_USE_FLASHINFER_SAMPLER=yes vllm serve Qwen/Qwen3-8B")
    assert bad.unknown[0].startswith("VLLM_USE_FLASHINFER_SAMPLER=yes (")
    # PYTORCH_CUDA_ALLOC_CONF is the plan's Allocator setting (core.allocator parses it as PyTorch does).
    alloc = read_command("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True vllm serve Qwen/Qwen3-8B")
    assert alloc.fields["hardware.alloc_conf"] == "expandable_segments:True"
    refused = read_command("PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:1 vllm serve Qwen/Qwen3-8B")
    assert "hardware.alloc_conf" not in refused.fields and refused.unknown[0].startswith("PYTORCH_CUDA_ALLOC_CONF=")
    assert refused.stops.startswith("PyTorch refuses PYTORCH_CUDA_ALLOC_CONF")
    # What the plan has no setting for is said with its own why: NCCL's NVLS buffers, vLLM's graph estimate.
    nccl = read_command("NCCL_NVLS_ENABLE=0 VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 vllm serve Qwen/Qwen3-8B -tp 2")
    whys = {n.words.partition("=")[0]: n.why for n in nccl.unexpressed}
    assert "NVLS" in whys["NCCL_NVLS_ENABLE"] and "release line" in whys["VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS"]


def test_the_allocator_setting_reaches_the_plan() -> None:
    from core.files.launch.serve_command import plan_from_command
    from core.presets import default_plan

    read = read_command("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True vllm serve Qwen/Qwen3-8B --max-model-len 4K")
    plan = plan_from_command(read, default_plan()).plan
    assert (plan.hardware.alloc_conf, plan.inference.context) == ("expandable_segments:True", 4096)
