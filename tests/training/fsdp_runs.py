"""The runs that ``test_fsdp.py`` compares: a MiniMoE relation distillation (frozen teacher), a fine-tune of a
MiniMoE sequence classifier and one of a MoE-BERT masked LM (its decoder tied to the embeddings and its bias aliased,
which FSDP must keep in one group), each built the same way unsharded (1 process, batch 2, 2 accumulation steps) and under
FSDP2 (2 processes, batch 2 each).

What makes the two comparable: the same seed and weights, dropout 0 (a step's dropout stream includes the process
index), and the same micro-batches: the seeded sampler gives process p batch 2k+p, and accumulation takes batches
2k and 2k+1, so the balance loss and the expert capacity see the same 2-example batches either way.
"""

from __future__ import annotations

import torch
import transformers
from transformers import TrainingArguments

from compact_bert.configuration import MiniMoEConfig, MoEBertConfig
from compact_bert.distillation.minimoe_config import MiniMoEDistillationConfig
from compact_bert.distillation.minimoe_trainer import MiniMoEDistillationTrainer
from compact_bert.finetuning.finetune_trainer import FinetuneTrainer
from compact_bert.modeling import MiniMoEForSequenceClassification, MiniMoEModel, MoEBertForMaskedLM

STEPS, SAVE_STEPS = 6, 3
# ``--fsdp``: 5.x takes a switch (its option strings are deprecated), 4.57 the sharding strategy.
FSDP = True if int(transformers.__version__.split(".")[0]) >= 5 else "full_shard"
SHAPE = {
    "hidden_size": 32,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "vocab_size": 128,
    "num_hidden_layers": 2,
    "max_position_embeddings": 32,
    "num_experts": 2,
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
}


def _arguments(config_class, output_dir: str, sharded: bool, state_dict_type: str, **fields):
    # ``sync_module_states`` broadcasts rank 0's weights from an accelerator device, which a CPU run has none of
    # (4.57 turns it on by default and Accelerate then refuses the plugin); every process builds the same weights.
    fsdp_config = {"version": 2, "state_dict_type": state_dict_type, "sync_module_states": False}
    fsdp = {"fsdp": FSDP, "fsdp_config": fsdp_config} if sharded else {}
    return config_class(
        output_dir=output_dir,
        max_steps=STEPS,
        per_device_train_batch_size=2,
        per_device_eval_batch_size=4,
        gradient_accumulation_steps=1 if sharded else 2,
        learning_rate=3e-3,
        warmup_steps=0,
        logging_steps=1,
        save_strategy="steps",
        save_steps=SAVE_STEPS,
        report_to="none",
        disable_tqdm=True,
        use_cpu=True,
        seed=0,
        **fsdp,
        **fields,
    )


def _examples(count: int, seed: int, labels: str | None) -> list[dict]:
    """``labels``: ``None``, ``"class"`` (one of two per row) or ``"tokens"`` (the ids themselves)."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, SHAPE["vocab_size"], (count, 16), generator=generator)
    classes = torch.randint(0, 2, (count,), generator=generator)
    rows = [{"input_ids": row, "attention_mask": torch.ones_like(row)} for row in ids]
    for row, label in zip(rows, classes, strict=True):
        if labels == "class":
            row["labels"] = label
        elif labels == "tokens":
            row["labels"] = row["input_ids"].clone()
    return rows


def minimoe_model(seed: int, model_class=MiniMoEModel, **fields):
    torch.manual_seed(seed)
    return model_class(MiniMoEConfig(**SHAPE, **fields))


def distillation_trainer(output_dir: str, sharded: bool, state_dict_type: str = "SHARDED_STATE_DICT"):
    arguments = _arguments(
        MiniMoEDistillationConfig,
        output_dir,
        sharded,
        state_dict_type,
        num_relation_heads=2,
        relation_weight=100.0,
    )
    return MiniMoEDistillationTrainer(
        model=minimoe_model(1),
        teacher=minimoe_model(0),
        args=arguments,
        train_dataset=_examples(64, 1, labels=None),
        eval_dataset=_examples(8, 2, labels=None),
    )


def finetune_trainer(output_dir: str, sharded: bool, state_dict_type: str = "FULL_STATE_DICT"):
    return FinetuneTrainer(
        model=minimoe_model(3, MiniMoEForSequenceClassification, num_labels=2),
        args=_arguments(TrainingArguments, output_dir, sharded, state_dict_type),
        train_dataset=_examples(64, 1, labels="class"),
        eval_dataset=_examples(8, 2, labels="class"),
    )


def masked_lm_trainer(output_dir: str, sharded: bool, state_dict_type: str = "FULL_STATE_DICT"):
    torch.manual_seed(4)
    return FinetuneTrainer(
        model=MoEBertForMaskedLM(MoEBertConfig(**SHAPE)),
        args=_arguments(TrainingArguments, output_dir, sharded, state_dict_type),
        train_dataset=_examples(64, 1, labels="tokens"),
        eval_dataset=_examples(8, 2, labels="tokens"),
    )


def train_losses(trainer) -> dict[int, float]:
    return {entry["step"]: entry["loss"] for entry in trainer.state.log_history if "loss" in entry}
