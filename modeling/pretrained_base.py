"""Base class of every compact-bert model: weight init, attention selection, input checks, checked loading."""

from __future__ import annotations

import torch
from torch import nn
from transformers import PreTrainedModel

from .checkpoint_checks import check_loaded_checkpoint

__all__ = [
    "CompactBertPreTrainedModel",
    "copy_unless_loaded",
    "fill_unless_loaded",
    "normal_unless_loaded",
    "tied_masked_lm_weights",
]


def _loaded(tensor: torch.Tensor) -> bool:
    """transformers 5 flags every tensor it filled from a checkpoint; those must not be re-initialized.
    (4.57 never sets the flag on tensors and only initializes modules with missing weights.)"""
    return bool(getattr(tensor, "_is_hf_initialized", False))


def normal_unless_loaded(tensor: torch.Tensor, std: float) -> None:
    if not _loaded(tensor):
        tensor.normal_(mean=0.0, std=std)


def fill_unless_loaded(tensor: torch.Tensor, value: float) -> None:
    if not _loaded(tensor):
        tensor.fill_(value)


def copy_unless_loaded(tensor: torch.Tensor, value: torch.Tensor) -> None:
    if not _loaded(tensor):
        tensor.copy_(value)


# ``from_pretrained`` arguments that locate a Hub checkpoint's files (to read their safetensors headers).
_HUB_ARGUMENTS = ("subfolder", "revision", "cache_dir", "token", "local_files_only")


