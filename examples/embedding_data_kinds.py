"""Is 98% of the teacher's STS-B Spearman a property of the bundled sentences? The embedding recipe on other text.

``compact-bert distill embeddings`` trains by default on the bundled mixture: the sentences of 4,500 STS Benchmark
train pairs (which read like the STS-B dev pairs it is scored on) and the SST-2 training slice. This recipe runs the
same command — same student, initialization, schedule (2 epochs, batch 64) and evaluation — on corpora of another
kind, as many sentences as the bundled mixture (11,164), and scores each student once on the STS-B dev set:

- ``sst2``: GLUE SST-2 *train* sentences only (movie-review phrases and sentences, 3 words or more, drawn with a
  fixed seed, none of the bundled slice's): no sentence of the STS data at all;
- ``wikitext``: sentences of Wikipedia articles (WikiText-2's validation and test text, headings left out, split at
  full stops, 5 words or more, drawn with a fixed seed; WikiText's ``<unk>`` for a rare word written as BERT's
  ``[UNK]``): encyclopedic prose, neither STS nor reviews;
- ``stsb``: the STS-B train pairs' sentences only — all of them, 5,749 pairs (the bundled mixture takes the first
  4,500), no SST-2: the pairs' sentences without their scores, fewer than 11,164 because pairs share sentences.

The student's Minitron width selection (its FFN's 1,024 most important neurons) is measured on each corpus too, so
nothing of STS-B reaches it. Every finished run leaves its ``run_summary.json`` and is not repeated.

Run: ``python -m examples.embedding_data_kinds --output_dir runs/embedding_data_kinds --seeds 42 1`` (about 6 minutes
per run on 2 CPU cores, the first of a corpus also computing the teacher's embeddings); ``--corpora wikitext`` runs
one corpus. Needs ``sst2/train.tsv``, ``wikitext2/`` and ``stsb/train.tsv`` under ``--data_dir``.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import re
import statistics
from pathlib import Path

from compact_bert.cli import distill_embeddings_command
from compact_bert.finetuning.bundled_data import bundled_sst2_files

from .downstream import DEFAULT_DATA_DIR

__all__ = ["CORPORA", "CORPUS_SENTENCES", "main", "sst2_sentences", "stsb_sentences", "wikitext_sentences"]

CORPUS_SENTENCES = 11_164  # the bundled mixture's size: 8,165 STS-B train sentences + 3,000 SST-2 slice sentences
SEED = 11
MIN_WORDS = 3
MIN_WIKITEXT_WORDS = 5
# WikiText's tokenization marks in-word hyphens and number separators as " @-@ ", " @,@ ", " @.@ ".
_WIKITEXT_JOINERS = re.compile(r" @([-,.])@ ")


def sst2_sentences(glue_train: Path, output: Path) -> Path:
    """``CORPUS_SENTENCES`` distinct SST-2 train sentences of at least ``MIN_WORDS`` words, none of the bundled
    slice's, drawn with a fixed seed, one per line."""
    taken = {line.split("\t")[0] for line in bundled_sst2_files()["train"].read_text(encoding="utf-8").splitlines()}
    rows = dict.fromkeys(
        line.split("\t")[0].strip() for line in glue_train.read_text(encoding="utf-8").splitlines()[1:]
    )
    pool = [row for row in rows if row not in taken and len(row.split()) >= MIN_WORDS]
    chosen = random.Random(SEED).sample(pool, CORPUS_SENTENCES)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text("\n".join(chosen) + "\n", encoding="utf-8")
    return output


