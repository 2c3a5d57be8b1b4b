"""PEFT adapter configs for every compact-bert family: the API behind ``compact-bert finetune --peft``.

``build_peft_config(method, model, ...)`` resolves target names against the model before PEFT sees them,
because PEFT's own failures are late or silent for our layouts:

- MoE experts are stacked parameters (``…Experts.up_proj [E, intermediate, hidden]``,
  ``down_proj [E, hidden, intermediate]``; ``…ExpertLinear.weight [E, out, in]`` in MoE attention), not
  ``nn.Linear``. PEFT's LoRA adapts them through ``target_parameters`` and reads a 3-D parameter as
  ``[experts, out, in]`` unless the module sets ``is_transposed``, which is our layout, so each expert gets its
  own rank-``r`` update. Naming ``experts`` (or a MoE-attention ``query``) as a target module would make PEFT
  fail with "Target module MiniMoEExperts(...) is not supported"; here such a name is mapped to the stacked
  weights, since that is the only thing it can mean. PEFT's parameter LoRA needs ``lora_dropout == 0`` and
  supports no DoRA or LoRA bias.
- Routers are never adapted unless named: PEFT's ``"all-linear"`` would wrap every router ``gate``, so it is
  expanded here to the model's linear maps minus routers and task heads.
- Task heads (``classifier``, ``qa_outputs``) are trained and saved with the adapter: PEFT's ``SEQ_CLS`` and
  ``TOKEN_CLS`` task types add ``classifier``, ``QUESTION_ANS`` adds ``qa_outputs``; the task type is inferred
  from the model's head when not given.

Methods: ``lora`` and ``ia3`` (IA³ scales ``nn.Linear`` activations only: on MoE families it adapts the dense
attention and leaves experts as they are). PEFT has no bottleneck (Houlsby / Pfeiffer) adapter; its prompt
methods do not fit our tasks (prefix tuning needs ``past_key_values``, which encoders do not take; prompt tuning
prepends virtual tokens, which token classification and extractive QA would have to strip from their outputs),
so neither is offered.
"""

from __future__ import annotations

from peft import IA3Config, LoraConfig, PeftConfig, TaskType
from torch import nn

from .peft_registration import COMPACT_BERT_MODEL_TYPES, register_peft_default_targets

__all__ = [
    "EXPERT_PARAMETER_NAMES",
    "PEFT_METHODS",
    "adaptable_linear_module_names",
    "build_peft_config",
    "router_module_names",
]

PEFT_METHODS = ("lora", "ia3")
EXPERT_PARAMETER_NAMES = ("up_proj", "down_proj")
_HEAD_NAMES = ("classifier", "qa_outputs")
_TASK_TYPES_BY_HEAD_CLASS = {
    "ForSequenceClassification": TaskType.SEQ_CLS,
    "ForTokenClassification": TaskType.TOKEN_CLS,
    "ForQuestionAnswering": TaskType.QUESTION_ANS,
    "Model": TaskType.FEATURE_EXTRACTION,
}
_DEFAULT_LORA_TARGETS = ("query", "value")
_DEFAULT_IA3_TARGETS = ("key", "value", "output.dense")
_DEFAULT_IA3_FEEDFORWARD = ("output.dense",)


def _is_expert_stack(module: nn.Module) -> bool:
    """An MoE FFN's experts: stacked ``up_proj`` / ``down_proj`` parameters. Recognised by structure, so that a
    model loaded as Hub remote code (its classes defined in a ``transformers_modules`` copy) is recognised too."""
    stack = getattr(module, "up_proj", None)
    return isinstance(stack, nn.Parameter) and stack.dim() == 3


def _is_expert_linear(module: nn.Module) -> bool:
    """An MoE-attention projection: one linear map per expert as a stacked ``[E, out, in]`` weight."""
    weight = getattr(module, "weight", None)
    return not isinstance(module, nn.Linear) and isinstance(weight, nn.Parameter) and weight.dim() == 3


def _is_router(name: str, module: nn.Module) -> bool:
    return name.rpartition(".")[2] == "router" or ".router." in f".{name}."


