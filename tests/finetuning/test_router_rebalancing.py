"""Re-balancing a MoE model's routers on the task's text (``finetuning/router_rebalancing.py``,
``compact-bert finetune --rebalance_routers``)."""

from __future__ import annotations

import pytest
import torch

from compact_bert.finetuning.router_rebalancing import balancing_bias, rebalance_routers
from tests.conftest import VOCAB_SIZE, tiny_classifier


def _batches(count: int = 4) -> list[dict]:
    generator = torch.Generator().manual_seed(3)
    batches = []
    for _ in range(count):
        input_ids = torch.randint(1, VOCAB_SIZE, (8, 16), generator=generator)
        attention_mask = torch.ones_like(input_ids)
        attention_mask[:3, 10:] = 0  # padding takes no share
        batches.append({"input_ids": input_ids, "attention_mask": attention_mask})
    return batches


def _largest_share(model, batches) -> list[float]:
    """The model's own per-block expert load (what it reports in ``expert_load``), pooled over the batches."""
    with torch.no_grad():
        loads = [
            model(**batch, output_router_stats=True).expert_load * batch["attention_mask"].sum() for batch in batches
        ]
    pooled = torch.stack(loads).sum(0)
    return (pooled / pooled.sum(-1, keepdim=True)).max(-1).values.tolist()


def test_bias_evens_out_a_skewed_top1_load():
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(4000, 4, generator=generator, dtype=torch.float64)
    logits[:, 0] += 2.0  # expert 0 wins most tokens
    before = torch.bincount(logits.argmax(-1), minlength=4).max() / 4000
    bias = balancing_bias(logits)
    after = torch.bincount((logits + bias).argmax(-1), minlength=4).max() / 4000
    assert before > 0.6 and after < 0.27


def test_rebalanced_model_spreads_its_tokens_and_keeps_what_its_routers_learned():
    model = tiny_classifier("minimoe")
    routers = [layer.moe.router.gate for layer in model.minimoe.encoder.layer]
    for gate in routers:  # a router that learned to prefer expert 2 (on other text)
        gate.bias.data[2] += 3.0
    weights = [gate.weight.detach().clone() for gate in routers]
    batches = _batches()
    assert min(_largest_share(model, batches)) > 0.8
    record = rebalance_routers(model, batches)
    shares = _largest_share(model, batches)
    assert max(shares) < 0.35
    assert [entry["max_expert_share_after"] for entry in record] == pytest.approx(shares, abs=1e-4)
    assert all(torch.equal(gate.weight, weight) for gate, weight in zip(routers, weights))
    assert not model.training  # the mode it came in


def test_a_model_without_learned_routers_is_refused():
    with pytest.raises(ValueError, match="no learned router"):
        rebalance_routers(tiny_classifier("minimoe_hash"), _batches(1))
    with pytest.raises(ValueError, match="no learned router"):
        rebalance_routers(tiny_classifier("minilm_dense"), _batches(1))


def _finetune(tmp_path, model: str, *extra: str) -> dict:
    import json

    from compact_bert.cli import finetune_command
    from tests.conftest import shared_data

    data = shared_data("sst2")
    arguments = [
        "--model_name_or_path",
        model,
        "--task_name",
        "sst2",
        "--train_file",
        str(data / "train.tsv"),
        "--validation_file",
        str(data / "validation.tsv"),
        "--max_train_samples",
        "32",
        "--max_eval_samples",
        "32",
        "--num_train_epochs",
        "1",
        "--report_to",
        "none",
        "--use_cpu",
        "true",
        "--disable_tqdm",
        "true",
        "--output_dir",
        str(tmp_path / "run"),
        "--rebalance_routers",
        "true",
        *extra,
    ]
    finetune_command.finetune_from_flags(arguments)
    return json.loads((tmp_path / "run" / "run_summary.json").read_text())


def _skewed_folder(tmp_path):
    """A MiniMoE classifier whose routers learned (on other text) to send nearly everything to expert 2."""
    from transformers import AutoModelForSequenceClassification

    from compact_bert.configuration import preset_config
    from compact_bert.distillation.data import default_tokenizer
    from compact_bert.training.compat import save_tokenizer

    model = AutoModelForSequenceClassification.from_config(preset_config("minimoe-3l-96h", num_labels=2))
    for layer in model.minimoe.encoder.layer:
        layer.moe.router.gate.bias.data[2] += 5.0
    folder = tmp_path / "skewed"
    model.save_pretrained(folder)
    save_tokenizer(default_tokenizer(), folder)
    return str(folder)


def test_finetune_rebalances_before_training_and_records_it(tmp_path, capsys):
    summary = _finetune(tmp_path, _skewed_folder(tmp_path))
    record = summary["rebalanced_routers"]
    assert len(record) == 3  # one learned router per MoE block
    assert all(entry["max_expert_share_before"] > 0.9 and entry["max_expert_share_after"] < 0.4 for entry in record)
    assert "Routers re-balanced on the training text" in capsys.readouterr().out


def test_rebalanced_routers_are_not_left_out_of_an_adapter(tmp_path):
    with pytest.raises(SystemExit, match="--rebalance_routers with --peft: the adapter does not carry"):
        _finetune(tmp_path, _skewed_folder(tmp_path), "--peft", "lora")


def test_finetune_refuses_rebalancing_a_dense_model(tmp_path):
    with pytest.raises(SystemExit, match="--rebalance_routers: minilm-3l-96h has no learned MoE router"):
        _finetune(tmp_path, "minilm-3l-96h", "--init_from_teacher", "none")
