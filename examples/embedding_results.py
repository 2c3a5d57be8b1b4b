"""The README's embedding table: compact and MoE students distilled from all-MiniLM-L6-v2's sentence embeddings.

For each seed, four students learn the packaged teacher's embeddings with ``compact-bert distill embeddings``
(MSE on the pooled, normalised embeddings; every student starts from the teacher's layers 1, 2, 4, 5 — the uniform
map — with Minitron width selection and a projection back to 384 for the 192-wide ones, and upcycled experts for
the MiniMoE ones): ``minimoe-4l-384h`` and its dense twin ``minilm-4l-384h`` (equal FLOPs per token: paper 002's
comparison, for embeddings), ``minimoe-4l-192h`` and ``minilm-4l-192h``.

Every student gets the same CPU time of training (``--cpu_minutes``): each shape's CPU seconds per optimizer step
are measured once on the training batches (a few steps of forward, backward and AdamW) and its ``--max_steps`` set
to the budget over that; the steps are stored in ``steps.json`` and reused, so a re-run trains exactly the same
steps. Training data: the bundled sentences (the STS-B train slice's sentences without scores and the SST-2 training
slice); the teacher's embeddings are computed once into a cache shared by every run. Scored once at the end on the
STS Benchmark dev set (1,500 pairs; never used for a choice): Spearman of cosine similarity ×100 and the paraphrase
recall@1.

Latency: the ONNX export with pooling and normalisation inside the graph, its dynamic int8 model, and eager PyTorch,
at batch 1 x 128 and batch 32 x 128, interleaved in one process against the teacher exported the same way.

Every finished run leaves ``recipe_run.json`` in its folder and is not repeated when the recipe is run again.
Outcome: ``results.md`` and ``results.json`` in ``--output_dir``.

Run: ``python -m examples.embedding_results --output_dir runs/embedding_results``;
``--measure FOLDER ...`` times other folders (the default command's student) the same way.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

import torch

from compact_bert.cli import distill_embeddings_command
from compact_bert.distillation.teachers import resolve_model_path
from compact_bert.jobs import distill_embeddings

__all__ = ["SHAPES", "main", "measure_latency", "seconds_per_step"]

TEACHER = "all-MiniLM-L6-v2"
SHAPES = ("minimoe-4l-384h", "minilm-4l-384h", "minimoe-4l-192h", "minilm-4l-192h")
RUN_RECORD = "recipe_run.json"
_PROBE_STEPS = 8


def seconds_per_step(shape: str, cache_dir: Path) -> float:
    """CPU seconds (all threads) per optimizer step of ``shape`` on the default training batches: the median of
    ``_PROBE_STEPS`` steps of forward, MSE, backward and AdamW, after one warm-up step."""
    from compact_bert.distillation.embedding_config import EmbeddingDistillationConfig
    from compact_bert.distillation.embedding_data import EmbeddingDistillationCollator, tokenize_sentences
    from compact_bert.distillation.embedding_trainer import embedding_distillation_loss
    from compact_bert.embeddings.sentences import read_sentences
    from compact_bert.jobs.distill_embeddings import default_sentence_files

    settings = EmbeddingDistillationConfig(output_dir=str(cache_dir / "probe"), report_to="none")
    teacher, tokenizer = distill_embeddings.load_teacher_embedder(TEACHER, None, True, settings.max_seq_length)
    sentences = read_sentences([str(path) for path in default_sentence_files()])
    batch_size = settings.per_device_train_batch_size
    data = tokenize_sentences(sentences[: batch_size * (_PROBE_STEPS + 1)], tokenizer, settings.max_seq_length)
    arguments = distill_embeddings.EmbeddingStudentArguments(student_preset=shape)
    student, _ = distill_embeddings._student_embedder(arguments, teacher, tokenizer, data, 0, settings.max_seq_length)
    targets = torch.randn(len(data), teacher.embedding_dimension)
    collate = EmbeddingDistillationCollator(tokenizer, targets)
    optimizer = torch.optim.AdamW(student.parameters(), lr=1e-4)
    student.train()
    timings = []
    for step in range(_PROBE_STEPS + 1):
        batch = collate([data[index] for index in range(step * batch_size, (step + 1) * batch_size)])
        start = time.process_time()
        inputs = {name: batch[name] for name in ("input_ids", "attention_mask", "token_type_ids")}
        embedding_distillation_loss(student(**inputs).sentence_embedding, batch["teacher_embedding"]).backward()
        optimizer.step()
        optimizer.zero_grad()
        timings.append(time.process_time() - start)
    return statistics.median(timings[1:])


def _run(folder: Path, arguments: list[str]) -> dict:
    record_path = folder / RUN_RECORD
    if record_path.is_file():
        return json.loads(record_path.read_text())
    if folder.exists():  # an interrupted run: its partial folder is not a result
        shutil.rmtree(folder)
    arguments = [*arguments, "--output_dir", str(folder)]
    print("$ compact-bert distill embeddings " + " ".join(arguments), flush=True)
    cpu_start, wall_start = time.process_time(), time.perf_counter()
    distill_embeddings_command.run(arguments)
    summary = json.loads((folder / "run_summary.json").read_text())
    record = {
        "spearman": summary["eval_sts_spearman_cosine"],
        "recall": summary["eval_sts_paraphrase_recall_at_1"],
        "teacher_spearman": summary["teacher_sts"]["spearman_cosine"],
        "teacher_recall": summary["teacher_sts"]["paraphrase_recall_at_1"],
        "steps": summary["optimizer_steps"],
        "cpu_seconds": round(time.process_time() - cpu_start, 1),
        "wall_seconds": round(time.perf_counter() - wall_start, 1),
    }
    record_path.write_text(json.dumps(record, indent=2) + "\n")
    return record


def _export(model_dir: Path, output_dir: Path) -> dict[str, Path]:
    """``model.onnx`` (pooling and normalisation inside) and ``model_quantized.onnx`` of a sentence-transformers
    folder; the packaged teacher (a BertModel) is exported by the same dynamo path as compact-bert's families."""
    from compact_bert.embeddings.sentence_transformers_folder import load_sentence_embedder
    from compact_bert.export.onnx_exporter import export_module_with_dynamo, random_graph_inputs
    from compact_bert.export.onnx_quantization import QUANTIZED_FILE, quantize_onnx_file
    from compact_bert.export.sentence_embedding_parity import check_sentence_transformers_parity

    onnx_path, int8_path = output_dir / "model.onnx", output_dir / QUANTIZED_FILE
    if not int8_path.is_file():
        output_dir.mkdir(parents=True, exist_ok=True)
        embedder = load_sentence_embedder(model_dir).eval()
        export_module_with_dynamo(
            embedder, ("sentence_embedding",), onnx_path, random_graph_inputs(embedder.config, 2, 16, seed=0)
        )
        check_sentence_transformers_parity(onnx_path, model_dir)
        quantize_onnx_file(onnx_path, int8_path)
    return {"onnx": onnx_path, "int8": int8_path}