def router_module_names(model: nn.Module) -> list[str]:
    """Full names of every learned router's linear map (``...router.gate``), e.g. for PEFT's ``exclude_modules``
    when using ``target_modules="all-linear"`` directly: ``LoraConfig(target_modules="all-linear",
    exclude_modules=router_module_names(model) or None)``."""
    return [
        f"{name}.gate"
        for name, module in model.named_modules()
        if _is_router(name, module) and isinstance(getattr(module, "gate", None), nn.Linear)
    ]


def adaptable_linear_module_names(model: nn.Module) -> list[str]:
    """What ``"all-linear"`` means for our models: the last name component of every ``nn.Linear`` except
    routers, task heads and the masked-LM decoder (PEFT keeps output layers out of ``all-linear`` too)."""
    names = set()
    for name, module in model.named_modules():
        leaf = name.rpartition(".")[2]
        if not isinstance(module, nn.Linear) or _is_router(name, module):
            continue
        if leaf in _HEAD_NAMES or leaf in ("decoder", "seq_relationship"):
            continue
        names.add(leaf)
    return sorted(names)


def _matches(name: str, target: str) -> bool:
    return name == target or name.endswith(f".{target}")


class _ResolvedTargets:
    def __init__(self):
        self.modules: list[str] = []
        self.parameters: list[str] = []


def _resolve_targets(model: nn.Module, targets: list[str], method: str, expert_stacks: str) -> _ResolvedTargets:
    """Sort target names into ``nn.Linear`` module names and stacked expert parameters; fail on the rest.

    ``expert_stacks``: what to do with a name that matches stacked expert weights: ``"adapt"`` (LoRA through
    ``target_parameters``), ``"skip"`` (defaults of a method that cannot adapt them) or ``"fail"``.
    """
    named = list(model.named_modules())
    resolved = _ResolvedTargets()
    unmatched, unsupported = [], []
    for target in targets:
        hits = [(name, module) for name, module in named if _matches(name, target)]
        if not hits:
            unmatched.append(target)
            continue
        linear = [name for name, module in hits if isinstance(module, nn.Linear)]
        experts = [name for name, module in hits if _is_expert_stack(module)]
        expert_linear = [name for name, module in hits if _is_expert_linear(module)]
        # A name shared by linear maps and expert stacks (``dense`` with MoE attention) is spelled out in full
        # names, since PEFT would try to wrap both kinds as modules.
        mixed = bool(linear) and bool(experts or expert_linear)
        if linear:
            resolved.modules.extend(linear if mixed else [target])
        if (experts or expert_linear) and expert_stacks == "fail":
            unsupported.append(f"{target!r} ({method} adapts nn.Linear only; these are stacked expert weights)")
        elif (experts or expert_linear) and expert_stacks == "adapt":
            for name in experts if mixed else [target] * bool(experts):
                resolved.parameters.extend(f"{name}.{parameter}" for parameter in EXPERT_PARAMETER_NAMES)
            for name in expert_linear if mixed else [target] * bool(expert_linear):
                resolved.parameters.append(f"{name}.weight")
        if not (linear or experts or expert_linear):
            kinds = sorted({type(module).__name__ for _, module in hits})
            unsupported.append(f"{target!r} (matches {', '.join(kinds)}, not a linear map)")
    if unmatched:
        raise ValueError(
            f"Target names {unmatched} match no module of {type(model).__name__}; adaptable linear maps here are "
            f"{adaptable_linear_module_names(model)}"
            + (", plus 'experts'" if _has(model, _is_expert_stack) else "")
            + "."
        )
    if unsupported:
        raise ValueError(f"Cannot adapt {'; '.join(unsupported)}.")
    resolved.modules = list(dict.fromkeys(resolved.modules))
    resolved.parameters = list(dict.fromkeys(resolved.parameters))
    return resolved


def _has(model: nn.Module, kind) -> bool:
    return any(kind(module) for module in model.modules())


def _infer_task_type(model: nn.Module) -> TaskType | None:
    class_name = type(model).__name__
    for suffix, task_type in _TASK_TYPES_BY_HEAD_CLASS.items():
        if class_name.endswith(suffix):
            return task_type
    return None