class CompactBertPreTrainedModel(PreTrainedModel):
    """Shared behaviour; each family subclasses it with its ``config_class`` and ``base_model_prefix``.

    Saving is transformers' own: importing compact-bert registers each family class for its Auto class
    (``register_for_auto_class``), so ``save_pretrained`` and ``push_to_hub`` copy the class's generated module
    (``models/<model_type>/modeling_<model_type>.py``) and its configuration module next to the weights, and
    ``AutoModel*.from_pretrained(dir or repo_id, trust_remote_code=True)`` works in a process that never
    installed compact-bert.
    """

    supports_gradient_checkpointing = True
    # Attention is PyTorch's fused SDPA kernel or the explicit ("eager") computation, selected with
    # ``attn_implementation`` in ``from_pretrained`` / ``from_config`` or on the config.
    _supports_sdpa = True
    # Head losses are per-batch means, so Trainer must scale them for gradient accumulation itself rather
    # than pass ``num_items_in_batch``.
    accepts_loss_kwargs = False

    @classmethod
    def from_pretrained(
        cls, *args, output_loading_info: bool = False, ignore_mismatched_sizes: bool = False, **kwargs
    ):
        """transformers' ``from_pretrained``, then ``check_loaded_checkpoint``: a config that disagrees with the
        weights fails naming the config field, its value and the checkpoint's shape, and non-finite weights fail
        naming the tensors.

        transformers is always asked to re-initialize mismatched tensors and to report them, so that both lines
        reach the same check; without ``ignore_mismatched_sizes`` any mismatch is then an error, with it only
        task-head tensors may differ (a new number of labels), as ``compact-bert finetune`` relies on.

        An override rather than a post-load hook: 4.57 raises a size mismatch from a leaf module's
        ``load_state_dict`` before any model hook runs, and 5.x's hook (``_adjust_missing_and_unexpected_keys``) is
        not told ``ignore_mismatched_sizes``, which only its load report reads.
        """
        loaded, loading_info = super().from_pretrained(
            *args, output_loading_info=True, ignore_mismatched_sizes=True, **kwargs
        )
        source = args[0] if args else kwargs.get("pretrained_model_name_or_path")
        hub_kwargs = {name: kwargs[name] for name in _HUB_ARGUMENTS if kwargs.get(name) is not None}
        check_loaded_checkpoint(loaded, loading_info, source, ignore_mismatched_sizes, hub_kwargs)
        return (loaded, loading_info) if output_loading_info else loaded

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        """Initialize every parameter *and* every buffer the checkpoint does not hold.

        transformers 5 materializes a loaded model from the meta device and leaves whatever a checkpoint
        lacks uninitialized — non-persistent buffers (``position_ids``) included — unless this method
        covers it; a task head added to a saved base model relies on it on both lines. Each architecture
        adds its own modules (NoNorm, experts, hash tables).
        """
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            normal_unless_loaded(module.weight, std)
            if module.bias is not None:
                fill_unless_loaded(module.bias, 0.0)
        elif isinstance(module, nn.Embedding):
            if not _loaded(module.weight):
                module.weight.normal_(mean=0.0, std=std)
                if module.padding_idx is not None:
                    module.weight[module.padding_idx].zero_()
        elif isinstance(module, nn.LayerNorm):
            fill_unless_loaded(module.weight, 1.0)
            fill_unless_loaded(module.bias, 0.0)
        elif isinstance(getattr(module, "decoder", None), nn.Linear) and isinstance(module.bias, nn.Parameter):
            # The stand-alone output bias of masked-LM prediction heads.
            fill_unless_loaded(module.bias, 0.0)
        if isinstance(getattr(module, "position_ids", None), torch.Tensor):
            positions = torch.arange(module.position_ids.shape[-1], device=module.position_ids.device)
            copy_unless_loaded(module.position_ids, positions.expand_as(module.position_ids))

    if not hasattr(PreTrainedModel, "activation_checkpointing_enable"):
        # Layers return routing decisions (balance loss included) next to the hidden states, and reentrant
        # checkpointing would detach them: non-reentrant by default. transformers 5 (which renames the
        # method ``activation_checkpointing_enable``) already defaults to it; 4.57 does not.
        def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs: dict | None = None) -> None:
            kwargs = {"use_reentrant": False, **(gradient_checkpointing_kwargs or {})}
            super().gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)

    def check_inputs(
        self,
        input_ids: torch.Tensor | None,
        inputs_embeds: torch.Tensor | None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
    ) -> None:
        """Fail with a clear message instead of a shape error or a bare ``IndexError`` deep inside ``forward``.

        The value checks read the ids once (a reduction each); they are skipped while tracing for
        ``torch.compile`` / export, where data-dependent checks would break the graph. On CPU the ids are read on
        the host, so the message can name the values found. On an accelerator reading them would synchronise the
        device with the host at every call: the check is queued on the device instead (``torch._assert_async``)
        and fails the run with the same message, naming the range, when the device reaches it.
        """
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("Pass exactly one of `input_ids` and `inputs_embeds`.")
        shape = input_ids.shape if input_ids is not None else inputs_embeds.shape[:-1]
        if len(shape) != 2:
            raise ValueError(f"Inputs must be [batch, sequence], got shape {tuple(shape)}.")
        if shape[0] == 0 or shape[1] == 0:
            raise ValueError(
                f"Inputs of shape {tuple(shape)} hold no token: every sequence needs at least one token (a tokenizer "
                "adds [CLS] and [SEP] even to an empty text)."
            )
        limit = self.config.max_position_embeddings
        if shape[1] > limit:
            raise ValueError(
                f"Sequence length {shape[1]} exceeds `max_position_embeddings` ({limit}) of this model; "
                f"truncate inputs to at most {limit} tokens."
            )
        if torch.compiler.is_compiling() or torch.jit.is_tracing():
            return
        for name, ids, size_field in (
            ("input_ids", input_ids, "vocab_size"),
            ("token_type_ids", token_type_ids, "type_vocab_size"),
            ("position_ids", position_ids, "max_position_embeddings"),
        ):
            if ids is None or ids.numel() == 0:
                continue
            size = getattr(self.config, size_field)
            if ids.device.type != "cpu":
                torch._assert_async(
                    ((ids >= 0) & (ids < size)).all(),
                    f"`{name}` must lie in [0, {size}) (the model's `{size_field}`): is the tokenizer the one this "
                    "model was trained with?",
                )
                continue
            low, high = int(ids.min()), int(ids.max())
            if low < 0 or high >= size:
                raise ValueError(
                    f"`{name}` must lie in [0, {size}) (the model's `{size_field}`), got values from {low} to "
                    f"{high}: is the tokenizer the one this model was trained with?"
                )


def tied_masked_lm_weights(base_model_prefix: str) -> dict[str, str]:
    """transformers' tied-weights mapping (target → source) for a masked-LM decoder tied to the word
    embeddings; transformers 5 ties from this mapping, 4.57 reads its keys."""
    return {
        "cls.predictions.decoder.weight": f"{base_model_prefix}.embeddings.word_embeddings.weight",
        "cls.predictions.decoder.bias": "cls.predictions.bias",
    }