def measure_latency(folders: dict[str, Path], output_dir: Path) -> dict:
    """Median milliseconds of every model in eager PyTorch, ONNX Runtime and int8 ONNX Runtime, at batch 1 x 128
    and 32 x 128, all interleaved in one process per input shape."""
    from compact_bert.embeddings.sentence_transformers_folder import load_sentence_embedder
    from compact_bert.evaluation.runtime_latency import (
        eager_runner,
        latency_inputs,
        measure_interleaved,
        onnxruntime_runner,
    )

    exported = {name: _export(folder, output_dir / "onnx" / name) for name, folder in folders.items()}
    embedders = {name: load_sentence_embedder(folder).eval() for name, folder in folders.items()}
    latency: dict = {}
    for batch, rounds in ((1, 30), (32, 8)):
        inputs = latency_inputs(embedders["teacher"].config.vocab_size, batch, 128)
        runners = {}
        for name, embedder in embedders.items():
            runners[f"{name}|eager"] = eager_runner(embedder, inputs)
            runners[f"{name}|onnx"] = onnxruntime_runner(exported[name]["onnx"], inputs)
            runners[f"{name}|int8"] = onnxruntime_runner(exported[name]["int8"], inputs)
        measured = measure_interleaved(runners, rounds=rounds)
        for key, result in measured.items():
            name, runtime = key.split("|")
            latency.setdefault(name, {})[f"{runtime}_b{batch}"] = result.median_ms
    return latency


def _mean_spread(values: list[float]) -> str:
    mean = statistics.mean(values)
    return f"{mean:.2f} ± {statistics.stdev(values):.2f}" if len(values) > 1 else f"{mean:.2f}"


