"""What a model card states, gathered from what the run already wrote into the model folder.

Sources: ``config.json`` (architecture), the config again through ``modeling/model_stats.py`` (parameters and
FLOPs, counted once there), ``run_summary.json`` (the command line, steps, data, teacher, evaluation metrics and
routing statistics that ``cli/training_common.train_and_report`` records), ``latency.json``
(``evaluation/latency_report.py``) and the exported files next to the weights. Nothing is measured here: a fact that no
step wrote is reported as missing rather than made up.
"""

from __future__ import annotations

import filecmp
import re
from dataclasses import dataclass, field
from pathlib import Path

from transformers import AutoConfig

from ..distillation.data import PACKAGED_TEACHER_HUB_ID, bundled_corpus_files, portable_model_name
from ..evaluation.latency_report import LatencyReport, read_latency
from ..finetuning.data import GLUE_TASKS
from ..modeling.model_stats import count_parameters, estimate_flops, meta_model
from ..training.routing_keys import ROUTING_KEY
from ..training.text_files import read_json_object
from .hub_files import hub_files

__all__ = ["FLOPS_SEQUENCE_LENGTH", "PAPERS", "FolderFacts", "Paper", "RUN_SUMMARY_FILE", "read_folder_facts"]

RUN_SUMMARY_FILE = "run_summary.json"
FLOPS_SEQUENCE_LENGTH = 128
WIKITEXT_HUB_ID = "Salesforce/wikitext"
GLUE_HUB_ID = "nyu-mll/glue"
# Evaluation keys that describe the evaluation run, not the model.
# Not results of the model: timings, and the share of the most frequent predicted class (a diagnostic that flags a
# one-class classifier, reported in the run summary).
NOT_RESULTS = (
    "eval_runtime",
    "eval_samples_per_second",
    "eval_steps_per_second",
    "eval_model_preparation_time",
    "eval_majority_prediction_share",
)


@dataclass(frozen=True)
class Paper:
    arxiv_id: str
    title: str
    bibtex: str


_MOBILEBERT = Paper(
    "2004.02984",
    "MobileBERT: a Compact Task-Agnostic BERT for Resource-Limited Devices",
    "@inproceedings{sun2020mobilebert,\n  title={MobileBERT: a Compact Task-Agnostic BERT for "
    "Resource-Limited Devices},\n  author={Sun, Zhiqing and Yu, Hongkun and Song, Xiaodan and Liu, "
    "Renjie and Yang, Yiming and Zhou, Denny},\n  booktitle={ACL},\n  year={2020}\n}",
)
_MINIMOE = Paper(
    "2305.12129",
    "Lifting the Curse of Capacity Gap in Distilling Language Models",
    "@inproceedings{zhang2023lifting,\n  title={Lifting the Curse of Capacity Gap in Distilling Language "
    "Models},\n  author={Zhang, Chen and Yang, Yang and Liu, Jiahao and Wang, Jingang and Xian, Yunsen "
    "and Wang, Benyou and Song, Dawei},\n  booktitle={ACL},\n  year={2023}\n}",
)
_TCD = Paper(
    "2403.01994",
    "Vanilla Transformers are Transfer Capability Teachers",
    "@article{lu2024vanilla,\n  title={Vanilla Transformers are Transfer Capability Teachers},\n  "
    "author={Lu, Xin and Zhao, Yanyan and Qin, Bing},\n  journal={arXiv preprint arXiv:2403.01994},\n  "
    "year={2024}\n}",
)
# The methods a dense student (transformers' BERT, no family of its own) is made with, cited by what its run used.
_DISTILBERT = Paper(
    "1910.01108",
    "DistilBERT, a distilled version of BERT: smaller, faster, cheaper and lighter",
    "@article{sanh2019distilbert,\n  title={DistilBERT, a distilled version of BERT: smaller, faster, cheaper and "
    "lighter},\n  author={Sanh, Victor and Debut, Lysandre and Chaumond, Julien and Wolf, Thomas},\n  "
    "journal={arXiv preprint arXiv:1910.01108},\n  year={2019}\n}",
)
_MINITRON = Paper(
    "2407.14679",
    "Compact Language Models via Pruning and Knowledge Distillation",
    "@article{muralidharan2024compact,\n  title={Compact Language Models via Pruning and Knowledge Distillation},\n"
    "  author={Muralidharan, Saurav and Sreenivas, Sharath Turuvekere and Joshi, Raviraj and Chochowski, Marcin and "
    "Patwary, Mostofa and Shoeybi, Mohammad and Catanzaro, Bryan and Kautz, Jan and Molchanov, Pavlo},\n  "
    "journal={arXiv preprint arXiv:2407.14679},\n  year={2024}\n}",
)
_TASK_DISTILLATION = Paper(
    "1903.12136",
    "Distilling Task-Specific Knowledge from BERT into Simple Neural Networks",
    "@article{tang2019distilling,\n  title={Distilling Task-Specific Knowledge from BERT into Simple Neural "
    "Networks},\n  author={Tang, Raphael and Lu, Yao and Liu, Linqing and Mou, Lili and Vechtomova, Olga and Lin, "
    "Jimmy},\n  journal={arXiv preprint arXiv:1903.12136},\n  year={2019}\n}",
)
_AUGMENTED_SBERT = Paper(
    "2010.08240",
    "Augmented SBERT: Data Augmentation Method for Improving Bi-Encoders for Pairwise Sentence Scoring Tasks",
    "@inproceedings{thakur2021augmented,\n  title={Augmented {SBERT}: Data Augmentation Method for Improving "
    "Bi-Encoders for Pairwise Sentence Scoring Tasks},\n  author={Thakur, Nandan and Reimers, Nils and Daxenberger, "
    "Johannes and Gurevych, Iryna},\n  booktitle={NAACL},\n  year={2021}\n}",
)
_MULTILINGUAL_SBERT = Paper(
    "2004.09813",
    "Making Monolingual Sentence Embeddings Multilingual using Knowledge Distillation",
    "@inproceedings{reimers2020making,\n  title={Making Monolingual Sentence Embeddings Multilingual using Knowledge "
    "Distillation},\n  author={Reimers, Nils and Gurevych, Iryna},\n  booktitle={EMNLP},\n  year={2020}\n}",
)

