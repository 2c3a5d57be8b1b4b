"""The card every command writes, parsed back with ``huggingface_hub`` and checked against the run's own facts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import transformers
import yaml
from huggingface_hub import ModelCard

from compact_bert.model_cards import LatencyReport, RuntimeLatency, build_model_card, read_latency, write_latency
from compact_bert.model_cards.model_card import portable_command_line
from compact_bert.modeling import AUTO_CLASSES_BY_CONFIG
from compact_bert.modeling.model_stats import count_parameters, estimate_flops
from tests.conftest import tiny_configs

NOT_RESULTS = {"eval_runtime", "eval_samples_per_second", "eval_steps_per_second"}


def _results(card: ModelCard) -> dict[str, float]:
    return {result.metric_name: result.metric_value for result in card.data.eval_results or []}


def _summary(folder) -> dict:
    return json.loads((folder / "run_summary.json").read_text())


def test_distilled_student_card_states_the_run(main_job_run):
    student, _ = main_job_run
    card = ModelCard.load(student / "README.md")
    summary = _summary(student)
    data = card.data
    assert (data.license, data.library_name, data.pipeline_tag) == ("apache-2.0", "transformers", "feature-extraction")
    assert {"arxiv:2305.12129", "minimoe", "mixture-of-experts", "knowledge-distillation"} <= set(data.tags)
    assert data.base_model == "sentence-transformers/all-MiniLM-L6-v2" and data.datasets == ["Salesforce/wikitext"]
    expected = {
        key: value
        for key, value in summary.items()
        if key.startswith("eval_") and key not in NOT_RESULTS and "_block" not in key and isinstance(value, float)
    }
    # the model-index holds task metrics only: a distillation run's losses stay in the card's text
    assert _results(card) == {key: value for key, value in expected.items() if "loss" not in key}
    assert "eval_loss" in expected and f"| eval_loss | {expected['eval_loss']} |" in card.text
    assert {result.dataset_type for result in card.data.eval_results or []} <= {"Salesforce/wikitext"}
    model = transformers.AutoModel.from_pretrained(student)
    total, active = count_parameters(model)
    assert (total, active) == (summary["student_total_params"], summary["student_active_params_per_token"])
    assert f"Parameters (base model, without the task head): {total:,}" in card.text
    assert f"Active parameters per token: {active:,}" in card.text
    assert f"{estimate_flops(model.config, 128) / 1e9:.3f} G" in card.text
    assert summary["command_line"].startswith("compact-bert distill minimoe --student_overrides")
    assert portable_command_line(summary["command_line"]) in card.text and "- Optimizer steps: 2" in card.text
    # The card is published: no local absolute path of the run (its --output_dir, corpus) appears anywhere in it.
    assert str(student.parent) not in card.text and str(Path.home()) + "/" not in card.text
    for block in range(model.config.num_hidden_layers):
        share = summary[f"eval_block{block}_max_expert_share"]
        assert f"| {block} | {share} | {summary[f'eval_block{block}_min_expert_share']} |" in card.text
    assert "Not measured: this folder has no `latency.json`" in card.text


def test_finetuned_card_has_the_dev_results_in_model_index(main_job_run):
    _, finetuned = main_job_run
    card = ModelCard.load(finetuned / "README.md")
    summary = _summary(finetuned)
    assert card.data.pipeline_tag == "text-classification" and card.data.datasets == ["nyu-mll/glue"]
    # The student folder is local: its own card names the Hub model it comes from.
    assert card.data.base_model == "sentence-transformers/all-MiniLM-L6-v2"
    results = _results(card)
    assert results["eval_accuracy"] == summary["eval_accuracy"] and not any("loss" in key for key in results)
    assert "is a local student (not on the Hub): distilled from `all-MiniLM-L6-v2` for 2 optimizer steps" in card.text
    from huggingface_hub.repocard_data import model_index_to_eval_results

    metadata = yaml.safe_load((finetuned / "README.md").read_text().split("---")[1])
    _name, parsed = model_index_to_eval_results(metadata["model-index"])  # the Hub's own parser of the model-index
    assert {result.metric_name: result.metric_value for result in parsed} == results
    accuracy = next(result for result in card.data.eval_results if result.metric_type == "accuracy")
    assert (accuracy.dataset_type, accuracy.dataset_config, accuracy.dataset_split) == (
        "nyu-mll/glue",
        "sst2",
        "validation[:40]",
    )
    assert accuracy.task_type == "text-classification"
    assert "AutoModelForSequenceClassification.from_pretrained" in card.text


def _saved_tiny_model(folder, config_id="minimoe", auto_name="AutoModelForSequenceClassification"):
    config = tiny_configs()[config_id]
    AUTO_CLASSES_BY_CONFIG[type(config)][auto_name](config).save_pretrained(folder)
    return folder


def test_card_reports_latency_and_exports_written_next_to_the_weights(tmp_path):
    folder = _saved_tiny_model(tmp_path / "model")
    (folder / "onnx").mkdir()
    (folder / "onnx" / "model.onnx").write_bytes(b"onnx stand-in")  # only its name reaches the card
    write_latency(
        folder,
        LatencyReport(
            128,
            1,
            "2-core CPU",
            {"eager": RuntimeLatency(12.5, 13.25), "onnx": RuntimeLatency(4.0, file="onnx/model.onnx")},
        ),
    )
    card = build_model_card(folder, "user/tiny")
    assert "| eager | float32 | 12.50 | 13.25 |  |" in card.text
    assert "| onnx | float32 | 4.00 |  | onnx/model.onnx |" in card.text
    assert "- `onnx/model.onnx`" in card.text
    assert 'from_pretrained("user/tiny", trust_remote_code=True)' in card.text
    # No run summary: the card says so instead of inventing a recipe or results.
    assert "Not recorded" in card.text and card.data.eval_results is None
    assert read_latency(folder).runtimes["onnx"].file == "onnx/model.onnx"


@pytest.mark.parametrize(
    "content, field",
    [
        (
            {"format_version": 1, "sequence_length": "128", "batch_size": 1, "device": "cpu", "runtimes": {}},
            "sequence_length",
        ),
        (
            {"format_version": 1, "sequence_length": 128, "batch_size": 1, "device": "cpu", "runtimes": {"onnx": {}}},
            "runtimes.onnx.median_ms",
        ),
        ({"sequence_length": 128}, "format_version"),
    ],
)
def test_a_malformed_latency_file_names_the_field(tmp_path, content, field):
    (tmp_path / "latency.json").write_text(json.dumps(content))
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        read_latency(tmp_path)


def test_convert_writes_a_card_naming_its_source(tmp_path):
    from compact_bert.cli.main import main

    source = _saved_tiny_model(tmp_path / "compact", "mobilebert", "AutoModelForMaskedLM")
    assert main(["convert", str(source), str(tmp_path / "converted")]) == 0
    card = ModelCard.load(tmp_path / "converted" / "README.md")
    assert card.data.pipeline_tag == "fill-mask" and "arxiv:2004.02984" in card.data.tags
    assert "Converted one to one from `compact`" in card.text


@pytest.mark.parametrize(
    "summary, base_model",
    [
        (
            {
                "teacher": "all-MiniLM-L6-v2",
                "teacher_initialization": {
                    "teacher": "all-MiniLM-L6-v2",
                    "layer_map": [1, 3, 5],
                    "hidden_channels": "all",
                },
            },
            "sentence-transformers/all-MiniLM-L6-v2",
        ),
        ({"teacher": "all-MiniLM-L6-v2"}, None),  # distilled from random weights: taught, not copied
        (
            {
                "model_name_or_path": "minimoe-4l-192h",
                "task_distillation": {"teacher": "/runs/teacher", "alpha": 0.5, "temperature": 2.0},
            },
            None,
        ),
        ({"model_name_or_path": "google-bert/bert-base-uncased"}, "google-bert/bert-base-uncased"),
        ({"model_name_or_path": "/home/alice/checkpoints/model"}, None),
    ],
    ids=["teacher-initialized", "random-init-student", "random-init-task-distilled", "hub-fine-tune", "local-path"],
)
def test_base_model_is_where_the_weights_came_from(tmp_path, summary, base_model):
    folder = _saved_tiny_model(tmp_path / "model", auto_name="AutoModel")
    (folder / "run_summary.json").write_text(json.dumps(summary))
    card = build_model_card(folder, "user/tiny")
    assert card.data.base_model == base_model
    if summary.get("teacher"):  # the teacher is named in the recipe either way, by its Hub id
        assert "- Teacher: `sentence-transformers/all-MiniLM-L6-v2`" in card.text
    assert "/home/alice" not in str(card)


def test_a_local_random_init_student_passes_no_base_model_to_its_fine_tune(tmp_path):
    student = _saved_tiny_model(tmp_path / "student", auto_name="AutoModel")
    (student / "run_summary.json").write_text(json.dumps({"teacher": "all-MiniLM-L6-v2", "command_line": "distill"}))
    (student / "README.md").write_text(str(build_model_card(student, "user/student")))
    fine_tuned = _saved_tiny_model(tmp_path / "fine-tuned")
    (fine_tuned / "run_summary.json").write_text(json.dumps({"model_name_or_path": str(student)}))
    card = build_model_card(fine_tuned, "user/fine-tuned")
    assert card.data.base_model is None
    assert "`student`, is a local student (not on the Hub): distilled from `all-MiniLM-L6-v2`" in card.text


def test_a_plain_bert_fine_tuned_from_the_packaged_teacher_names_it_and_needs_no_remote_code(tmp_path):
    """The main job's teacher card: a plain BertForSequenceClassification fine-tuned from the packaged folder (its
    summary records the installed path) names all-MiniLM-L6-v2 by its Hub id as base model, is not tagged
    custom_code, and loads without trust_remote_code; a student initialized from that local folder inherits the base
    model through its card."""
    from compact_bert.distillation.data import packaged_teacher_dir
    from compact_bert.model_cards.folder_facts import PACKAGED_TEACHER_HUB_ID

    teacher = tmp_path / "teacher-sst2"
    config = transformers.BertConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37, num_labels=2
    )
    transformers.BertForSequenceClassification(config).save_pretrained(teacher)
    (teacher / "run_summary.json").write_text(json.dumps({"model_name_or_path": str(packaged_teacher_dir())}))
    card = build_model_card(teacher)
    card.save(teacher / "README.md")
    assert card.data.base_model == PACKAGED_TEACHER_HUB_ID and "custom_code" not in card.data.tags
    assert "trust_remote_code" not in card.text and "standard transformers architecture" in card.text
    assert f"- Fine-tuned from: `{PACKAGED_TEACHER_HUB_ID}`" in card.text

    student = tmp_path / "student-sst2"
    student_config = tiny_configs()["minimoe"]
    AUTO_CLASSES_BY_CONFIG[type(student_config)]["AutoModelForSequenceClassification"](student_config).save_pretrained(
        student
    )
    initialization = {"teacher": str(teacher), "layer_map": [1], "hidden_channels": "all"}
    (student / "run_summary.json").write_text(json.dumps({"teacher_initialization": initialization}))
    student_card = build_model_card(student)
    assert student_card.data.base_model == PACKAGED_TEACHER_HUB_ID and "custom_code" in student_card.data.tags
    assert "trust_remote_code=True" in student_card.text


def test_the_recipe_names_a_one_layer_students_shape_in_the_singular(tmp_path):
    """A student cut to 1 layer and 1 head (``--max_latency_ratio`` can choose 1 layer) reads "1 layer of 32
    channels, 1 head", not "1 layers ... 1 heads"."""
    student = tmp_path / "student"
    config = transformers.BertConfig(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=1, intermediate_size=64, num_labels=2
    )
    transformers.BertForSequenceClassification(config).save_pretrained(student)
    initialization = {"teacher": str(tmp_path / "teacher"), "layer_map": [3], "hidden_channels": "all"}
    summary = {"model_name_or_path": "minilm-3l-384h", "teacher_initialization": initialization}
    (student / "run_summary.json").write_text(json.dumps(summary))
    card = build_model_card(student)
    assert "as 1 layer of 32 channels, 1 head and 64 FFN neurons" in card.text


