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
import sys
import tempfile
import traceback
from collections.abc import Callable
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

    DeepSpeedConfig(config)


def check_torchtune(text: str) -> None:
    """`tune validate FILE` (torchtune/_cli/validate.py → torchtune/config/_validate.py validate): every
    ``_component_`` is imported and its keys bound to its signature. It does not check top-level keys against a
    recipe: the file is overrides, merged over the recipe's config."""
    import subprocess

    tune = Path(sys.executable).with_name("tune")
    done = subprocess.run([str(tune), "validate", _file(text, ".yaml")], capture_output=True, text=True, check=False)
    said = (done.stdout + done.stderr).strip()
    if done.returncode != 0 or "Config is well-formed" not in said:
        raise RuntimeError(said.splitlines()[-1] if said else f"tune validate exited {done.returncode}")


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
}


def _error(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:600]


# The libraries a tool's parser runs on, recorded beside its own version.
STACK = ("transformers", "accelerate", "peft", "trl", "deepspeed", "torch")


def merged(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The recording with this run's tools replaced (each tool may need its own library versions: one run each)."""
    ran = {(r["tool"], r["target"]) for r in new["records"]}
    kept = [r for r in old.get("records", []) if (r["tool"], r["target"]) not in ran]
    records = sorted([*kept, *new["records"]], key=lambda r: (r["target"], r["plan"]))
    return {"format": "vramplan-launch-acceptance", "version": 1, "records": records}


def run(only: str | None) -> dict[str, Any]:
    records: list[dict[str, Any]] = []
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
                "with": {dep: _version(dep) for dep in STACK if dep != package},
                "accepted": verdict is None,
                "error": verdict,
                "keys": sorted(keys_of(target, text)),
            }
        )
        print(f"{'ok  ' if verdict is None else 'FAIL'} {target.value:18} {name:32} {verdict or ''}", flush=True)
    for package, why in unavailable.items():
        print(f"not checked: {package}: {why}")
    return {"records": records, "unavailable": unavailable}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="targets or tool packages, comma-separated")
    parser.add_argument("--write", action="store_true", help=f"record the verdicts in {RECORDING}")
    args = parser.parse_args(argv)
    result = run(args.only)
    rejected = [r for r in result["records"] if not r["accepted"]]
    print(f"{len(result['records'])} exports checked, {len(rejected)} rejected")
    if args.write:
        old = json.loads(RECORDING.read_text()) if RECORDING.exists() else {}
        atomic_write_text(RECORDING, json.dumps(merged(old, result), indent=1) + "\n", force=True)  # ours
    return 1 if rejected else 0


if __name__ == "__main__":
    sys.exit(main())
