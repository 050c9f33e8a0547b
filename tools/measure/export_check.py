"""Launch exports fed to each tool's own parser: does the real tool accept what `vramplan export` writes?

Run in the measuring venv, with the tools installed INTO it at the pinned versions and LLaMA-Factory's / axolotl's
older transformers stack and the engines' unpacked wheels beside it: the commands are in docs/CONFIGS.md,
"Launch exports checked by the tools' own parsers"::

    PYTHONPATH=. .venv-measure/bin/python -m tools.measure.export_check [--only TOOL,…] [--write]

Every plan of tools/measure/export_plans.py is exported to its targets and each text handed to the tool's parser
(a tool that will not import is recorded as not checked, with its error). ``--write`` records, per tool and
version, each export's keys and the tool's verdict in tests/data/launch_acceptance.json;
tests/core/test_launch_acceptance.py replays it with no tool installed.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.metadata
import io
import json
import os
import shlex
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from core.files.fileio import atomic_write_text
from core.files.launch import Target
from tools.measure.export_plans import document, exports, keys_of

RECORDING = Path(__file__).resolve().parents[2] / "tests" / "data" / "launch_acceptance.json"
DUMMY_OUTPUT = "/tmp/vramplan-export-check-out"


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:  # an unpacked wheel (vllm, sglang) has no metadata
        for where in (f"{package}._version", f"{package}.version"):
            with contextlib.suppress(ImportError):
                return str(importlib.import_module(where).__version__)
        return "not installed"


def _file(text: str, suffix: str) -> str:
    handle, path = tempfile.mkstemp(suffix=suffix, prefix="vramplan-export-")
    with os.fdopen(handle, "w") as out:
        out.write(text)
    return path


# ---- the checkers: None when the tool accepts the text, else the tool's own error ---------------------------


def check_trl(text: str) -> None:
    """`trl sft --config FILE` as TRL's CLI parses it (trl/cli.py → trl/scripts/sft.py make_parser →
    TrlParser((ScriptArguments, SFTConfig, ModelConfig)).parse_args_and_config)."""
    import transformers.training_args as training_args
    from trl import ModelConfig, ScriptArguments, SFTConfig, TrlParser

    # The card is the run's, not this CPU's: TrainingArguments.__post_init__ refuses bf16 where
    # is_torch_bf16_gpu_available() is false (transformers 5.25.0 training_args.py:1778), a check of the
    # machine, not of the file.
    training_args.is_torch_bf16_gpu_available = lambda: True
    path = _file(text, ".json")  # JSON is YAML: TrlParser reads --config with yaml.safe_load
    parser = TrlParser((ScriptArguments, SFTConfig, ModelConfig))
    argv = ["--config", path, "--dataset_name", "trl-lib/Capybara", "--output_dir", DUMMY_OUTPUT]
    parser.parse_args_and_config(argv, fail_with_unknown_args=True)
    _deepspeed_inline(json.loads(text))


def check_accelerate(text: str) -> None:
    """accelerate's own config classes (accelerate/commands/config/config_args.py load_config_from_file →
    ClusterConfig.from_yaml_file, which refuses unknown keys), as `accelerate launch --config_file` loads it."""
    from accelerate.commands.config.config_args import load_config_from_file

    load_config_from_file(_file(text, ".yaml"))


def check_accelerate_launch(text: str) -> None:
    """`accelerate launch` argv through accelerate/commands/launch.py launch_command_parser."""
    from accelerate.commands.launch import launch_command_parser

    words = document(Target.ACCELERATE_LAUNCH, text)
    assert words[:2] == ["accelerate", "launch"], words[:2]
    _argparse(launch_command_parser(), words[2:])


def check_torchrun(text: str) -> None:
    """torchrun's argv through torch/distributed/run.py get_args_parser (torch 2.13.0)."""
    from torch.distributed.run import get_args_parser

    words = document(Target.TORCHRUN, text)
    assert words[0] == "torchrun", words[0]
    _argparse(get_args_parser(), words[1:])


def check_deepspeed(text: str) -> None:
    """deepspeed.runtime.config.DeepSpeedConfig on the JSON (DS_BUILD_OPS=0; its pydantic models forbid extras)."""
    _deepspeed(json.loads(text))


