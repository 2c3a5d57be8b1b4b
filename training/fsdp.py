"""FSDP2 through Accelerate for compact-bert's trainers, also on CPU (gloo): what Accelerate 1.15 / transformers 5.24
leave out.

- ``enable_fsdp_on_cpu``: ``AcceleratorState`` selects FSDP only for GPU-like devices (accelerate state.py:986-1016);
  a CPU run stays ``MULTI_CPU`` and silently trains with DDP. The trainer re-applies what state.py:1013-1016 and
  1031 do for GPUs.
- ``shard_model``: layers (``_no_split_modules``) + root in our own groups, for models with aliased parameters
  (BERT MLM heads: ``decoder.bias`` is ``predictions.bias``), which accelerate's ``fsdp2_prepare_model`` would split
  over two groups (fsdp_utils.py:857-879): "Parameter 'cls.predictions.decoder.bias' is shared with a parameter
  already managed by another FSDP group".
- ``shard_frozen_teacher``: ``prepare_model(..., evaluation_mode=True)`` never shards (accelerator.py:1882), and the
  other preparations refuse a model without an optimizer (accelerator.py:1507-1521, 1914-1917).
- ``parameters_without_saved_state``: parameters the loss never reaches have no AdamW state in a checkpoint, which
  torch's FSDP2 optimizer loading refuses; the trainer hides them while it loads.
"""

from __future__ import annotations

import os

import torch
from accelerate import PartialState
from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin
from accelerate.utils.dataclasses import get_module_class_from_name

__all__ = [
    "enable_fsdp_on_cpu",
    "save_as_unsharded_class",
    "fsdp_plugin_arguments",
    "has_aliased_parameters",
    "parameters_without_saved_state",
    "saves_sharded_state_dict",
    "shard_frozen_teacher",
    "shard_model",
]


def fsdp_plugin_arguments(args) -> dict | None:
    """The FSDP plugin's arguments that ``args`` asks for, or ``None`` without ``--fsdp``.

    transformers 5 builds them (``TrainingArguments.fsdp_plugin_args``); 4.57 passes ``--fsdp`` to Accelerate
    through ``FSDP_*`` environment variables only, which the plugin reads itself, and knows no FSDP version: the
    version comes from ``fsdp_config["version"]`` or the launcher's ``FSDP_VERSION``, and the state-dict type from
    ``fsdp_config["state_dict_type"]`` or the launcher's ``FSDP_STATE_DICT_TYPE``."""
    plugin_args = getattr(args, "fsdp_plugin_args", None)
    if plugin_args is not None or not args.fsdp:
        return plugin_args
    config = args.fsdp_config or {}
    plugin_args = {"fsdp_version": int(config.get("version", os.environ.get("FSDP_VERSION", 1)))}
    if "state_dict_type" in config:
        plugin_args["state_dict_type"] = config["state_dict_type"]
    return plugin_args


def enable_fsdp_on_cpu(accelerator, plugin_args: dict | None) -> bool:
    """Switch a ``MULTI_CPU`` accelerator to FSDP with ``plugin_args`` (``fsdp_plugin_arguments``).
    Returns whether the accelerator is now FSDP."""
    state = accelerator.state
    if plugin_args is None or state.distributed_type != DistributedType.MULTI_CPU:
        return state.distributed_type == DistributedType.FSDP
    plugin = FullyShardedDataParallelPlugin(**plugin_args)
    if state.mixed_precision != "no":
        plugin.set_mixed_precision(state.mixed_precision)
    state.distributed_type = DistributedType.FSDP
    state.fsdp_plugin = plugin
    # Later ``AcceleratorState()`` calls copy PartialState's shared dict over their own (state.py:919).
    PartialState().distributed_type = DistributedType.FSDP
    return True


def saves_sharded_state_dict(accelerator) -> bool:
    """Whether checkpoints hold per-process shards (``SHARDED_STATE_DICT``, the ``accelerate config`` default), in
    which case the Trainer's ``save_model`` writes no model at all (transformers, trainer.py ``save_model``)."""
    plugin = getattr(accelerator.state, "fsdp_plugin", None)
    return plugin is not None and "FULL_STATE_DICT" not in str(plugin.state_dict_type)


def has_aliased_parameters(model: torch.nn.Module) -> bool:
    """Whether one parameter is reachable under two names (tied embeddings, aliased MLM bias)."""
    seen = set()
    for _, parameter in model.named_parameters(remove_duplicate=False):
        if id(parameter) in seen:
            return True
        seen.add(id(parameter))
    return False


