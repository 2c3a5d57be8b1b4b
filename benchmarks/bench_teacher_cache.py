"""What the teacher-output cache saves on a seed grid of task distillation, measured in one run.

Without a cache, every training step runs the teacher on its batch: each seed pays one teacher pass over the
transfer set per epoch. With the cache, the teacher runs once over the transfer set for the whole grid (and for
every later grid, student and seed on the same data); a run then reads the logits back. This script times, on the
main job's transfer set (the bundled SST-2 slice and 2 augmented copies of every sentence: 9,000 examples, 64
tokens at most) and its teacher (the packaged all-MiniLM-L6-v2 with a classification head):

- one teacher pass over the transfer set (what a seed pays per epoch without the cache),
- one student epoch (the 3-layer MiniLM student's forward + backward + AdamW over the same examples),
- reading the cached logits back,

and prints the time of a 3-seed, 3-epoch grid with and without the cache, computed from those medians.

Run: ``python benchmarks/bench_teacher_cache.py``
"""

from __future__ import annotations

import statistics
import tempfile
import time

import torch
from transformers import AutoModelForSequenceClassification, DataCollatorWithPadding

from compact_bert.configuration import preset_config
from compact_bert.distillation.data import default_tokenizer, packaged_teacher_dir
from compact_bert.distillation.teacher_cache import cached_teacher_outputs
from compact_bert.finetuning.augmentation import augment_split
from compact_bert.finetuning.bundled_data import bundled_sst2_files
from compact_bert.finetuning.data import FinetuneDataArguments, load_finetuning_data, tokenize_sequence_dataset
from compact_bert.finetuning.task_distillation import _teacher_logits

SEEDS, EPOCHS, BATCH = 3, 3, 32


def _timed(call, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    files = bundled_sst2_files()
    tokenizer = default_tokenizer()
    splits = load_finetuning_data(
        FinetuneDataArguments(
            task_name="sst2", train_file=str(files["train"]), validation_file=str(files["validation"])
        )
    )
    transfer = augment_split(splits.train, splits.text_columns, 2, tokenizer.mask_token, 0)
    dataset = tokenize_sequence_dataset(transfer, tokenizer, splits.text_columns, 64)
    collator = DataCollatorWithPadding(tokenizer)
    teacher = AutoModelForSequenceClassification.from_pretrained(packaged_teacher_dir(), num_labels=2).eval()
    student = AutoModelForSequenceClassification.from_config(preset_config("minilm-3l-384h", num_labels=2))
    optimizer = torch.optim.AdamW(student.parameters(), lr=1e-4)
    columns = ["input_ids", "token_type_ids", "attention_mask"]
    batches = [
        collator(
            [
                {name: dataset[index][name] for name in columns}
                for index in range(start, min(start + BATCH, len(dataset)))
            ]
        )
        for start in range(0, len(dataset), BATCH)
    ]

    def teacher_pass():
        with torch.no_grad():
            for batch in batches:
                teacher(**batch)

    def student_epoch():
        student.train()
        for batch in batches:
            loss = student(**batch, labels=torch.zeros(batch["input_ids"].shape[0], dtype=torch.long)).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()

    cache_dir = tempfile.mkdtemp()
    fingerprints = {"kind": "benchmark", "data": len(dataset)}
    cached_teacher_outputs(lambda: _teacher_logits(teacher, dataset, collator, 64), fingerprints, cache_dir)
    teacher_seconds = _timed(teacher_pass)
    student_seconds = _timed(student_epoch, repeats=1)
    read_seconds = _timed(lambda: cached_teacher_outputs(lambda: {}, fingerprints, cache_dir))
    without = SEEDS * EPOCHS * (student_seconds + teacher_seconds)
    with_cache = teacher_seconds + SEEDS * (EPOCHS * student_seconds + read_seconds)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; transfer set {len(dataset)} examples")
    print(
        f"teacher pass {teacher_seconds:.1f} s, student epoch {student_seconds:.1f} s, cached read {read_seconds:.2f} s"
    )
    print(
        f"{SEEDS} seeds x {EPOCHS} epochs: without the cache {without / 60:.1f} min, with it {with_cache / 60:.1f} "
        f"min ({without / with_cache:.2f}x faster)"
    )


if __name__ == "__main__":
    main()
