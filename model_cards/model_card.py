"""Render a model folder's card (its ``README.md``) with ``huggingface_hub``'s card API.

The YAML metadata is what the Hub indexes and validates (license, library, tags with the paper's arXiv id, datasets,
base model, pipeline tag, and ``model-index`` with the evaluation results the folder was measured on); the body is
for people (architecture, size, latency, the recipe that produced the model, routing, limitations, citation).
Every fact comes from ``folder_facts.read_folder_facts``; rendering is offline (``card.validate()`` needs the
network and is left to the Hub, which validates on upload).
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import shlex
from importlib import resources
from pathlib import Path

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from ..configuration.shape_text import describe_shape
from ..evaluation.sts import is_sts_benchmark_dev
from ..training.atomic_files import write_text_atomically
from .folder_facts import (
    FLOPS_SEQUENCE_LENGTH,
    GLUE_HUB_ID,
    WIKITEXT_HUB_ID,
    FolderFacts,
    is_local_dataset,
    model_reference,
    read_folder_facts,
)

__all__ = ["LICENSE", "MODEL_CARD_FILE", "build_model_card", "pipeline_tag", "write_model_card"]

MODEL_CARD_FILE = "README.md"
LICENSE = "apache-2.0"  # the license of compact-bert's code and of the weights it produces (pyproject.toml)
TEMPLATE = "model_card_template.md"
# Head class suffix → (pipeline tag, Auto class a user loads it with).
_HEADS = (
    ("ForSequenceClassification", "text-classification", "AutoModelForSequenceClassification"),
    ("ForTokenClassification", "token-classification", "AutoModelForTokenClassification"),
    ("ForQuestionAnswering", "question-answering", "AutoModelForQuestionAnswering"),
    ("ForMaskedLM", "fill-mask", "AutoModelForMaskedLM"),
    ("ForPreTraining", "fill-mask", "AutoModelForPreTraining"),
)
_ARCHITECTURE_FIELDS = (
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "true_hidden_size",
    "embedding_size",
    "num_feedforward_networks",
    "num_experts",
    "num_attention_experts",
    "router_type",
    "capacity_factor",
    "vocab_size",
    "max_position_embeddings",
)
_DATASET_LICENSES = {
    WIKITEXT_HUB_ID: "WikiText-2 (Wikipedia text): CC BY-SA 3.0",
    GLUE_HUB_ID: "GLUE SST-2 (Stanford Sentiment Treebank): research use, no separate licence (the Hub lists it as unknown)",
}


def _head(facts: FolderFacts) -> tuple[str, str]:
    architecture = (getattr(facts.config, "architectures", None) or [""])[0]
    return next(
        ((tag, auto) for suffix, tag, auto in _HEADS if architecture.endswith(suffix)),
        ("feature-extraction", "AutoModel"),
    )


def pipeline_tag(facts: FolderFacts) -> str:
    return "sentence-similarity" if facts.is_sentence_embedding else _head(facts)[0]


STSB_HUB_ID = "sentence-transformers/stsb"


def code(text) -> str:
    """``text`` as inline code that nothing in it can close: one line, fenced by more backticks than it holds."""
    text = " ".join(str(text).split())
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    padding = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{padding}{text}{padding}{fence}"


def code_block(text, language: str = "") -> str:
    """``text`` as a fenced block whose fence is longer than any backtick run inside, so it cannot be closed early."""
    fence = "`" * max(3, max((len(run) for run in re.findall(r"`+", str(text))), default=0) + 1)
    return f"{fence}{language}\n{text}\n{fence}"


def portable_command_line(command: str) -> str:
    """``command`` with every local absolute path (``/home/me/data/train.tsv``, ``--output_dir=/tmp/x``) shortened to
    ``path/to/<its last component>``: a card is published, and a path says nothing to its readers but something
    about the machine it was made on."""
    try:
        words = shlex.split(command)
    except ValueError:  # not shell-quoted as recorded: shorten what looks like a path in the plain text
        return re.sub(r"(?<![\w.])(?:/|~/)[^\s'\"]+", lambda match: f"path/to/{Path(match.group(0)).name}", command)

    def portable(word: str) -> str:
        flag, equals, value = word.partition("=") if word.startswith("--") and "=" in word else ("", "", word)
        if value.startswith(("/", "~/")) and len(value) > 1:
            value = f"path/to/{Path(value).name}"
        return f"{flag}{equals}{value}" if equals else value

    return shlex.join(portable(word) for word in words)


def plain_text(text) -> str:
    """``text`` on one line with Markdown and HTML syntax escaped (a heading, a link, a tag stay literal)."""
    text = html.escape(" ".join(str(text).split()), quote=False)
    return re.sub(r"([\\`*_{}\[\]()#+!|~])", r"\\\1", text)


def _usage_code(facts: FolderFacts, model_id: str, auto_class: str, folder) -> str:
    """How a user loads the folder (a fenced Python block): sentence-transformers for an embedding model, the Auto
    class otherwise. The id is a Python string literal, whatever characters a folder name holds."""
    name = json.dumps(model_id)
    remote = ", trust_remote_code=True" if facts.has_remote_code else ""
    if facts.is_sentence_embedding:
        source = (
            "from sentence_transformers import SentenceTransformer\n\n"
            f"model = SentenceTransformer({name}{remote})\n"
            'embeddings = model.encode(["A man is playing a guitar.", "Someone plays an instrument."])\n'
            "similarity = model.similarity(embeddings, embeddings)"
        )
    else:
        source = (
            f"from transformers import {auto_class}, AutoTokenizer\n\n"
            f"model = {auto_class}.from_pretrained({name}{remote})\n"
            f"tokenizer = AutoTokenizer.from_pretrained({name}{_tokenizer_arguments(folder)})"
        )
    return code_block(source, "python")


def _dataset_label(name: str) -> str:
    """A Hub dataset id as it is; a local folder by its folder name only, marked local (never its path)."""
    return f"{Path(name).name} (local)" if is_local_dataset(name) else name


def _eval_dataset(facts: FolderFacts) -> dict:
    """``EvalResult`` dataset fields: the dev set of a fine-tuning, the held-out text of a (pre-)training run."""
    data, summary = facts.summary.get("data") or {}, facts.summary
    if summary.get("sts_file"):  # an embedding student, scored on an STS file
        name = Path(summary["sts_file"]).name
        if is_sts_benchmark_dev(summary["sts_file"]):  # the bundled (or shared) STS Benchmark dev set, any name
            return {"dataset_type": STSB_HUB_ID, "dataset_name": "STS Benchmark", "dataset_split": "validation"}
        return {"dataset_type": name, "dataset_name": name, "dataset_split": "evaluation"}
    if "corpus" in data:
        limit = data.get("max_eval_blocks")
        if data.get("dataset_name"):
            name = _dataset_label(data["dataset_name"])
            return {
                "dataset_type": name,
                "dataset_name": name,
                "dataset_config": data.get("dataset_config_name"),
                "dataset_split": "held-out",
            }
        if not data.get("eval_corpus"):
            split = f"test[:{limit} blocks of {data.get('block_size')} tokens]" if limit else "test"
            return {
                "dataset_type": WIKITEXT_HUB_ID,
                "dataset_name": "WikiText-2 (compact-bert's held-out slice)",
                "dataset_split": split,
            }
        names = ", ".join(Path(path).name for path in data["eval_corpus"])
        return {"dataset_type": names, "dataset_name": names, "dataset_split": "held-out"}
    task = summary.get("task_name") or data.get("task_name")
    limit = data.get("max_eval_samples")
    split = (data.get("validation_split") or "validation") + (f"[:{limit}]" if limit else "")
    if facts.datasets == [GLUE_HUB_ID]:
        return {
            "dataset_type": GLUE_HUB_ID,
            "dataset_name": f"GLUE {task.upper()}",
            "dataset_config": task,
            "dataset_split": split,
        }
    source = (
        _dataset_label(data["dataset_name"])
        if data.get("dataset_name")
        else Path(data.get("validation_file") or "dev set").name
    )
    return {
        "dataset_type": source,
        "dataset_name": source,
        "dataset_config": data.get("dataset_config_name"),
        "dataset_split": split,
    }


def _eval_results(facts: FolderFacts) -> list[EvalResult]:
    """The model-index: task metrics only (accuracy, F1, Spearman ...). Training losses (the balance loss, the task
    loss, a distillation loss) describe the run, not the model's task, and stay in the card's text."""
    results = {key: value for key, value in facts.evaluation_results.items() if "loss" not in key}
    if not results:
        return []
    dataset = {key: value for key, value in _eval_dataset(facts).items() if value is not None}
    task = pipeline_tag(facts)
    return [
        EvalResult(
            task_type=task, metric_type=key.removeprefix("eval_"), metric_name=key, metric_value=value, **dataset
        )
        for key, value in sorted(results.items())
    ]


def _card_data(facts: FolderFacts, model_name: str) -> ModelCardData:
    tags = ["compact-bert", facts.model_type] + (["custom_code"] if facts.has_remote_code else [])
    if facts.is_sentence_embedding:
        tags[1:1] = ["sentence-transformers", "sentence-similarity", "feature-extraction"]
    tags += [f"arxiv:{paper.arxiv_id}" for paper in facts.method_papers]
    if facts.is_mixture_of_experts:
        tags.append("mixture-of-experts")
    if facts.summary.get("teacher") or facts.summary.get("task_distillation"):
        tags.append("knowledge-distillation")
    return ModelCardData(
        model_name=model_name,
        license=LICENSE,
        language="en",
        tags=tags,
        library_name="sentence-transformers" if facts.is_sentence_embedding else "transformers",
        datasets=facts.datasets or None,
        base_model=facts.base_model,
        pipeline_tag=pipeline_tag(facts),
        eval_results=_eval_results(facts) or None,
    )


def _size_text(facts: FolderFacts) -> str:
    if facts.total_params is None:
        return "Not counted: compact-bert has no parameter count for this model type."
    lines = [
        f"- Parameters (base model, without the task head): {facts.total_params:,}",
        f"- Active parameters per token: {facts.active_params:,}"
        + (" (top-1 routing: one expert of each MoE layer per token)" if facts.is_mixture_of_experts else ""),
    ]
    if facts.flops is not None:
        lines.append(
            f"- Forward FLOPs per {FLOPS_SEQUENCE_LENGTH}-token sequence: {facts.flops / 1e9:.3f} G (matrix "
            "multiplications of the base model, a multiply-add counted as 2)"
        )
    return "\n".join(lines)


def _latency_text(facts: FolderFacts) -> str:
    report = facts.latency
    if report is None:
        return "Not measured: this folder has no `latency.json` (written by a benchmark or export step)."
    rows = [
        f"| {name} | {runtime.precision} | {runtime.median_ms:.2f} | "
        f"{'' if runtime.p90_ms is None else f'{runtime.p90_ms:.2f}'} | {runtime.file or ''} |"
        for name, runtime in report.runtimes.items()
    ]
    return (
        f"Batch {report.batch_size}, {report.sequence_length} tokens, on {report.device}.\n\n"
        "| Runtime | Precision | Median (ms) | p90 (ms) | File |\n|---|---|---|---|---|\n" + "\n".join(rows)
    )


def _recipe_text(facts: FolderFacts) -> str:
    summary = facts.summary
    if not summary:
        return "Not recorded: this folder has no `run_summary.json` from a compact-bert command."
    lines = []
    if summary.get("command_line"):
        lines.append(f"Command:\n\n{code_block(portable_command_line(summary['command_line']), 'bash')}\n")
    if summary.get("converted_from"):
        lines.append(
            f"- Converted one to one from {code(Path(summary['converted_from']).name)} (largest output "
            f"difference on a probe input: {summary.get('max_abs_difference')})"
        )
    if summary.get("teacher"):
        lines.append(
            f"- Teacher: {code(model_reference(str(summary['teacher'])))}"
            + (
                f", through a teacher assistant ({summary['teacher_assistant']})"
                if summary.get("teacher_assistant")
                else ""
            )
        )
    initialization = summary.get("teacher_initialization")
    if summary.get("model_name_or_path") and initialization:
        layers = ", ".join(str(layer) for layer in initialization["layer_map"])
        shape = describe_shape(facts.config.num_hidden_layers, facts.config.to_dict())
        lines.append(
            f"- Initialized from: {code(Path(initialization['teacher']).name)}, its layers {layers} (0-based; "
            f"hidden channels: {initialization['hidden_channels']}), then fine-tuned from the preset "
            f"{code(Path(summary['model_name_or_path']).name)} as {shape}"
        )
    elif initialization:
        layers = ", ".join(str(layer) for layer in initialization["layer_map"])
        lines.append(
            f"- Initialized from: {code(Path(initialization['teacher']).name)}, its layers {layers} (0-based; "
            f"hidden channels: {initialization['hidden_channels']})"
        )
    elif summary.get("model_name_or_path"):
        lines.append(f"- Fine-tuned from: {code(facts.base_model or model_reference(summary['model_name_or_path']))}")
    lines.extend(_local_source_stage(summary))
    lines.extend(_latency_budget_line(summary))
    distillation = summary.get("task_distillation")
    if distillation:
        lines.append(
            f"- Task distillation from the fine-tuned teacher {code(Path(distillation['teacher']).name)}: "
            f"{_loss_mix(distillation['alpha'], distillation['temperature'])}"
            + (
                f", over the training set and {distillation['augment_copies']} perturbed copies of every "
                "example labelled by the teacher"
                + (
                    f" (words masked, cut to n-grams or replaced by one of their {distillation['augment_word_neighbours']}"
                    " nearest neighbours in the teacher's word embeddings)"
                    if distillation.get("augment_word_neighbours")
                    else ""
                )
                + (", each copied pair read in either order" if distillation.get("augment_pair_swap") else "")
                if distillation.get("augment_copies")
                else ""
            )
            + (
                f", and up to {distillation['augment_pair_recombined']} new pairs per training pair (its first "
                "sentence with the training sentences closest to it in words) labelled by the teacher"
                if distillation.get("augment_pair_recombined")
                else ""
            )
            + _unlabeled_text(distillation)
            + (
                f"; its hidden states taught to the student's layers with weight {distillation['hidden_weight']}"
                if distillation.get("hidden_weight")
                else ""
            )
            + (
                f"; its attention taught to the student's layers with weight {distillation['attention_weight']}"
                if distillation.get("attention_weight")
                else ""
            )
        )
    for key, label in (
        ("strategy", "Knowledge-transfer strategy"),
        ("task_name", "Task"),
        ("seed", "Seed"),
        ("learning_rate", "Learning rate"),
        ("optimizer_steps", "Optimizer steps"),
        ("world_size", "Processes"),
        ("train_seconds", "Training time (s)"),
    ):
        if summary.get(key) is not None:
            lines.append(f"- {label}: {summary[key]}")
    if summary.get("role") == "embedding student":
        projection = summary.get("projection")
        lines.append(
            f"- Embedding distillation: MSE to the teacher's {summary['pooling']}-pooled"
            + (", normalised" if summary.get("normalize") else "")
            + " sentence embeddings"
            + (f", through a {projection[0]} → {projection[1]} projection" if projection else "")
            + f", on {summary['num_sentences']:,} sentences"
        )
        lines.append("- Training sentences: " + ", ".join(code(Path(name).name) for name in summary["sentences"]))
    data = summary.get("data") or {}
    if facts.datasets:
        lines.append(
            "- Training data: "
            + ", ".join(f"[{name}](https://huggingface.co/datasets/{name})" for name in facts.datasets)
        )
    elif data.get("dataset_name"):
        lines.append(f"- Training data: {code(_dataset_label(data['dataset_name']))}")
    elif data.get("corpus") or data.get("train_file"):
        names = data.get("corpus") or [data["train_file"]]
        lines.append("- Training data: " + ", ".join(code(Path(name).name) for name in names))
    licenses = [_DATASET_LICENSES[name] for name in facts.datasets if name in _DATASET_LICENSES]
    if licenses:
        lines.append("- Data licenses: " + "; ".join(licenses))
    return "\n".join(lines)


def _unlabeled_text(distillation: dict) -> str:
    """``--unlabeled_file``'s part of the transfer set: beside the copies, or with the training set alone."""
    count = distillation.get("unlabeled_examples")
    if not count:
        return ""
    named = f" ({code(Path(distillation['unlabeled_file']).name)})" if distillation.get("unlabeled_file") else ""
    over = ", and" if distillation.get("augment_copies") else ", over the training set and"
    return f"{over} {count:,} unlabeled in-domain examples labelled by the teacher{named}"