# model_type → the paper that defines the family (and its distillation method).
PAPERS = {
    "compact_mobilebert": _MOBILEBERT,
    "ib_bert": _MOBILEBERT,
    "mobilebert": _MOBILEBERT,
    "minimoe": _MINIMOE,
    "moe_bert": _TCD,
}


@dataclass
class FolderFacts:
    folder: Path
    config: object
    summary: dict
    total_params: int | None
    active_params: int | None
    flops: int | None
    latency: LatencyReport | None
    exported_files: list[str]
    base_model: str | None
    datasets: list[str] = field(default_factory=list)

    @property
    def is_sentence_embedding(self) -> bool:
        """A sentence-transformers folder (``modules.json``): loaded with ``SentenceTransformer``, used for similarity."""
        return (self.folder / "modules.json").is_file()

    @property
    def model_type(self) -> str:
        return self.config.model_type

    @property
    def has_remote_code(self) -> bool:
        """The folder ships its own model code (``auto_map`` and ``modeling_*.py``): loading it needs
        ``trust_remote_code``. A plain transformers folder (the main job's fine-tuned BERT teacher) does not."""
        return bool(getattr(self.config, "auto_map", None)) and any(self.folder.glob("modeling_*.py"))

    @property
    def paper(self) -> Paper | None:
        return PAPERS.get(self.model_type)

    @property
    def method_papers(self) -> list[Paper]:
        """What made the model, by what its run did: the family's paper, or for a dense student (transformers' BERT,
        which no paper of compact-bert's defines) the papers of the methods its run summary records — layers copied
        from the teacher (DistilBERT), importance-ranked width (Minitron), task distillation on teacher-labelled
        copies (Tang et al.), recombined sentence pairs (Augmented SBERT), an embedding student (Reimers &
        Gurevych)."""
        if self.paper is not None:
            return [self.paper]
        papers = []
        initialization = self.summary.get("teacher_initialization") or {}
        if initialization:
            papers.append(_DISTILBERT)
            layers = initialization.get("layers") or [{}]
            if initialization.get("hidden_channels", "all") != "all" or layers[0].get("ffn_neurons", "all") != "all":
                papers.append(_MINITRON)
        distillation = self.summary.get("task_distillation") or {}
        if distillation:
            papers.append(_TASK_DISTILLATION)
            if distillation.get("augment_pair_recombined"):
                papers.append(_AUGMENTED_SBERT)
        if self.is_sentence_embedding and self.summary.get("teacher"):
            papers.append(_MULTILINGUAL_SBERT)
        return papers

    @property
    def is_mixture_of_experts(self) -> bool:
        return max(getattr(self.config, "num_experts", 1), getattr(self.config, "num_attention_experts", 1)) > 1

    @property
    def evaluation_results(self) -> dict[str, float]:
        """``eval_*`` numbers of the run, without timings and routing statistics (reported on their own)."""
        return {
            key: value
            for key, value in self.summary.items()
            if key.startswith("eval_")
            and isinstance(value, (int, float))
            and not isinstance(value, bool)
            and key not in NOT_RESULTS
            and not ROUTING_KEY.match(key)
        }

    @property
    def routing_statistics(self) -> dict[int, dict[str, float]]:
        """Per MoE block: the held-out evaluation's max/min expert share and dropped fraction."""
        blocks: dict[int, dict[str, float]] = {}
        for key, value in self.summary.items():
            if (found := ROUTING_KEY.match(key)) and found["prefix"]:
                blocks.setdefault(int(found["block"]), {})[found["statistic"]] = value
        return dict(sorted(blocks.items()))