def _deepspeed(config: dict[str, Any]) -> None:
    from deepspeed.runtime.config import DeepSpeedConfig

    _deepspeed_optimizer(DeepSpeedConfig(config))


# What transformers puts for the optimizer's "auto" values before DeepSpeed reads them (transformers 5.25.0
# integrations/deepspeed.py trainer_config_process lines 165 and 172: TrainingArguments.learning_rate and weight_decay;
# 4.57.1 lines 160 and 167): the check's learning rate (check_axolotl's) and TrainingArguments' default decay.
AUTO_OPTIMIZER_VALUES = {"lr": 2e-4, "weight_decay": 0.0}


def _deepspeed_inline(document: dict[str, Any]) -> None:
    """A trainer's inline ``deepspeed`` section's optimizer, built as DeepSpeed builds it once the trainer has filled
    "auto" (the trainer itself builds no optimizer then: transformers 5.25.0 integrations/deepspeed.py lines
    578-579, 4.57.1 lines 374-380, DummyOptim). The section's other keys are the tool's parser's, checked above."""
    inline = document.get("deepspeed")
    if not isinstance(inline, dict) or not isinstance(inline.get("optimizer"), dict):
        return
    from deepspeed.runtime.config import DeepSpeedConfig

    optimizer = inline["optimizer"]
    params = {k: AUTO_OPTIMIZER_VALUES[k] if v == "auto" else v for k, v in (optimizer.get("params") or {}).items()}
    minimal = {  # the batch keys filled as a one-GPU run's; the rest as written
        **{k: v for k, v in inline.items() if v != "auto" and not isinstance(v, dict)},
        "train_micro_batch_size_per_gpu": 1,
        "gradient_accumulation_steps": 1,
        "zero_optimization": inline.get("zero_optimization", {}),
        "optimizer": {**optimizer, "params": params},
    }
    _deepspeed_optimizer(DeepSpeedConfig(minimal))


def _deepspeed_optimizer(config: Any) -> None:
    """The optimizer of a DeepSpeed config's ``optimizer`` section, built by DeepSpeed's own
    ``DeepSpeedEngine._configure_basic_optimizer`` (deepspeed 0.18.3 runtime/engine.py lines 1533-1611; 0.16.9
    lines 1428-1500) on one float32 parameter: under ZeRO-Offload its CPU optimizers (DeepSpeedCPUAdam / Adagrad /
    Lion), each constructor refusing a parameter it does not take. DeepSpeedConfig itself stores ``optimizer.params``
    unread (runtime/config.py get_optimizer_params). The C++ kernel each constructor loads last (``*Builder().load()``,
    a JIT build with ``DS_BUILD_OPS=0``, minutes per op on this CPU) is stood in for: it takes the values the Python
    constructor has already accepted."""
    if config.optimizer_name is None:
        return
    from unittest import mock

    import deepspeed.ops.adagrad.cpu_adagrad as adagrad
    import deepspeed.ops.adam.cpu_adam as adam
    import torch
    from deepspeed.runtime.engine import DeepSpeedEngine

    for builder in (adam.CPUAdamBuilder, adagrad.CPUAdagradBuilder, _lion_builder()):
        if builder is not None:
            builder.load = lambda self, verbose=True: mock.MagicMock()

    class _Engine:  # the engine's own methods on the parsed config, without a model, a process group or a GPU
        _config = config
        client_optimizer = None
        zenflow = False  # 0.18.3 engine.py line 1558: ZenFlow is a config section the exports never write
        optimizer_name = DeepSpeedEngine.optimizer_name
        optimizer_params = DeepSpeedEngine.optimizer_params
        zero_use_cpu_optimizer = DeepSpeedEngine.zero_use_cpu_optimizer
        build = DeepSpeedEngine._configure_basic_optimizer

    built = _Engine().build([torch.nn.Parameter(torch.zeros(8))])
    mode = getattr(built, "adam_w_mode", None)
    print(f"     deepspeed built {type(built).__name__}" + ("" if mode is None else f" adam_w_mode={mode}"), flush=True)