def wikitext_sentences(folder: Path, output: Path) -> Path:
    """``CORPUS_SENTENCES`` distinct sentences of WikiText-2's ``valid.txt`` and ``test.txt`` (headings skipped,
    paragraphs split after " . ", joiners undone, ``MIN_WIKITEXT_WORDS`` words or more), drawn with a fixed seed, one
    per line. Two sentences in three hold a rare word WikiText replaced by ``<unk>``: it becomes the vocabulary's
    ``[UNK]``, the token it stands for, rather than three pieces of punctuation and "unk"."""
    sentences: dict[str, None] = {}
    for name in ("valid.txt", "test.txt"):
        for paragraph in (folder / name).read_text(encoding="utf-8").splitlines():
            paragraph = paragraph.strip()
            if not paragraph or paragraph.startswith("="):
                continue
            for sentence in re.split(r"(?<= \.) ", _WIKITEXT_JOINERS.sub(r"\1", paragraph)):
                sentence = sentence.strip()
                if len(sentence.split()) >= MIN_WIKITEXT_WORDS:
                    sentences[sentence.replace("<unk>", "[UNK]")] = None
    if len(sentences) < CORPUS_SENTENCES:
        raise SystemExit(f"{folder}: {len(sentences)} usable sentences, fewer than the {CORPUS_SENTENCES} needed.")
    chosen = random.Random(SEED).sample(list(sentences), CORPUS_SENTENCES)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text("\n".join(chosen) + "\n", encoding="utf-8")
    return output


def stsb_sentences(train_tsv: Path, output: Path) -> Path:
    """The distinct sentences of every STS-B train pair, in order of first appearance, one per line (no scores)."""
    with open(train_tsv, encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
    sentences = dict.fromkeys(text.strip() for row in rows for text in row[:2] if text.strip())
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    return output


# corpus -> (what it needs under --data_dir, how it is drawn)
CORPORA = {
    "sst2": ("sst2/train.tsv", sst2_sentences),
    "wikitext": ("wikitext2", wikitext_sentences),
    "stsb": ("stsb/train.tsv", stsb_sentences),
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output_dir", default="runs/embedding_data_kinds")
    parser.add_argument("--data_dir", default=str(DEFAULT_DATA_DIR))
    parser.add_argument("--seeds", type=int, nargs="+", default=[42])
    parser.add_argument("--corpora", nargs="+", choices=list(CORPORA), default=list(CORPORA))
    args = parser.parse_args(argv)
    output = Path(args.output_dir)
    files = {}
    for name in args.corpora:
        source, draw = CORPORA[name]
        if not (Path(args.data_dir) / source).exists():
            raise SystemExit(
                f"{Path(args.data_dir) / source} is missing: the {name} corpus is drawn from it (--data_dir)."
            )
        files[name] = draw(Path(args.data_dir) / source, output / f"{name}.txt")
    results: dict[str, dict] = (
        json.loads((output / "results.json").read_text()) if (output / "results.json").is_file() else {}
    )
    for name, corpus in files.items():
        for seed in args.seeds:
            folder = output / f"{name}-seed-{seed}"
            if not (folder / "run_summary.json").is_file():
                argv = ["--sentences", str(corpus), "--output_dir", str(folder), "--seed", str(seed)]
                argv += ["--overwrite_output_dir"]  # an interrupted run of this recipe is started over
                argv += ["--report_to", "none", "--disable_tqdm", "true", "--teacher_cache_dir", str(output / "cache")]
                print(f"\n=== compact-bert distill embeddings {' '.join(argv)}", flush=True)
                distill_embeddings_command.run(argv)
            summary = json.loads((folder / "run_summary.json").read_text())
            entry = results.setdefault(name, {"teacher": summary["teacher_sts"]["spearman_cosine"], "student": {}})
            entry["student"][seed] = summary["eval_sts_spearman_cosine"]
            (output / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    print("\nSTS-B dev Spearman (cosine, x100) of students distilled on each corpus")
    for name, entry in results.items():
        values = list(entry["student"].values())
        mean = statistics.fmean(values)
        print(
            f"  {name:<10} teacher {entry['teacher']:.2f}; student per seed "
            f"{', '.join(f'{value:.2f}' for value in values)}; mean {mean:.2f} (spread {max(values) - min(values):.2f})"
            f", {100 * mean / entry['teacher']:.1f}% of the teacher"
        )


if __name__ == "__main__":
    main()