def read_folder_facts(folder: str | Path) -> FolderFacts:
    folder = Path(folder)
    if not (folder / "config.json").is_file():
        raise ValueError(f"{folder} is not a model folder: it has no config.json.")
    config = AutoConfig.from_pretrained(folder)
    summary_path = folder / RUN_SUMMARY_FILE
    summary = read_json_object(summary_path, "a run summary") if summary_path.is_file() else {}
    try:
        total, active = count_parameters(meta_model(config))
    except (ValueError, KeyError):  # a config AutoModel does not know
        total = active = None
    try:
        flops = estimate_flops(config, FLOPS_SEQUENCE_LENGTH)
    except TypeError:  # no formula for non-compact-bert configs (e.g. a converted transformers MobileBERT)
        flops = None
    exported = [name for name in hub_files(folder) if name.endswith((".onnx", ".tflite"))]
    return FolderFacts(
        folder,
        config,
        summary,
        total,
        active,
        flops,
        read_latency(folder),
        exported,
        _base_model(summary),
        _datasets(summary),
    )


def is_local_dataset(name: str) -> bool:
    """Whether a ``--dataset_name`` is a local folder rather than a Hub id (``namespace/name`` or ``name``)."""
    return Path(name).exists() or name.startswith((".", "/", "~")) or "\\" in name or name.count("/") > 1


def _is_hub_id(name: str | None) -> bool:
    return bool(name) and not Path(name).exists() and re.fullmatch(r"[\w.-]+/[\w.-]+", name) is not None


def _base_model(summary: dict) -> str | None:
    """The Hub id of the model whose weights this one's started from: the teacher a student was initialized from
    (its layers copied), the model a fine-tuning started from. A student distilled from random weights has none —
    its teacher taught it but gave it no weights, and the card names the teacher in its recipe instead. A local
    folder is followed to the base model its own card names (the main job fine-tunes a student it just distilled
    here); a local path never becomes metadata."""
    initialization = summary.get("teacher_initialization")
    if initialization:
        source = initialization.get("teacher")
    elif summary.get("model_name_or_path"):
        source = summary["model_name_or_path"]
    else:
        return None
    if source and portable_model_name(source) == PACKAGED_TEACHER_HUB_ID:  # by name or by its installed path
        return PACKAGED_TEACHER_HUB_ID
    if _is_hub_id(source):
        return source
    card = Path(source) / "README.md" if source else None
    if card is not None and card.is_file():
        from huggingface_hub import ModelCard

        base = ModelCard.load(card).data.base_model
        return base if isinstance(base, str) else None
    return None


def model_reference(name_or_path: str) -> str:
    """How a card names a model it does not take weights from (a teacher): ``portable_model_name``, the Hub id where
    it has one, else the folder's name (never its local path)."""
    return portable_model_name(name_or_path)


def _bundled_wikitext(paths: list[str]) -> bool:
    """No corpus given (the default: the bundled slice), or only the bundled WikiText-2 files — the installed
    copies or byte-identical ones (a source checkout's, when compact-bert runs from a wheel)."""
    bundled = [path.resolve() for split in ("train", "heldout") for path in bundled_corpus_files(split)]
    return all(_same_file_as_any(Path(path).resolve(), bundled) for path in paths)


def _same_file_as_any(path: Path, candidates: list[Path]) -> bool:
    if path in candidates:
        return True
    return path.is_file() and any(
        candidate.name == path.name and filecmp.cmp(candidate, path, shallow=False) for candidate in candidates
    )


def _datasets(summary: dict) -> list[str]:
    """Hub ids of the training data, where the run used a known one (the bundled slices, a `datasets` name)."""
    data = summary.get("data") or {}
    if data.get("dataset_name"):
        # A local `save_to_disk` folder is no Hub dataset: its path (a user's home, a customer's name) never becomes
        # metadata; the card names it by its folder name in the text (``local_dataset_name``).
        return [] if is_local_dataset(data["dataset_name"]) else [data["dataset_name"]]
    if "corpus" in data:  # pre-training / distillation corpus arguments
        return [WIKITEXT_HUB_ID] if _bundled_wikitext(data["corpus"]) else []
    if data.get("task_name") in GLUE_TASKS:
        return [GLUE_HUB_ID]
    return []