@pytest.mark.parametrize(
    ("alpha", "words"),
    [
        (0.5, "0.5 x labels + 0.5 x its soft targets at temperature 2.0"),
        (0.0, "its soft targets at temperature 2.0 alone"),  # a tiny student narrowed to 288 channels
        (1.0, "the labels alone on the training examples"),  # a regression: the teacher labels only the copies
    ],
)
def test_the_card_says_what_the_student_learned_from(tmp_path, alpha, words):
    student = tmp_path / "student"
    config = transformers.BertConfig(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=1, intermediate_size=64, num_labels=2
    )
    transformers.BertForSequenceClassification(config).save_pretrained(student)
    distillation = {"teacher": str(tmp_path / "teacher"), "alpha": alpha, "temperature": 2.0, "augment_copies": 4}
    (student / "run_summary.json").write_text(json.dumps({"task_distillation": distillation}))
    card = build_model_card(student)
    assert f"- Task distillation from the fine-tuned teacher `teacher`: {words}, over the training set" in card.text


def test_a_budget_record_without_the_inputs_length_still_makes_a_card(tmp_path):
    """A folder sized by ``--max_latency_ratio`` before the record kept the timed inputs' length: its card says the
    budget and the ratio, and names no length it does not know."""
    student = tmp_path / "student"
    config = transformers.BertConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=1, intermediate_size=64, num_labels=2
    )
    transformers.BertForSequenceClassification(config).save_pretrained(student)
    record = {"num_hidden_layers": 2, "narrowed": None, "max_latency_ratio": 0.5, "teacher_ms": 4.0}
    record["latency_ratio_by_depth"] = {"1": 0.25, "2": 0.45}
    (student / "run_summary.json").write_text(json.dumps({"depth_by_latency_budget": record}))
    text = build_model_card(student).text
    assert "- Sized by `--max_latency_ratio 0.5`: timed against the teacher with random weights before" in text
    assert "this shape ran at 0.45x its latency (teacher 4.0 ms; compact-bert's eager path, on the machine" in text