def _loss_mix(alpha: float, temperature: float) -> str:
    """The training examples' loss in words: the labels, the teacher's soft targets, or both weighted by alpha."""
    if alpha == 1:
        return "the labels alone on the training examples"
    soft_targets = f"its soft targets at temperature {temperature}"
    return f"{soft_targets} alone" if alpha == 0 else f"{alpha} x labels + {round(1 - alpha, 4)} x {soft_targets}"


def _latency_budget_line(summary: dict) -> list[str]:
    """``--max_latency_ratio``: the budget that sized the model and its shape's latency ratio to the teacher, timed
    before training (read off the line through every depth's median for whole layers, measured for a narrowed
    shape: ``finetuning/depth_budget.py``), so that a user reading the card knows its latency was chosen and how."""
    budget = summary.get("depth_by_latency_budget")
    if not budget:
        return []
    depth = budget["num_hidden_layers"]
    ratio = (
        budget["narrowed_latency_ratio"] if budget.get("narrowed") else budget["latency_ratio_by_depth"][str(depth)]
    )
    flag = code(f"--max_latency_ratio {budget['max_latency_ratio']}")
    # (a record written before the inputs' length was kept in it has no length to name)
    inputs = f"batch 1 x {budget['sequence_length']}, " if budget.get("sequence_length") else ""
    return [
        f"- Sized by {flag}: timed against the teacher with random weights before training, this shape ran at "
        f"{ratio}x its latency (teacher {budget['teacher_ms']} ms; {inputs}compact-bert's eager path, on the machine "
        "that trained it)"
    ]


