"""The models work with an ordinary ``transformers.Trainer`` script, as users write them."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModelForSequenceClassification, Trainer, TrainingArguments

from tests.conftest import VOCAB_SIZE, tiny_configs


class _TinyDataset(torch.utils.data.Dataset):
    def __init__(self, size: int = 12, seq: int = 8):
        generator = torch.Generator().manual_seed(3)
        self.input_ids = torch.randint(1, VOCAB_SIZE, (size, seq), generator=generator)
        self.labels = torch.randint(0, 2, (size,), generator=generator)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        return {"input_ids": self.input_ids[index], "labels": self.labels[index]}


@pytest.mark.parametrize("config_id", ["minimoe", "moe_bert", "mobilebert"])
def test_compute_metrics_receives_logits_not_routing_outputs(tmp_path, config_id):
    """A user's ``logits, labels = eval_pred`` must get the logits array: MoE heads also return routing
    diagnostics, which the config lists in ``keys_to_ignore_at_inference`` as transformers' MoE models do."""
    model = AutoModelForSequenceClassification.from_config(tiny_configs()[config_id])
    seen = {}

    def compute_metrics(eval_pred):
        logits, labels = eval_pred
        seen["shape"] = np.asarray(logits).shape
        return {"accuracy": float((np.argmax(logits, axis=-1) == labels).mean())}

    arguments = TrainingArguments(
        output_dir=str(tmp_path), per_device_eval_batch_size=4, report_to=[], use_cpu=True, disable_tqdm=True
    )
    dataset = _TinyDataset()
    metrics = Trainer(model=model, args=arguments, eval_dataset=dataset, compute_metrics=compute_metrics).evaluate()
    assert seen["shape"] == (12, 2)
    with torch.no_grad():
        logits = model.eval()(input_ids=dataset.input_ids).logits
    assert metrics["eval_accuracy"] == pytest.approx(float((logits.argmax(-1) == dataset.labels).float().mean()))