def _lion_builder() -> Any:
    """DeepSpeedCPULion's op builder (deepspeed 0.18.3 ops/lion/cpu_lion.py; the module is there in 0.16.9 too)."""
    try:
        import deepspeed.ops.lion.cpu_lion as lion
    except ImportError:
        return None
    return lion.CPULionBuilder


def check_torchtune(text: str) -> None:
    """`tune validate FILE` (torchtune/_cli/validate.py → torchtune/config/_validate.py validate): every
    ``_component_`` is imported and its keys bound to its signature. It does not check top-level keys against a
    recipe: the file is overrides, merged over the recipe's config."""
    import subprocess

    tune = Path(sys.executable).with_name("tune")
    done = subprocess.run([str(tune), "validate", _file(text, ".yaml")], capture_output=True, text=True, check=False)
    said = (done.stdout + done.stderr).strip()
    if done.returncode != 0 or "Config is well-formed" not in said:
        last = said.splitlines()[-1] if said else f"tune validate exited {done.returncode}"
        missing = last.split("'")[1] if last.startswith("ModuleNotFoundError") and last.count("'") >= 2 else ""
        if missing and missing.split(".")[0] not in text:  # tune's own import failed (kagglesdk), no _component_'s
            raise ImportError(f"tune validate: {last}")
        raise RuntimeError(last)


def check_llamafactory(text: str) -> None:
    """LLaMA-Factory's own parser (src/llamafactory/hparams/parser.py get_train_args: HfArgumentParser over its
    ModelArguments, DataArguments, TrainingArguments, FinetuningArguments, GeneratingArguments, unknown keys
    refused, then its checks), with the dataset, template and output_dir the header asks the user to add."""
    import transformers.training_args as training_args

    training_args.is_torch_bf16_gpu_available = lambda: True  # the run's card, as in check_trl
    import llamafactory.hparams.parser as factory

    # parser.py:328 refuses pure_bf16 on a card without bf16 (this CPU).
    factory.is_torch_bf16_gpu_available = lambda: True
    import types

    from transformers.training_args import ParallelMode

    # parser.py:298 and :301 refuse a run not started by torchrun (`llamafactory-cli train` starts one on several
    # GPUs): launch checks, not the file's, skipped by naming this process's mode the distributed one.
    factory.ParallelMode = types.SimpleNamespace(  # type: ignore[assignment]
        DISTRIBUTED=ParallelMode.NOT_PARALLEL,
        NOT_DISTRIBUTED=ParallelMode.DISTRIBUTED,  # NOT_PARALLEL: this CPU
    )
    get_train_args = factory.get_train_args

    config = document(Target.LLAMA_FACTORY, text)
    config.update({"dataset": "alpaca_en_demo", "template": "llama3", "output_dir": DUMMY_OUTPUT})
    get_train_args(config)
    _deepspeed_inline(config)


def check_axolotl(text: str) -> None:
    """axolotl's pydantic config model (src/axolotl/utils/schemas/config.py AxolotlInputConfig, through
    axolotl.utils.config.validate_config as `axolotl train` runs it), with the datasets, output_dir and learning_rate
    the header asks the user to add and the capabilities of the plan's card (a bf16-capable GPU)."""
    from axolotl.utils.config import validate_config
    from axolotl.utils.dict import DictDefault

    config = document(Target.AXOLOTL, text)
    config.update(  # what the header asks the user to add
        datasets=[{"path": "mhenrichsen/alpaca_2k_test", "type": "alpaca"}], output_dir=DUMMY_OUTPUT, learning_rate=2e-4
    )
    capabilities = {"bf16": True, "fp8": False, "n_gpu": 8, "n_node": 1, "compute_capability": "sm_90"}
    validate_config(DictDefault(config), capabilities=capabilities, env_capabilities={"torch_version": "2.13.0"})
    _deepspeed_inline(config)
    # The model keeps keys it does not define (a negative control, frobnicate: 1, passed): each top-level key must
    # also be one of its fields.
    from axolotl.utils.schemas.config import AxolotlInputConfig

    fields = dict(AxolotlInputConfig.model_fields)
    for plugin in config.get("plugins") or ():
        fields.update(_plugin_fields(plugin))
    known = set(fields) | {f.alias for f in fields.values() if f.alias}
    unknown = sorted(set(config) - known)
    if unknown:
        raise ValueError(f"keys AxolotlInputConfig does not define: {unknown}")


