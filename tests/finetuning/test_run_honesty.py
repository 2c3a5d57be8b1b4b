"""Fine-tuning runs say what their numbers are: early stops with their reason, dev-selected checkpoints, collapsed
classifiers."""

from __future__ import annotations

import json

from compact_bert.cli.main import main
from compact_bert.finetuning.bundled_data import bundled_sst2_files
from compact_bert.finetuning.finetune_config import FinetuneConfig
from compact_bert.finetuning.run_honesty import reported_checkpoint, single_class_warning

TINY = '{"num_hidden_layers": 1, "hidden_size": 32, "num_attention_heads": 4, "intermediate_size": 64}'


def test_reported_checkpoint_and_single_class_warning(tmp_path):
    selected = FinetuneConfig(output_dir=str(tmp_path), metric_for_best_model="accuracy")
    final = FinetuneConfig(
        output_dir=str(tmp_path), eval_strategy="no", save_strategy="no", load_best_model_at_end=False
    )
    assert "selected on that data" in reported_checkpoint(selected)
    assert reported_checkpoint(final) == "final model (no selection on the dev set)"
    assert "one class for every dev example" in single_class_warning({"eval_majority_prediction_share": 1.0})
    assert single_class_warning({"eval_majority_prediction_share": 0.62}) is None


def test_an_early_stop_and_a_collapsed_classifier_are_reported(tmp_path, capsys):
    files = bundled_sst2_files()
    folder = tmp_path / "data"
    folder.mkdir()
    for split, rows in (("train", 64), ("validation", 48)):
        lines = files[split].read_text(encoding="utf-8").splitlines()
        (folder / f"{split}.tsv").write_text("\n".join(lines[: rows + 1]) + "\n", encoding="utf-8")
    output = tmp_path / "run"
    # A learning rate of 0 never improves the dev metric: patience 1 stops after the second evaluation; the untrained
    # head answers one class.
    assert (
        main(
            [
                "finetune",
                "--model_name_or_path",
                "minilm-3l-96h",
                "--model_overrides",
                TINY,
                "--task_name",
                "sst2",
                "--train_file",
                str(folder / "train.tsv"),
                "--validation_file",
                str(folder / "validation.tsv"),
                "--output_dir",
                str(output),
                "--learning_rate",
                "0",
                "--num_train_epochs",
                "5",
                "--early_stopping_patience",
                "1",
                "--per_device_train_batch_size",
                "32",
                "--report_to",
                "none",
                "--disable_tqdm",
                "true",
                "--dataloader_pin_memory",
                "false",
                "--seed",
                "1",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    summary = json.loads((output / "run_summary.json").read_text())
    assert summary["stopped_early"]["epoch"] == 2.0 and summary["stopped_early"]["max_steps"] == 10
    assert "Early stopping at epoch 2.0 (step 4 of 10): " in out and "has not improved for 1 evaluations" in out
    assert "selected on that data" in summary["reported_checkpoint"]
    if summary["eval_majority_prediction_share"] >= 0.999:
        assert summary["single_class_predictions"] is True and "WARNING: The reported model predicts one class" in out
