"""How the main job's student was chosen — on sentences that are not the dev set it reports.

The main job reports SST-2 *dev* accuracy, so its student (shape, where it starts, how it is taught) must not be
chosen on that set. This recipe builds a **selection set** of GLUE SST-2 *train* sentences that are not in the
bundled training slice (872 of them, as many as the dev set, with at least 8 words so that they read like the dev
set's whole sentences rather than the treebank's short phrases), then trains the teacher and every candidate with
the main job's settings on the bundled slice and scores them on the selection set:

- ``baseline``: the pretrained teacher's layers 1, 3, 5 fine-tuned on the labels (what a user gets for free);
- ``minilm-3l, from fine-tuned teacher, KD + aug``: the 3-layer MiniLM initialized from the *fine-tuned* teacher,
  taught by its soft targets over the slice and 2 augmented copies (the main job's default);
- ``minilm-3l, from pretrained teacher, KD + aug``: the same, initialized from the *pretrained* teacher;
- ``minilm-3l, from fine-tuned teacher, KD + 4 aug``: 4 augmented copies instead of 2;
- ``minilm-3l, from fine-tuned teacher, KD``: no augmented copies;
- ``minimoe-3l upcycled``: 4 upcycled experts per FFN (copies of the teacher's), KD + aug;
- ``minimoe-3l split``: 4 experts of 384 neurons each (MoEBERT split of the FFN: a quarter of its cost), KD + aug.

Run: ``python -m examples.student_selection --output_dir runs/student_selection`` (about
30 minutes per seed on 2 CPU cores; ``--seeds 0 1`` for two; ``--candidates 0 4`` for the main job's student and
the upcycled MoE only). Needs ``../shared/data/sst2/train.tsv``
(``--data_dir``).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from pathlib import Path

from compact_bert.cli import finetune_command
from compact_bert.distillation.teachers import resolve_model_path
from compact_bert.finetuning.bundled_data import bundled_sst2_files

from .comparison_flags import COMPARISON_FLAGS, baseline_arguments
from .downstream import DEFAULT_DATA_DIR

__all__ = ["CANDIDATES", "candidate_flags", "main", "write_selection_set"]

SELECTION_ROWS = 872
MIN_WORDS = 8
SELECTION_SEED = 20
TEACHER = "all-MiniLM-L6-v2"
# name -> (model, extra finetune flags); "{teacher}" / "{pretrained}" are filled in.
CANDIDATES = {
    "minilm-3l, from fine-tuned teacher, KD + aug": (
        "minilm-3l-384h",
        ["--teacher", "{teacher}", "--augment_copies", "2"],
    ),
    "minilm-3l, from pretrained teacher, KD + aug": (
        "minilm-3l-384h",
        ["--teacher", "{teacher}", "--augment_copies", "2", "--init_from_teacher", "{pretrained}"],
    ),
    "minilm-3l, from fine-tuned teacher, KD + 4 aug": (
        "minilm-3l-384h",
        ["--teacher", "{teacher}", "--augment_copies", "4"],
    ),
    "minilm-3l, from fine-tuned teacher, KD": ("minilm-3l-384h", ["--teacher", "{teacher}", "--augment_copies", "0"]),
    "minimoe-3l upcycled, from fine-tuned teacher, KD + aug": (
        "minimoe-3l-384h",
        ["--teacher", "{teacher}", "--augment_copies", "2"],
    ),
    "minimoe-3l split 4x384, from fine-tuned teacher, KD + aug": (
        "minimoe-3l-384h",
        ["--model_overrides", '{"moe_intermediate_size": 384}', "--teacher", "{teacher}", "--augment_copies", "2"],
    ),
}


def write_selection_set(glue_train: Path, bundled_train: Path, output: Path) -> Path:
    """``SELECTION_ROWS`` GLUE SST-2 train sentences of at least ``MIN_WORDS`` words that the bundled slice does not
    hold, drawn with a fixed seed, as ``sentence<TAB>label``."""
    taken = set(bundled_train.read_text(encoding="utf-8").splitlines()[1:])
    rows = [
        row
        for row in glue_train.read_text(encoding="utf-8").splitlines()[1:]
        if row not in taken and len(row.split("\t")[0].split()) >= MIN_WORDS
    ]
    chosen = random.Random(SELECTION_SEED).sample(rows, SELECTION_ROWS)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text("sentence\tlabel\n" + "\n".join(chosen) + "\n", encoding="utf-8")
    return output


def candidate_flags(flags: list[str], teacher_dir: Path, pretrained: str) -> list[str]:
    """A candidate's flags with ``{teacher}`` and ``{pretrained}`` filled in (``str.replace``, not ``format``: the
    flags hold JSON, whose braces ``format`` would read as fields)."""
    return [flag.replace("{teacher}", str(teacher_dir)).replace("{pretrained}", pretrained) for flag in flags]


def _finetune(arguments: list[str]) -> dict:
    """One ``compact-bert finetune`` run; a run whose folder already holds its summary (an interrupted recipe run
    again) is read back instead of trained again: the same seed gives the same result."""
    output_dir = Path(arguments[arguments.index("--output_dir") + 1])
    if (output_dir / "run_summary.json").is_file():
        print(f"Reusing the finished run in {output_dir}")
        return json.loads((output_dir / "run_summary.json").read_text())
    # An interrupted run of this recipe (checkpoints, no summary) is started over in its own folder.
    return finetune_command.finetune_from_flags([*arguments, "--overwrite_output_dir"])[0]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output_dir", default="runs/student_selection")
    parser.add_argument("--data_dir", default=str(DEFAULT_DATA_DIR))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument(
        "--candidates",
        type=int,
        nargs="+",
        default=None,
        help=f"Indices of the candidates to train (0-{len(CANDIDATES) - 1}, in the order of the module "
        "docstring after the baseline; default: all). Teacher and baseline always run.",
    )
    args = parser.parse_args(argv)
    chosen = range(len(CANDIDATES)) if args.candidates is None else args.candidates
    if any(not 0 <= index < len(CANDIDATES) for index in chosen):
        raise SystemExit(f"--candidates: indices run from 0 to {len(CANDIDATES) - 1}, got {args.candidates}.")
    output = Path(args.output_dir)
    glue_train = Path(args.data_dir) / "sst2" / "train.tsv"
    if not glue_train.is_file():
        raise SystemExit(f"{glue_train} is missing: the selection set is drawn from GLUE SST-2 train (--data_dir).")
    selection = write_selection_set(glue_train, bundled_sst2_files()["train"], output / "selection.tsv")
    pretrained = str(resolve_model_path(TEACHER))

    common = [
        "--task_name",
        "sst2",
        "--train_file",
        str(bundled_sst2_files()["train"]),
        "--validation_file",
        str(selection),
        *COMPARISON_FLAGS,
        "--report_to",
        "none",
        "--disable_tqdm",
        "true",
        "--teacher_cache_dir",
        str(output / "cache"),
    ]
    results: dict[str, list[dict]] = {}
    for seed in args.seeds:
        seeded = [*common, "--seed", str(seed)]
        teacher_dir = output / f"seed-{seed}" / "teacher"
        runs = {"teacher": _finetune(["--model_name_or_path", pretrained, "--output_dir", str(teacher_dir), *seeded])}
        runs["baseline"] = _finetune(
            [*baseline_arguments(pretrained, str(output / f"seed-{seed}" / "baseline")), *seeded]
        )
        for index, (name, (model, flags)) in enumerate(CANDIDATES.items()):
            if index not in chosen:
                continue
            flags = candidate_flags(flags, teacher_dir, pretrained)
            runs[name] = _finetune(
                [
                    "--model_name_or_path",
                    model,
                    *flags,
                    "--output_dir",
                    str(output / f"seed-{seed}" / f"candidate-{index}"),
                    *seeded,
                ]
            )
        for name, run in runs.items():
            results.setdefault(name, []).append(
                {"seed": seed, "accuracy": run["eval_accuracy"], "train_seconds": run["train_seconds"]}
            )
        (output / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    print(
        f"\nSelection-set accuracy ({SELECTION_ROWS} GLUE SST-2 train sentences outside the bundled slice; "
        f"seeds {args.seeds}): mean, spread (min-max), share of the teacher's mean, train seconds"
    )
    teacher_mean = statistics.fmean(entry["accuracy"] for entry in results["teacher"])
    for name, entries in results.items():
        accuracies = [entry["accuracy"] for entry in entries]
        mean = statistics.fmean(accuracies)
        seconds = statistics.fmean(entry["train_seconds"] for entry in entries)
        print(
            f"  {name:<60} {100 * mean:5.1f}%  ({100 * min(accuracies):.1f}-{100 * max(accuracies):.1f})  "
            f"{100 * mean / teacher_mean:5.1f}%  {seconds:5.0f} s"
        )


if __name__ == "__main__":
    main()
