"""Every shape of the tiny-student study against its teacher, eager and in ONNX Runtime, side by side on this machine.

``examples/tiny_students.py --report_latency`` times *trained* students, so it can only re-time what was trained on
the machine at hand. A model's latency does not depend on its weights (nor, for the MoE shape, much on its router:
random routers spread tokens about evenly across experts, as the teacher-split ones do), so this script builds every
shape of the study's ``SHAPES`` with random weights — dense ones as the plain BERT they ship as, the MiniMoE one as
compact-bert's own model — with the study's head (CoNLL-2003's 9 tags), exports each as ``compact-bert export`` does
and times them all against the packaged teacher (all-MiniLM-L6-v2) at batch 1 x 128, eager on compact-bert's path
(``optimize_for_inference``) and in ONNX Runtime in its fastest exported form, interleaved in one process
(``evaluation.runtime_latency``). Printed: each shape's ratio to the teacher on each path, one column per repeat.

Run: ``python benchmarks/bench_tiny_shapes.py`` (about 3 minutes on 2 cores, most of it exporting; ``--shapes`` a
part of them, ``--rounds`` and ``--repeats``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository's examples/ (the study's SHAPES)


def exported_runners(configs: dict, inputs: dict, scratch: Path) -> dict:
    """An eager runner (compact-bert's path) and an ONNX Runtime runner (the fastest exported form, as ``compact-bert
    export`` writes it) for a random-weight token classifier of each config, keyed ``"<name> eager"`` and
    ``"<name> onnx"``; the exports go under ``scratch``, which must outlive the runners."""
    import torch
    import transformers

    from compact_bert.evaluation.runtime_latency import eager_runner, onnxruntime_runner
    from compact_bert.export.bert_onnx import fastest_onnx_file
    from compact_bert.export.onnx_exporter import export_onnx

    runners = {}
    for name, config in configs.items():
        torch.manual_seed(0)
        model = transformers.AutoModelForTokenClassification.from_config(config).eval()
        folder, onnx_folder = scratch / name, scratch / f"{name}-onnx"
        model.save_pretrained(folder)
        export_onnx(folder, onnx_folder, "token-classification")
        runners[f"{name} eager"] = eager_runner(model, inputs, optimize=True)
        runners[f"{name} onnx"] = onnxruntime_runner(fastest_onnx_file(onnx_folder), inputs)
    return runners


def timing_arguments(argv, description: str, rounds: int, repeats: int, repeats_help: str, extra=None):
    """The benchmarks' ``--rounds`` (timed rounds per repeat) and ``--repeats`` with their defaults, parsed from
    ``argv`` after ``extra(parser)`` added any other options; either below 1 is refused before anything is built."""
    parser = argparse.ArgumentParser(description=description)
    if extra is not None:
        extra(parser)
    parser.add_argument("--rounds", type=int, default=rounds, help=f"Timed rounds per repeat ({rounds}).")
    parser.add_argument("--repeats", type=int, default=repeats, help=f"{repeats_help} ({repeats}).")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.repeats < 1:
        parser.error(f"--rounds and --repeats must be at least 1, got {args.rounds} and {args.repeats}.")
    return parser, args


def shape_configs(shapes: list[str], num_labels: int = 9) -> dict:
    """The packaged teacher's config (``"teacher"``) and each of the study's ``shapes`` built from it as the study
    builds its students (``preset_config`` with the shape's overrides), all with CoNLL-2003's 9-tag head."""
    import transformers

    from compact_bert.configuration import preset_config
    from compact_bert.distillation.teachers import resolve_model_path
    from examples.tiny_students import SHAPES

    teacher_config = transformers.AutoConfig.from_pretrained(
        resolve_model_path("all-MiniLM-L6-v2"), num_labels=num_labels
    )
    configs = {"teacher": teacher_config}
    for shape in shapes:
        preset, overrides = SHAPES[shape]
        configs[shape] = preset_config(preset, teacher_config, **overrides)
        configs[shape].num_labels = num_labels
    return configs


def main(argv: list[str] | None = None) -> None:
    from compact_bert.evaluation.runtime_latency import device_description, latency_inputs, measure_interleaved
    from examples.tiny_students import SHAPES

    def shapes(parser):
        parser.add_argument(
            "--shapes",
            nargs="+",
            choices=sorted(SHAPES),
            default=list(SHAPES),
            help="The study's shapes to time (all).",
        )

    _, args = timing_arguments(
        argv, __doc__.split("\n\n")[0], 20, 2, "Measurements of every runner, printed side by side", shapes
    )

    configs = shape_configs(args.shapes)
    inputs = latency_inputs(configs["teacher"].vocab_size, 1, 128)
    with tempfile.TemporaryDirectory(prefix="bench-tiny-shapes-") as scratch:
        runners = exported_runners(configs, inputs, Path(scratch))
        repeats = [measure_interleaved(runners, rounds=args.rounds) for _ in range(args.repeats)]
    print(device_description())
    teacher_ms = {
        runtime: ", ".join(f"{measured[f'teacher {runtime}'].median_ms:.2f}" for measured in repeats)
        for runtime in ("eager", "onnx")
    }
    print(f"teacher: eager {teacher_ms['eager']} ms | ONNX Runtime {teacher_ms['onnx']} ms")
    print("shape | eager / teacher | ONNX Runtime / teacher")
    for shape in args.shapes:
        cells = []
        for runtime in ("eager", "onnx"):
            ratios = (
                measured[f"{shape} {runtime}"].median_ms / measured[f"teacher {runtime}"].median_ms
                for measured in repeats
            )
            cells.append(", ".join(f"{ratio:.3f}" for ratio in ratios))
        print(f"{shape} | " + " | ".join(cells), flush=True)


if __name__ == "__main__":
    main()