def _plugin_fields(plugin: str) -> dict[str, Any]:
    """A plugin's own arguments, which axolotl merges into the schema (integrations/config.py merge_input_args): the
    pydantic model of the plugin package's args.py, read without its __init__ (which imports wandb and more)."""
    import importlib.util

    package = importlib.util.find_spec(plugin.rsplit(".", 1)[0])
    assert package is not None and package.submodule_search_locations, plugin
    path = Path(next(iter(package.submodule_search_locations))) / "args.py"
    spec = importlib.util.spec_from_file_location(f"_export_check_{path.parent.name}_args", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fields: dict[str, Any] = {}
    for value in vars(module).values():
        if isinstance(value, type) and value.__module__ == module.__name__ and hasattr(value, "model_fields"):
            fields.update(value.model_fields)
    return fields


def check_vllm(text: str) -> None:
    """`vllm serve` argv through vLLM 0.19.0's own serve parser (vllm/entrypoints/openai/cli_args.py
    make_arg_parser on vllm/utils/argparse_utils.py FlexibleArgumentParser, as vllm/entrypoints/cli/serve.py
    builds it), then validate_parsed_serve_args and EngineArgs.from_cli_args (the dataclass the engine is built
    from)."""
    import types

    # The platform is the plan's card (CUDA), not this CPU: its compiled ops (vllm._C, CUDA 12 libraries) are
    # stubbed, as they play no part in parsing; vllm/config/device.py DeviceConfig asks current_platform.
    for compiled in ("vllm._C", "vllm._C_stable_libtorch"):
        sys.modules.setdefault(compiled, types.ModuleType(compiled))
    import vllm.platforms
    from vllm.platforms.cuda import CudaPlatform

    vllm.platforms._current_platform = CudaPlatform()
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.openai.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    words = document(Target.VLLM, text)
    assert words[:2] == ["vllm", "serve"], words[:2]
    args = _argparse(make_arg_parser(FlexibleArgumentParser(prog="vllm serve")), words[2:])
    validate_parsed_serve_args(args)
    AsyncEngineArgs.from_cli_args(args)


def check_sglang(text: str) -> None:
    """`python -m sglang.launch_server` argv through SGLang 0.5.23's own parser (sglang/srt/server_args.py
    ServerArgs.add_cli_args on argparse, as prepare_server_args builds it; ServerArgs.from_cli_args)."""
    import argparse as _argparse_module

    from sglang.srt.server_args import ServerArgs

    words = document(Target.SGLANG, text)
    assert words[:3] == ["python", "-m", "sglang.launch_server"], words[:3]
    parser = _argparse_module.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    args = _argparse(parser, words[3:])
    for name in ("model_path", "tp_size", "dp_size", "pp_size"):
        assert hasattr(args, name), name


def check_torchtitan(text: str) -> None:
    """torchtitan 0.2.2 (the last release configured by TOML; its config/ is that of 238fa995, which the exporter
    cites): the header's launch through torchrun's parser, its script arguments through torchtitan's own
    ``ConfigManager().parse_args`` (torchtitan/config/manager.py: ``_dict_to_dataclass`` refuses a key JobConfig
    does not define), then the file's every value again as a ``--section.key`` flag, which tyro checks against the
    field's type (the TOML path does not: ``mode = "bogus"`` passes it) and which must give the same config, and the
    start-up checks ``train.py`` makes before it touches a GPU (_titan_startup)."""
    import dataclasses
    import tomllib

    from torch.distributed.run import get_args_parser

    path = _file(text, ".toml")
    launch = next(line[2:] for line in text.splitlines() if line.startswith("# torchrun "))
    words = shlex.split(launch.replace("<this file>", shlex.quote(path)))
    run_args = _argparse(get_args_parser(), words[1:])
    assert run_args.module and run_args.training_script == "torchtitan.train", words
    argv = list(run_args.training_script_args)
    from_file = _titan_parse(argv)
    flags = [word for key, value in _leaves(tomllib.loads(text)) for word in _tyro_words(key, value)]
    # Without the file: tyro adds a default it finds outside a Literal's choices to the choices.
    from_flags = _titan_parse(flags)
    from_flags.job.config_file = from_file.job.config_file
    differ = _differences(dataclasses.asdict(from_file), dataclasses.asdict(from_flags))
    if differ:
        raise ValueError(f"the file's values differ from the same values as flags: {differ}")
    _titan_startup(from_file, world=int(run_args.nnodes) * int(run_args.nproc_per_node))


def _titan_parse(argv: list[str]) -> Any:
    """``ConfigManager().parse_args(argv)``; tyro's refusal (a box on stderr and exit 2) as one line."""
    import logging

    from torchtitan.config.manager import ConfigManager

    logging.getLogger("torchtitan").setLevel(logging.ERROR)  # "HF assets path ... does not exist": the user's
    said = io.StringIO()
    with contextlib.redirect_stderr(said), contextlib.redirect_stdout(said):
        try:
            return ConfigManager().parse_args(argv)
        except SystemExit as stop:
            lines = [" ".join(line.strip(" │╭╮╰╯─-").split()) for line in said.getvalue().splitlines()]
            said_lines = "; ".join(line for line in lines if line and "--help" not in line)
            raise _ArgparseExit(said_lines or str(stop)) from None


def _leaves(data: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in data.items():
        if isinstance(value, dict):
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _tyro_words(key: str, value: Any) -> list[str]:
    """A TOML value as torchtitan's command line takes it: a bool as ``--x`` / ``--…no_x``, a list of strings
    comma-joined (ConfigManager.register_tyro_rules), the rest as its text."""
    if isinstance(value, bool):
        head, _, last = key.rpartition(".")
        return [f"--{key}" if value else f"--{head}.no_{last}"]
    if isinstance(value, list):
        return [f"--{key}", ",".join(map(str, value))]
    return [f"--{key}", str(value)]


def _differences(a: Any, b: Any, prefix: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for key in a for d in _differences(a[key], b.get(key), f"{prefix}{key}.")]
    same_type = type(a) is type(b) or {type(a), type(b)} <= {int, float}  # TOML's 0 for a float field is 0.0
    return [] if a == b and same_type else [f"{prefix[:-1]}: {a!r} in the file, {b!r} as a flag"]


def _titan_startup(config: Any, world: int) -> None:
    """What torchtitan 0.2.2 checks at start-up, run on the parsed config: the model and flavour
    (train.py:117 get_train_spec, :138 model_args[flavor]), the parallel degrees against the world size
    (train.py:373 ParallelDims, distributed/parallel_dims.py:35 _validate), the global batch (train.py:196-205),
    the sequence length's divisor (models/llama3/infra/parallelize.py:69, qwen3 :62), DDP alone on the mesh
    (llama3 parallelize.py:151), async TP (distributed/tensor_parallel.py:16 maybe_enable_async_tp), the
    selective-AC option (distributed/activation_checkpoint.py:177), the pipeline schedule
    (distributed/pipeline_parallel.py:55 get_schedule_class) and the model converters' own constructors
    (protocols/model_converter.py build_model_converters: Float8LinearConverter, MXLinearConverter), with the card
    the plan names (torchtitan.tools.utils.has_cuda_capability: the run's card, not this CPU)."""
    from torch.distributed.pipelining.schedules import get_schedule_class
    from torchtitan.distributed import ParallelDims
    from torchtitan.distributed.tensor_parallel import maybe_enable_async_tp
    from torchtitan.protocols.train_spec import get_train_spec

    spec = get_train_spec(config.model.name)
    if config.model.flavor not in spec.model_args:
        raise KeyError(f"{config.model.name} has no flavor {config.model.flavor!r}: {sorted(spec.model_args)}")
    par = config.parallelism
    dims = ParallelDims(
        dp_shard=par.data_parallel_shard_degree,
        dp_replicate=par.data_parallel_replicate_degree,
        cp=par.context_parallel_degree,
        tp=par.tensor_parallel_degree,
        pp=par.pipeline_parallel_degree,
        ep=par.expert_parallel_degree,
        etp=par.expert_tensor_parallel_degree,
        world_size=world,
    )
    training = config.training
    batch_degree = dims.dp_replicate * dims.dp_shard if dims.dp_enabled else 1
    global_batch = training.global_batch_size if training.global_batch_size > 0 else training.local_batch_size
    if global_batch % (training.local_batch_size * batch_degree):
        raise AssertionError(
            f"global batch size must be multiple of local batch size times data-parallel degree "
            f"({global_batch} % ({training.local_batch_size} * {batch_degree}) != 0)"
        )
    if training.seq_len % dims.seq_len_divisor:
        raise AssertionError(f"Sequence length {training.seq_len} must be divisible by {dims.seq_len_divisor}")
    if not dims.fsdp_enabled and dims.dp_replicate_enabled and dims.world_size != dims.dp_replicate:
        raise RuntimeError("DDP has not supported > 1D parallelism")
    if dims.tp_enabled:
        maybe_enable_async_tp(config, None)  # the flag's check comes before any use of the mesh
    ac = config.activation_checkpoint
    if ac.mode == "selective" and not (ac.selective_ac_option == "op" or ac.selective_ac_option.isdigit()):
        raise ValueError(f"Invalid selective AC option: {ac.selective_ac_option}")
    if dims.pp_enabled:
        get_schedule_class(par.pipeline_parallel_schedule)
    import torchtitan.components.quantization.float8 as float8
    import torchtitan.components.quantization.mx as mx
    from torchtitan.protocols.model_converter import build_model_converters

    float8.has_cuda_capability = mx.has_cuda_capability = lambda major, minor: True  # the plan's card
    build_model_converters(config, dims)


class _ArgparseExit(Exception):
    pass


# What the shell puts in for the variables a multi-node command leaves to each node (torchrun's --node_rank,
# accelerate's --machine_rank and --main_process_ip): node 0 of the exported layout.
SHELL_VALUES = {"$NODE_RANK": "0", "$MACHINE_RANK": "0", "$MASTER_ADDR": "10.0.0.1", "$MAIN_PROCESS_IP": "10.0.0.1"}


def _argparse(parser: Any, argv: list[str]) -> Any:
    for variable, value in SHELL_VALUES.items():
        argv = [word.replace(variable, value) for word in argv]
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            return parser.parse_args(argv)
        except SystemExit as stop:
            said = err.getvalue().strip()
            raise _ArgparseExit(said.splitlines()[-1] if said else str(stop)) from None


CHECKERS: dict[Target, tuple[str, Callable[[str], None]]] = {
    Target.TRL: ("trl", check_trl),
    Target.ACCELERATE: ("accelerate", check_accelerate),
    Target.ACCELERATE_LAUNCH: ("accelerate", check_accelerate_launch),
    Target.TORCHRUN: ("torch", check_torchrun),
    Target.DEEPSPEED: ("deepspeed", check_deepspeed),
    Target.TORCHTUNE: ("torchtune", check_torchtune),
    Target.LLAMA_FACTORY: ("llamafactory", check_llamafactory),
    Target.AXOLOTL: ("axolotl", check_axolotl),
    Target.VLLM: ("vllm", check_vllm),
    Target.SGLANG: ("sglang", check_sglang),
    Target.TORCHTITAN: ("torchtitan", check_torchtitan),
}


# The negative control: an unknown key added to an accepted export, which the checker must refuse (one that passes
# anything checks nothing). (the key added, the text with it). Recorded under "controls".
CONTROLS: dict[Target, tuple[str, Callable[[str], str]]] = {
    Target.TORCHTITAN: ("training.frobnicate", lambda t: t.replace("[training]\n", "[training]\nfrobnicate = 1\n", 1)),
    # DeepSpeedConfig stores optimizer.params unread: the control is for _deepspeed_optimizer, on ZeRO-Offload's Adam.
    Target.DEEPSPEED: ("optimizer.params.frobnicate", lambda t: _with_offloaded_adam(t, frobnicate=1)),
}


def _with_offloaded_adam(text: str, **params: Any) -> str:
    document = json.loads(text)
    zero = {**document.get("zero_optimization", {}), "offload_optimizer": {"device": "cpu"}}
    zero["stage"] = max(zero.get("stage", 0), 2)
    optimizer = {"type": "Adam", "params": {"adam_w_mode": False, **params}}
    return json.dumps({**document, "zero_optimization": zero, "optimizer": optimizer}, indent=2)


def _error(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:600]


# The libraries a tool's parser runs on, recorded beside its own version.
STACK = ("transformers", "accelerate", "peft", "trl", "deepspeed", "torch")
TOOL_STACK = {"torchtitan": ("torch", "tyro", "torchao")}  # what torchtitan's config and converters run on


def merged(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The recording with this run's tools replaced (each tool may need its own library versions: one run each)."""
    ran = {(r["tool"], r["target"]) for r in new["records"]}
    kept = [r for r in old.get("records", []) if (r["tool"], r["target"]) not in ran]
    records = sorted([*kept, *new["records"]], key=lambda r: (r["target"], r["plan"]))
    controls = [c for c in old.get("controls", []) if (c["tool"], c["target"]) not in ran]
    controls = sorted([*controls, *new.get("controls", [])], key=lambda c: c["target"])
    return {"format": "vramplan-launch-acceptance", "version": 1, "records": records, "controls": controls}


def _control(target: Target, text: str) -> dict[str, Any]:
    package, checker = CHECKERS[target]
    added, adding = CONTROLS[target]
    changed = adding(text)
    assert changed != text, f"the {target.value} control added nothing"
    try:
        checker(changed)
        said = None
    except Exception as exc:
        said = _error(exc)
    print(f"{'ok  ' if said else 'FAIL'} {target.value:18} control {added}: {said or 'accepted'}", flush=True)
    return {"target": target.value, "tool": package, "version": _version(package), "added": added,
            "refused": said is not None, "error": said}  # fmt: skip


def run(only: str | None) -> dict[str, Any]:
    records: list[dict[str, Any]] = []
    controlled: dict[str, dict[str, Any]] = {}
    unavailable: dict[str, str] = {}
    for name, target, text in exports():
        if target not in CHECKERS or (only and not {target.value, CHECKERS[target][0]} & set(only.split(","))):
            continue
        package, checker = CHECKERS[target]
        if package in unavailable:
            continue
        try:
            checker(text)
            verdict: str | None = None
        except ImportError as missing:
            unavailable[package] = _error(missing)
            continue
        except Exception as exc:  # the tool's own refusal, recorded as it says it
            verdict = _error(exc)
            if os.environ.get("EXPORT_CHECK_TRACE"):
                traceback.print_exc()
        records.append(
            {
                "plan": name,
                "target": target.value,
                "tool": package,
                "version": _version(package),
                "with": {dep: _version(dep) for dep in TOOL_STACK.get(package, STACK) if dep != package},
                "accepted": verdict is None,
                "error": verdict,
                "keys": sorted(keys_of(target, text)),
            }
        )
        print(f"{'ok  ' if verdict is None else 'FAIL'} {target.value:18} {name:32} {verdict or ''}", flush=True)
        if verdict is None and target in CONTROLS and target.value not in controlled:
            controlled[target.value] = _control(target, text)
    for package, why in unavailable.items():
        print(f"not checked: {package}: {why}")
    return {"records": records, "controls": list(controlled.values()), "unavailable": unavailable}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="targets or tool packages, comma-separated")
    parser.add_argument("--write", action="store_true", help=f"record the verdicts in {RECORDING}")
    args = parser.parse_args(argv)
    result = run(args.only)
    rejected = [r for r in result["records"] if not r["accepted"]]
    rejected += [c for c in result["controls"] if not c["refused"]]
    print(f"{len(result['records'])} exports checked, {len(rejected)} rejected or controls passed")
    if args.write:
        old = json.loads(RECORDING.read_text()) if RECORDING.exists() else {}
        atomic_write_text(RECORDING, json.dumps(merged(old, result), indent=1) + "\n", force=True)  # ours
    return 1 if rejected else 0


if __name__ == "__main__":
    sys.exit(main())