def _local_source_stage(summary: dict) -> list[str]:
    """The stage before this one when the model was fine-tuned from a local folder (a student distilled here): the
    Hub cannot link to it, so the card tells how it was made."""
    source = summary.get("model_name_or_path")
    path = Path(source) / "run_summary.json" if source else None
    if path is None or not path.is_file():
        return []
    try:
        earlier = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        return []
    if not earlier.get("teacher"):
        return []
    corpus = (earlier.get("data") or {}).get("corpus")
    data = ", ".join(code(Path(name).name) for name in corpus) if corpus else "the bundled WikiText-2 slice"
    return [
        f"- That starting point, {code(Path(source).name)}, is a local student (not on the Hub): distilled from "
        f"{code(Path(str(earlier['teacher'])).name)} for {earlier.get('optimizer_steps', '?')} optimizer steps on "
        f"{data} with {code(portable_command_line(earlier.get('command_line', 'compact-bert distill')))}"
    ]


def _evaluation_text(facts: FolderFacts) -> str:
    results = facts.evaluation_results
    if not results:
        return "No evaluation was run for this folder."
    dataset = _eval_dataset(facts)
    rows = "\n".join(f"| {key} | {value} |" for key, value in sorted(results.items()))
    return f"On {dataset['dataset_name']} ({dataset['dataset_split']}):\n\n| Metric | Value |\n|---|---|\n{rows}"


