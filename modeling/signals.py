"""Distillation signals, read by name through forward hooks on named submodules.

One mechanism for every family and for any transformers BERT-like teacher: the signals that transformers
already returns are read from the standard outputs (``hidden_states`` = per-layer feature maps,
``attentions`` = per-head attention probabilities); everything else is recorded by hooks on submodules
whose names every BERT-like model shares (``SIGNAL_TEMPLATES``), without a second forward implementation
and without changing the model's code.

- ``query`` / ``key`` / ``value``: the per-layer Q, K, V projections (MiniLMv2 relations, paper 002 §3.2;
  attention query-key relations, paper 003 eq. 9-11).
- ``attention_norm`` / ``ffn_norm``: the post-LN LayerNorm of the MHA and FFN sublayers. Their outputs are
  the normalized trunk states, and ``input - residual`` is the sublayer output before the residual add
  (paper 003 §2.3: trunk and residual-inner locations); the residual of ``attention_norm`` is the layer's
  input, that of ``ffn_norm`` the output of ``attention_norm``.

MiniMoE's auxiliary MHA block (``use_auxiliary_attention``, layer ``"auxiliary"``: paper 002 §3.2) exists only to
be distilled, so it is no part of the model's forward: while a recorder reads one of its submodules, a hook on the
encoder runs it on the encoder's output (its Q/K/V take gradients; its output is discarded).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping

import torch
from torch import nn

__all__ = ["SIGNAL_TEMPLATES", "SubmoduleRecorder", "signal_module_name"]

SIGNAL_TEMPLATES = {
    "query": "encoder.layer.{layer}.attention.self.query",
    "key": "encoder.layer.{layer}.attention.self.key",
    "value": "encoder.layer.{layer}.attention.self.value",
    "attention_norm": "encoder.layer.{layer}.attention.output.LayerNorm",
    "ffn_norm": "encoder.layer.{layer}.output.LayerNorm",
}
_AUXILIARY_BLOCK = "encoder.auxiliary_attention"
_AUXILIARY_TEMPLATES = {
    "query": "encoder.auxiliary_attention.self.query",
    "key": "encoder.auxiliary_attention.self.key",
    "value": "encoder.auxiliary_attention.self.value",
}


def signal_module_name(signal: str, layer: int | str) -> str:
    """Submodule name (relative to the base model) of ``signal`` at ``layer``; ``layer="auxiliary"`` names
    MiniMoE's auxiliary MHA block."""
    templates = _AUXILIARY_TEMPLATES if layer == "auxiliary" else SIGNAL_TEMPLATES
    if signal not in templates:
        raise ValueError(f"Unknown signal {signal!r} for layer {layer!r}; valid signals: {', '.join(templates)}.")
    return templates[signal].format(layer=layer)


class SubmoduleRecorder:
    """Context manager recording the outputs (and, optionally, first inputs) of named submodules.

    ``names`` maps a key of your choice to a submodule name relative to ``model.base_model`` (works for
    base models and heads). After the forward pass, ``recorder.outputs[key]`` and ``recorder.inputs[key]``
    hold the tensors of the last call — the live tensors, not copies, so gradients flow through them.
    """

    def __init__(self, model: nn.Module, names: Mapping[str, str], record_inputs: bool = False):
        base = getattr(model, "base_model", model)
        available = dict(base.named_modules())
        missing = [name for name in names.values() if name not in available]
        if missing:
            raise ValueError(
                f"{type(model).__name__} has no submodule(s) {missing}; BERT-like models name them as in "
                f"SIGNAL_TEMPLATES ({', '.join(SIGNAL_TEMPLATES.values())})."
            )
        self._model = model
        self._modules = {key: available[name] for key, name in names.items()}
        reads_auxiliary = any(name.startswith(f"{_AUXILIARY_BLOCK}.") for name in names.values())
        self._auxiliary_encoder = base.encoder if reads_auxiliary else None
        self._record_inputs = record_inputs
        self._handles: list[torch.utils.hooks.RemovableHandle] = []
        self.outputs: dict[str, torch.Tensor] = {}
        self.inputs: dict[str, torch.Tensor] = {}

    def __enter__(self) -> SubmoduleRecorder:
        for key, module in self._modules.items():
            self._handles.append(module.register_forward_hook(self._hook(key)))
        if self._auxiliary_encoder is not None:
            hook = self._auxiliary_encoder.register_forward_hook(_run_auxiliary_attention, with_kwargs=True)
            self._handles.append(hook)
        return self

    def __exit__(self, *exc_info) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def _hook(self, key: str):
        def record(module: nn.Module, args: tuple, output) -> None:
            self.outputs[key] = output
            if self._record_inputs:
                self.inputs[key] = args[0]

        return record


def _run_auxiliary_attention(encoder: nn.Module, args: tuple, kwargs: dict, output) -> None:
    """Run the auxiliary MHA block as the encoder's next layer: on its last hidden states, with its masks and ids."""
    inputs = inspect.signature(encoder.forward).bind(*args, **kwargs).arguments
    masks = inputs["attention_mask"], inputs["token_mask"]
    encoder.auxiliary_attention(
        output[0], *masks, inputs["input_ids"], output_attentions=False, output_router_stats=False
    )
