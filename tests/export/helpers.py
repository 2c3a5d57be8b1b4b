"""Tiny saved model folders for the export tests, and what "differently routed" means for them."""

from __future__ import annotations

import torch
import transformers

from compact_bert.export.tasks import EXPORT_TASKS, GRAPH_INPUTS
from tests.conftest import tiny_configs

# Which task each tiny family is exported for in the one-export-per-family tests: together they cover every task.
FAMILY_TASKS = {
    "ib_bert": "question-answering",
    "mobilebert": "text-classification",
    "minimoe": "token-classification",
    "minimoe_moe_attention": "fill-mask",
    "minimoe_hash": "text-classification",
    "moe_bert": "feature-extraction",
}


def realistic_nonorm_scales(model: torch.nn.Module) -> None:
    """Give MobileBERT's NoNorm layers the scales trained checkpoints have (weights up to ~30, biases ~±10),
    which make activations reach the thousands: the regime where exports of transformers' MobileBERT differ by
    up to 34 (optimum #1027) while random weights (scale 1, bias 0) look fine."""
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for module in model.modules():
            if type(module).__name__ == "NoNorm":
                module.weight.copy_(torch.rand(module.weight.shape, generator=generator) * 30 + 0.5)
                module.bias.copy_(torch.randn(module.bias.shape, generator=generator) * 10)


def save_tiny_model(config_id: str, task: str, folder, trained_scales: bool = True) -> torch.nn.Module:
    """A tiny ``config_id`` model with the head of ``task`` saved in ``folder`` (with a BERT tokenizer)."""
    config = tiny_configs()[config_id]
    if task == "token-classification" or task == "text-classification":
        config.num_labels = 3
    model = getattr(transformers, EXPORT_TASKS[task].auto_class).from_config(config).eval()
    if trained_scales:
        realistic_nonorm_scales(model)
    model.save_pretrained(folder)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(config.vocab_size - 5)]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    transformers.BertTokenizer(str(folder / "vocab.txt")).save_pretrained(folder)
    return model


def constant_example(token_id: int = 5, batch: int = 2, seq: int = 8) -> dict:
    """An export example whose tokens all repeat one id: top-1 routers send it to very few experts."""
    input_ids = torch.full((batch, seq), token_id)
    return {
        "input_ids": input_ids,
        "attention_mask": torch.ones_like(input_ids),
        "token_type_ids": torch.zeros_like(input_ids),
    }


def varied_inputs(batch: int, seq: int, vocab: int, seed: int, pad_last_from: int | None = None) -> dict:
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, vocab, (batch, seq), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    if pad_last_from is not None:
        attention_mask[-1, pad_last_from:] = 0
        input_ids[-1, pad_last_from:] = 0
    token_type_ids = torch.zeros_like(input_ids)
    token_type_ids[:, seq // 2 :] = 1
    return {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}


def experts_reached_only_by(model_dir, probe: dict, example: dict) -> torch.Tensor:
    """Per MoE block and expert: whether ``probe`` routes real tokens there and ``example`` never does."""
    model = transformers.AutoModel.from_pretrained(model_dir).eval()
    with torch.no_grad():
        probe_load = model(**probe, output_router_stats=True).expert_load
        example_load = model(**example, output_router_stats=True).expert_load
    return (probe_load > 0) & (example_load == 0)


def onnxruntime_outputs(session, inputs: dict) -> dict:
    feeds = {name: inputs[name].numpy() for name in GRAPH_INPUTS}
    return dict(zip([output.name for output in session.get_outputs()], session.run(None, feeds)))