def _routing_text(facts: FolderFacts) -> str | None:
    if not facts.is_mixture_of_experts:
        return None
    blocks = facts.routing_statistics
    if not blocks:
        return "Not measured: the run recorded no routing statistics."
    rows = "\n".join(
        f"| {block} | {stats.get('max_expert_share', '')} | {stats.get('min_expert_share', '')} | "
        f"{stats.get('dropped_fraction', '')} |"
        for block, stats in blocks.items()
    )
    return (
        "Share of the held-out evaluation's real tokens routed to the busiest and the idlest expert of each MoE "
        "block, and the fraction dropped by capacity (uniform routing: 1 / number of experts).\n\n"
        f"| Block | Max expert share | Min expert share | Dropped fraction |\n|---|---|---|---|\n{rows}"
    )


def _limitations_text(facts: FolderFacts) -> str:
    text = (
        "An English, uncased encoder for research on compact and mixture-of-experts BERT models. Its quality "
        "is bounded by its training data and steps listed above: a run with few steps or a small corpus is a "
        "smoke test, not a usable model. It inherits the biases of its teacher and of Wikipedia / movie-review "
        "text, and is not meant for decisions about people."
    )
    if facts.is_mixture_of_experts:
        text += (
            " Memory holds every expert even though each token uses one: plan memory by the total parameter "
            "count and compute by the active one."
        )
    return text