def build_peft_config(
    method: str,
    model: nn.Module,
    task_type: str | TaskType | None = None,
    r: int = 8,
    alpha: float = 16,
    dropout: float | None = None,
    target_modules: list[str] | str | None = None,
    adapt_experts: bool = True,
) -> PeftConfig:
    """A PEFT config for ``model`` (any compact-bert family and head, or a BERT-like transformers model, whose
    linear maps carry the same names), ready for ``get_peft_model``.

    Args:
        method: ``"lora"`` or ``"ia3"``.
        model: the model to adapt; target names are checked against it.
        task_type: PEFT task type (``"SEQ_CLS"``, ``"TOKEN_CLS"``, ``"QUESTION_ANS"``, ...); inferred from the
            model's head class when ``None``. It decides which head PEFT trains and saves with the adapter.
        r, alpha: LoRA rank and scaling numerator (ignored by IA³).
        dropout: LoRA dropout; ``None`` means 0.1, or 0 when expert weights are adapted (PEFT's parameter LoRA
            cannot apply dropout). Ignored by IA³.
        target_modules: names (matched as PEFT does: the full name or its last components), ``"all-linear"``
            (every linear map but routers and heads), or ``None`` for the model type's defaults (LoRA:
            ``query``/``value``; IA³: ``key``/``value``/``output.dense``). ``"experts"`` and MoE-attention
            projections are adapted through their stacked weights. Routers are adapted only if named here.
        adapt_experts: LoRA only: also adapt every MoE FFN's experts (``up_proj``, ``down_proj``), and the
            MoE-attention projections the default or ``"all-linear"`` targets name. With ``False`` only expert
            weights named explicitly in ``target_modules`` are adapted.
    """
    method = method.lower() if isinstance(method, str) else method
    if method not in PEFT_METHODS:
        raise ValueError(f"Unknown PEFT method {method!r}; valid methods: {', '.join(PEFT_METHODS)}.")
    if getattr(getattr(model, "config", None), "model_type", None) in COMPACT_BERT_MODEL_TYPES:
        register_peft_default_targets()
    if task_type is None:
        task_type = _infer_task_type(model)
    if target_modules == "all-linear":
        expert_projections = {
            name.rpartition(".")[2] for name, module in model.named_modules() if _is_expert_linear(module)
        }
        requested = sorted(set(adaptable_linear_module_names(model)) | expert_projections)
    elif target_modules is None:
        requested = list(_DEFAULT_LORA_TARGETS if method == "lora" else _DEFAULT_IA3_TARGETS)
    elif isinstance(target_modules, str):
        raise ValueError(
            f"`target_modules` must be a list of names, 'all-linear' or None, got the string {target_modules!r}."
        )
    else:
        requested = list(target_modules)
    explicit = target_modules not in (None, "all-linear")
    if method != "lora":
        expert_stacks = "fail" if explicit else "skip"
    else:
        expert_stacks = "adapt" if explicit or adapt_experts else "skip"
    resolved = _resolve_targets(model, requested, method, expert_stacks)

    if method == "ia3":
        feedforward = [name for name in _DEFAULT_IA3_FEEDFORWARD if name in resolved.modules]
        if not resolved.modules:
            raise ValueError(f"IA³ found no nn.Linear among the targets {requested} of {type(model).__name__}.")
        return IA3Config(task_type=task_type, target_modules=resolved.modules, feedforward_modules=feedforward)

    if adapt_experts:
        resolved.parameters.extend(
            f"experts.{parameter}" for parameter in EXPERT_PARAMETER_NAMES if _has(model, _is_expert_stack)
        )
        resolved.parameters = list(dict.fromkeys(resolved.parameters))
    if dropout is None:
        dropout = 0.0 if resolved.parameters else 0.1
    elif dropout and resolved.parameters:
        raise ValueError(
            f"LoRA on stacked expert weights ({resolved.parameters}) cannot apply dropout (PEFT's parameter LoRA): "
            f"pass dropout=0 or adapt_experts=False, got dropout={dropout}."
        )
    if not resolved.modules and not resolved.parameters:
        raise ValueError(f"Nothing to adapt in {type(model).__name__} among {requested} with adapt_experts=False.")
    return LoraConfig(
        task_type=task_type,
        r=r,
        lora_alpha=alpha,
        lora_dropout=dropout,
        # An empty list, not None: None would make PEFT fill in the model type's default module names.
        target_modules=resolved.modules,
        target_parameters=resolved.parameters or None,
    )