def shard_model(
    model: torch.nn.Module, accelerator, reshard_after_forward: bool, keep_root_class: bool = False
) -> torch.nn.Module:
    """``fully_shard`` each ``_no_split_modules`` layer, then the root (the rest, aliased parameters included, in one
    group), with the plugin's mixed-precision and offload policies. ``keep_root_class``: shard each child of the root
    instead (each its own FSDP root), so the root keeps its class: transformers 5 finds what ``output_hidden_states``
    captures by ``str(model.__class__)`` (utils/output_capturing.py:45-50) and a sharded root, ``FSDP<Name>``, returns
    ``hidden_states=None``; and a child (``teacher.base_model``) can be called on its own. A parameter tied across
    two children is then sharded once per child (correct for a frozen model, twice the memory)."""
    from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard

    if isinstance(model, FSDPModule):
        return model
    plugin = accelerator.state.fsdp_plugin
    kwargs = {
        "reshard_after_forward": reshard_after_forward,
        "mp_policy": plugin.mixed_precision_policy or MixedPrecisionPolicy(),
        "mesh": None,
    }
    if plugin.cpu_offload is not None:
        kwargs["offload_policy"] = plugin.cpu_offload
    layer_classes = tuple(
        layer_class
        for name in (getattr(model, "_no_split_modules", None) or [])
        if (layer_class := get_module_class_from_name(model, name)) is not None
    )
    if layer_classes:
        for module in list(model.modules())[1:]:
            if isinstance(module, layer_classes):
                fully_shard(module, **kwargs)
    if not keep_root_class:
        fully_shard(model, **kwargs)
        return model
    for child in model.children():
        if not isinstance(child, FSDPModule) and any(True for _ in child.parameters()):
            fully_shard(child, **kwargs)
    return model


def save_as_unsharded_class(model: torch.nn.Module) -> None:
    """FSDP2 swaps a sharded module's class for ``FSDP<Name>(FSDPModule, <Name>)``, created in torch
    (fsdp/_fully_shard/_fsdp_init.py ``_apply_to_module``). transformers' ``save_pretrained`` copies the file of
    ``type(model).__module__`` (and the files it imports relatively) next to the weights and writes
    ``type(model).__name__`` into ``auto_map`` and ``architectures`` (dynamic_module_utils.py ``custom_object_save``):
    a sharded model would ship torch's FSDP modules as its remote code. The wrapper class takes the module and name of
    the class it wraps, so a sharded model saves what the unsharded one does; ``isinstance(model, FSDPModule)`` is
    unchanged. The trainer calls it before every save, whichever code sharded the model (``shard_model`` or
    Accelerate's preparation)."""
    from torch.distributed.fsdp import FSDPModule

    wrapper_class = type(model)
    if not issubclass(wrapper_class, FSDPModule) or wrapper_class is FSDPModule:
        return
    unsharded_class = next(base for base in wrapper_class.__bases__ if base is not FSDPModule)
    wrapper_class.__module__ = unsharded_class.__module__
    wrapper_class.__name__ = unsharded_class.__name__
    wrapper_class.__qualname__ = unsharded_class.__qualname__


def shard_frozen_teacher(teacher: torch.nn.Module, accelerator) -> torch.nn.Module:
    """A frozen teacher sharded over every process, each group resharded after its forward (1/N of the teacher
    held between steps). Every process must call it in lockstep."""
    shard_model(teacher, accelerator, reshard_after_forward=True, keep_root_class=True)
    teacher.requires_grad_(False)
    return teacher.eval()


def _saved_parameter_names(checkpoint: str) -> set[str] | None:
    sharded = os.path.join(checkpoint, "optimizer_0")
    if os.path.isdir(sharded):
        from torch.distributed.checkpoint import FileSystemReader

        prefix = "optimizer.state."
        keys = FileSystemReader(sharded).read_metadata().state_dict_metadata
        return {key[len(prefix) :].rsplit(".", 1)[0] for key in keys if key.startswith(prefix)}
    full = os.path.join(checkpoint, "optimizer.bin")
    if os.path.isfile(full):
        return set(torch.load(full, map_location="cpu", weights_only=True)["state"])
    return None


def parameters_without_saved_state(model: torch.nn.Module, checkpoint: str) -> list[torch.nn.Parameter]:
    """Trainable parameters of ``model`` with no optimizer state in an FSDP checkpoint folder (never reached by the
    loss before it was saved): torch's ``get/set_optimizer_state_dict`` would first give every trainable parameter a
    state (a zero-gradient step) and then demand it from the checkpoint ("Missing key in checkpoint state_dict:
    optimizer.state.<name>.step" for SHARDED_STATE_DICT, "Missing optimizer state for parameter" for FULL)."""
    saved = _saved_parameter_names(checkpoint)
    if saved is None:
        return []
    return [parameter for name, parameter in model.named_parameters() if parameter.requires_grad and name not in saved]