def _citation_text(facts: FolderFacts) -> str:
    papers = facts.method_papers
    if not papers:
        return "No paper describes how this model was made."
    return "\n\n".join(
        f"[{paper.title}](https://arxiv.org/abs/{paper.arxiv_id})\n\n```bibtex\n{paper.bibtex}\n```"
        for paper in papers
    )


def tokenizer_type(folder: str | Path) -> str | None:
    """The transformers model type whose tokenizer the folder ships (``"bert"`` for ``BertTokenizer``), or ``None``.

    transformers 5's ``AutoTokenizer`` reads the folder's ``config.json`` before ``tokenizer_config.json``; for a
    custom ``model_type`` that asks whether to run the folder's code (a prompt that waits 15 s in a terminal) just
    to learn the tokenizer class. Given ``tokenizer_type``, both transformers lines go straight to the tokenizer."""
    from transformers.models.auto.tokenization_auto import TOKENIZER_MAPPING_NAMES

    path = Path(folder) / "tokenizer_config.json"
    if not path.is_file():
        return None
    name = json.loads(path.read_text(encoding="utf-8")).get("tokenizer_class") or ""
    slow_name = name.removesuffix("Fast")
    matches = [
        model_type
        for model_type, names in TOKENIZER_MAPPING_NAMES.items()
        if any(
            candidate and candidate.removesuffix("Fast") == slow_name
            for candidate in (names if isinstance(names, (tuple, list)) else (names,))
        )
    ]
    own = slow_name.removesuffix("Tokenizer").lower()  # BertTokenizer -> bert, not the first of its many users
    return own if own in matches else (matches[0] if matches else None)