def write_report(output_dir: Path, runs: dict, latency: dict, seeds: list[int], budget: float) -> str:
    teacher = runs[SHAPES[0]][0]
    teacher_ms = latency["teacher"]
    rows = [
        "| model | STS-B dev Spearman | kept | paraphrase recall@1 | steps | CPU min | eager b1 | ONNX b1 | int8 b1 "
        "| eager b32 | ONNX b32 | int8 b32 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
        f"| teacher (all-MiniLM-L6-v2) | {teacher['teacher_spearman']:.2f} | | {teacher['teacher_recall']:.1f} | | | "
        + " | ".join(
            f"{teacher_ms[key]:.1f} ms"
            for key in ("eager_b1", "onnx_b1", "int8_b1", "eager_b32", "onnx_b32", "int8_b32")
        )
        + " |",
    ]
    for shape in SHAPES:
        records = runs[shape]
        spearman = [record["spearman"] for record in records]
        kept = 100 * statistics.mean(spearman) / teacher["teacher_spearman"]
        ratios = " | ".join(
            f"{latency[shape][key] / teacher_ms[key]:.2f}×"
            for key in ("eager_b1", "onnx_b1", "int8_b1", "eager_b32", "onnx_b32", "int8_b32")
        )
        rows.append(
            f"| {shape} | {_mean_spread(spearman)} | {kept:.1f}% | "
            f"{_mean_spread([record['recall'] for record in records])} | {records[0]['steps']} | "
            f"{statistics.mean(record['cpu_seconds'] for record in records) / 60:.1f} | {ratios} |"
        )
    table = "\n".join(rows)
    moe, dense = (
        statistics.mean(r["spearman"] for r in runs["minimoe-4l-384h"]),
        statistics.mean(r["spearman"] for r in runs["minilm-4l-384h"]),
    )
    narrow_moe, narrow_dense = (
        statistics.mean(r["spearman"] for r in runs[name]) for name in ("minimoe-4l-192h", "minilm-4l-192h")
    )
    text = (
        f"Seeds {seeds}; {budget:g} CPU-minutes of distillation per student (steps set from each shape's measured "
        f"CPU seconds per step); latency ratios to the teacher, eager / ONNX Runtime / int8, batch 1 x 128 and "
        f"32 x 128.\n\n{table}\n\nMoE vs its dense twin at equal FLOPs per token: 384 wide {moe:.2f} vs "
        f"{dense:.2f}, 192 wide {narrow_moe:.2f} vs {narrow_dense:.2f} (Spearman, mean over seeds).\n"
    )
    (output_dir / "results.md").write_text(text)
    (output_dir / "results.json").write_text(
        json.dumps({"runs": runs, "latency_ms": latency, "seeds": seeds, "cpu_minutes": budget}, indent=2) + "\n"
    )
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output_dir", type=Path, default=Path("runs/embedding_results"))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--cpu_minutes", type=float, default=5.0, help="CPU time of distillation per student.")
    parser.add_argument(
        "--measure",
        type=Path,
        nargs="+",
        default=None,
        help="Only measure the latency of these sentence-transformers folders against the teacher "
        "(eager, ONNX, int8; batch 1 and 32 x 128) and print it; exports go to --output_dir/onnx.",
    )
    args = parser.parse_args(argv)
    if args.measure:
        latency = measure_latency(
            {"teacher": resolve_model_path(TEACHER), **{path.name: path for path in args.measure}}, args.output_dir
        )
        for name, values in latency.items():
            print(
                name,
                ", ".join(
                    f"{key} {value:.1f} ms ({value / latency['teacher'][key]:.2f}x)" for key, value in values.items()
                ),
            )
        return 0
    args.output_dir.mkdir(parents=True, exist_ok=True)
    cache = args.output_dir / "teacher_cache"
    steps_path = args.output_dir / "steps.json"
    steps = json.loads(steps_path.read_text()) if steps_path.is_file() else {}
    for shape in SHAPES:
        if shape not in steps:
            steps[shape] = max(1, round(args.cpu_minutes * 60 / seconds_per_step(shape, args.output_dir)))
            steps_path.write_text(json.dumps(steps, indent=2) + "\n")
    print("Optimizer steps per student: " + json.dumps(steps), flush=True)
    runs: dict = {}
    for seed in args.seeds:
        for shape in SHAPES:
            folder = args.output_dir / f"seed-{seed}" / shape
            runs.setdefault(shape, []).append(
                _run(
                    folder,
                    [
                        "--student_preset",
                        shape,
                        "--seed",
                        str(seed),
                        "--max_steps",
                        str(steps[shape]),
                        "--teacher_cache_dir",
                        str(cache),
                        "--save_strategy",
                        "no",
                        "--report_to",
                        "none",
                        "--disable_tqdm",
                        "true",
                        "--use_cpu",
                        "true",
                    ],
                )
            )
    first = args.output_dir / f"seed-{args.seeds[0]}"
    latency = measure_latency(
        {"teacher": resolve_model_path(TEACHER), **{shape: first / shape for shape in SHAPES}}, args.output_dir
    )
    print(write_report(args.output_dir, runs, latency, args.seeds, args.cpu_minutes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
