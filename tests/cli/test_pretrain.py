"""`compact-bert pretrain`: a few steps of MLM+NSP on a preset, saved and loadable, with held-out accuracy."""

from __future__ import annotations

import json

import transformers

from compact_bert.modeling import IBBertForPreTraining, MoEBertForMaskedLM
from tests.distillation.cli_helpers import QUICK_DATA, QUIET, refusal_in_this_process, run_cli

SMALL_IB_BERT = json.dumps(
    {
        "num_hidden_layers": 2,
        "hidden_size": 32,
        "intra_bottleneck_size": 64,
        "intermediate_size": 64,
        "embedding_size": 16,
        "max_position_embeddings": 64,
    }
)


def test_pretrain_ib_bert_with_nsp(tmp_path):
    result = run_cli(
        [
            "pretrain",
            "--preset",
            "ib-bert-large",
            "--model_overrides",
            SMALL_IB_BERT,
            "--output_dir",
            str(tmp_path),
            "--max_steps",
            "40",
            "--learning_rate",
            "3e-3",
            "--per_device_train_batch_size",
            "8",
            *QUICK_DATA,
            *QUIET,
        ]
    )
    summary = json.loads((tmp_path / "run_summary.json").read_text())
    # The held-out text is the training text here, so 40 steps learn its frequent tokens (about 7% of masked
    # tokens; an untrained model scores ~0 over 30522 ids), while counting unmasked positions, which the model
    # sees, would push the score far above 0.5.
    assert summary["optimizer_steps"] == 40 and 0.03 <= summary["eval_masked_token_accuracy"] <= 0.5
    assert "Finished in" in result.stdout and "eval_loss" in result.stdout  # the one-line summary
    model = transformers.AutoModelForPreTraining.from_pretrained(tmp_path)
    assert isinstance(model, IBBertForPreTraining) and model.config.num_hidden_layers == 2


def test_pretrain_moe_bert_uses_mlm_only(tmp_path):
    overrides = json.dumps(
        {
            "num_hidden_layers": 1,
            "hidden_size": 32,
            "num_attention_heads": 2,
            "intermediate_size": 64,
            "num_experts": 4,
        }
    )
    run_cli(
        [
            "pretrain",
            "--preset",
            "moe-bert-small",
            "--model_overrides",
            overrides,
            "--output_dir",
            str(tmp_path),
            "--max_steps",
            "2",
            "--per_device_train_batch_size",
            "4",
            *QUICK_DATA,
            *QUIET,
        ]
    )
    assert isinstance(transformers.AutoModelForMaskedLM.from_pretrained(tmp_path), MoEBertForMaskedLM)


def test_pretrain_rejects_bad_presets_and_overrides(tmp_path):
    for arguments, message in (
        (["--preset", "bert-gigantic"], "Unknown preset 'bert-gigantic'"),
        (["--model_overrides", '{"num_experts": 0}', "--preset", "moe-bert-small"], "`num_experts`"),
        (["--model_overrides", "{not json"], "must be a JSON object"),
    ):
        refusal = refusal_in_this_process(["pretrain", "--output_dir", str(tmp_path), *arguments])
        assert message in refusal, refusal[-2000:]