def _tokenizer_arguments(folder: str | Path) -> str:
    found = tokenizer_type(folder)
    return f', tokenizer_type="{found}"' if found else ""


def build_model_card(folder: str | Path, repo_id: str | None = None) -> ModelCard:
    """The card of ``folder``; ``repo_id`` (default: the folder's name) is used in the loading example."""
    facts = read_folder_facts(folder)
    model_id = repo_id or Path(folder).resolve().name
    auto_class = _head(facts)[1]
    paper = f", from [{facts.paper.title}](https://arxiv.org/abs/{facts.paper.arxiv_id})" if facts.paper else ""
    if facts.paper is None and facts.method_papers:
        paper = " with " + ", ".join(
            f"[{paper.title}](https://arxiv.org/abs/{paper.arxiv_id})" for paper in facts.method_papers
        )
    template = resources.files(__package__).joinpath(TEMPLATE).read_text(encoding="utf-8")
    return ModelCard.from_template(
        _card_data(facts, model_id.split("/")[-1]),
        template_str=template,
        model_name=plain_text(model_id.split("/")[-1]),
        model_id=model_id,
        usage_code=_usage_code(facts, model_id, auto_class, folder),
        loading_note=(
            "It is a custom architecture: load it with `trust_remote_code=True` (the two code files in this repo "
            "import only torch and transformers; compact-bert itself is not needed)."
            if facts.has_remote_code
            else "It is a standard transformers architecture: it loads with transformers alone."
        ),
        summary_line=f"A `{facts.model_type}` model ({pipeline_tag(facts)}) made with compact-bert{paper}.",
        architecture=[
            (name, getattr(facts.config, name))
            for name in _ARCHITECTURE_FIELDS
            if getattr(facts.config, name, None) is not None
        ],
        size_text=_size_text(facts),
        latency_text=_latency_text(facts),
        recipe_text=_recipe_text(facts),
        evaluation_text=_evaluation_text(facts),
        routing_text=_routing_text(facts),
        exports_text="\n".join(f"- {code(name)}" for name in facts.exported_files)
        or "None yet (no ONNX or TFLite export).",
        limitations_text=_limitations_text(facts),
        citation_text=_citation_text(facts),
    )


_WRITTEN_MARK = re.compile(r"\n<!-- written by compact-bert, sha256 ([0-9a-f]{64}) -->\n?\Z")


def marked_card_text(card) -> str:
    """The card's text with a closing mark holding its SHA-256 (an HTML comment: invisible on the Hub), so that a
    later rewrite can tell whether a person edited it since (``card_was_edited``)."""
    text = str(card).rstrip("\n") + "\n"
    return f"{text}\n<!-- written by compact-bert, sha256 {hashlib.sha256(text.encode()).hexdigest()} -->\n"


def card_was_edited(path: str | Path) -> bool:
    """Whether the card at ``path`` differs from what compact-bert last wrote there: edited by hand, written by
    another tool, or without the mark (written by a compact-bert that does not mark its cards). ``False`` when
    there is no card."""
    path = Path(path)
    if not path.is_file():
        return False
    text = path.read_text(encoding="utf-8", errors="replace")
    mark = _WRITTEN_MARK.search(text)
    return mark is None or hashlib.sha256(text[: mark.start()].encode()).hexdigest() != mark.group(1)


def write_model_card(folder: str | Path, repo_id: str | None = None) -> Path:
    """Write (or rewrite) ``folder/README.md`` from the folder's current facts, with the mark that tells a later
    rewrite whether it was edited."""
    path = Path(folder) / MODEL_CARD_FILE
    write_text_atomically(path, marked_card_text(build_model_card(folder, repo_id)))
    return path
