"""``compact-bert distill task``: the main job (``compact_bert.jobs.distill_task``) from the command line.

Every flag is a field of ``TaskDistillationSpec``: parsed once into the spec, the job run, its closing tables printed.
"""

from __future__ import annotations

from ..distillation.data import PACKAGED_TEACHER
from ..jobs.distill_task import DEFAULT_STUDENT_PRESET, TaskDistillationSpec, distill_task
from ..jobs.shipping import print_shipping_summary
from ..jobs.task_comparison import comparison_table
from .training_common import parse_arguments

__all__ = ["run"]

DESCRIPTION = (
    "The main job: fine-tune a teacher on SST-2, teach a small student that starts from its layers the teacher's "
    "predictions, fine-tune the layer-dropped teacher as the baseline, then score, time, export and card all of it. "
    f"Defaults: teacher {PACKAGED_TEACHER} (packaged, offline), student preset {DEFAULT_STUDENT_PRESET}, the bundled "
    "SST-2 slice, the GLUE SST-2 dev set, the task-distillation recipe (finetuning/task_recipe.py)."
)


def run(argv: list[str]) -> int:
    (spec,) = parse_arguments((TaskDistillationSpec,), argv, "compact-bert distill task", DESCRIPTION)
    summary = distill_task(spec).summary
    if "onnx_sst2_accuracy" in summary:
        print_shipping_summary(summary)
    print("\n" + comparison_table(summary))
    return 0
