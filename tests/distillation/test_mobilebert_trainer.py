"""MobileBERT knowledge transfer: each strategy's stages, freezing, loss terms, and a frozen teacher."""

from __future__ import annotations

import warnings

import pytest
import torch
from transformers import TrainerCallback, get_scheduler

from compact_bert.distillation.data import PretrainingCollator
from compact_bert.distillation.mobilebert_config import MobileBertDistillationConfig
from compact_bert.distillation.mobilebert_stages import parameter_unit, stage_at, unit_lr_scale
from compact_bert.distillation.mobilebert_trainer import MobileBertDistillationTrainer
from compact_bert.modeling import CompactMobileBertForPreTraining, IBBertForPreTraining
from compact_bert.training.compat import TRANSFORMERS_5
from tests.distillation.distributed_terms_script import same_device
from tests.distillation.helpers import held_out_blocks, tiny_ib_bert_config, tiny_mobilebert_config, tokenizer


class UnitSnapshots(TrainerCallback):
    """Copies every unit's parameters after each optimizer step (step 0 = before training)."""

    def __init__(self, model):
        self.model = model
        self.snapshots = {0: self._take()}

    def _take(self):
        return {name: parameter.detach().clone() for name, parameter in self.model.named_parameters()}

    def on_step_end(self, args, state, control, **kwargs):
        self.snapshots[state.global_step] = self._take()

    def changed_units(self, start: int, end: int) -> dict[str, float]:
        """Mean absolute change per unit between two snapshots."""
        totals: dict[str, list[float]] = {}
        for name, before in self.snapshots[start].items():
            change = (self.snapshots[end][name] - before).abs().mean().item()
            totals.setdefault(parameter_unit(name), []).append(change)
        return {unit: sum(values) / len(values) for unit, values in totals.items()}


def _trainer(tmp_path, strategy: str, max_steps: int, **fields):
    torch.manual_seed(0)
    teacher = IBBertForPreTraining(tiny_ib_bert_config())
    student = CompactMobileBertForPreTraining(tiny_mobilebert_config())
    args = MobileBertDistillationConfig(
        output_dir=str(tmp_path),
        strategy=strategy,
        max_steps=max_steps,
        per_device_train_batch_size=8,
        learning_rate=3e-3,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        use_cpu=True,
        seed=0,
        **fields,
    )
    trainer = MobileBertDistillationTrainer(
        model=student,
        teacher=teacher,
        args=args,
        train_dataset=held_out_blocks(True),
        eval_dataset=held_out_blocks(True, 16),
        data_collator=PretrainingCollator(tokenizer(), 0.15, True),
    )
    return trainer, teacher, student


def _logged(trainer, key):
    return [
        (entry["step"], entry[key]) for entry in trainer.state.log_history if key in entry and "eval_loss" not in entry
    ]


def test_akt_uses_one_combined_loss_and_learns(tmp_path):
    trainer, teacher, _student = _trainer(tmp_path, "akt", 12)
    teacher_before = {name: tensor.clone() for name, tensor in teacher.state_dict().items()}
    before = trainer.evaluate()
    trainer.train()
    after = trainer.evaluate()
    assert after["eval_feature_map_loss"] < before["eval_feature_map_loss"]
    assert after["eval_loss"] < before["eval_loss"]
    args = trainer.args
    for entry in (e for e in trainer.state.log_history if "feature_map_loss" in e):
        combined = (
            args.feature_map_weight * entry["feature_map_loss"]
            + args.attention_weight * entry["attention_loss"]
            + args.alpha * entry["mlm_loss"]
            + (1 - args.alpha) * entry["kd_loss"]
            + entry["nsp_loss"]
        )
        assert entry["loss"] == pytest.approx(combined, rel=1e-3)
        assert entry["stage"] == 0
    assert all(torch.equal(teacher_before[name], tensor) for name, tensor in teacher.state_dict().items())
    assert not any(parameter.requires_grad for parameter in teacher.parameters()) and not teacher.training
    assert all(same_device(parameter.device, trainer.accelerator.device) for parameter in trainer.teacher.parameters())
    assert (tmp_path / "loss_terms.png").stat().st_size > 1000


def test_jkt_switches_to_pretraining_distillation_at_the_configured_step(tmp_path):
    trainer, teacher, student = _trainer(tmp_path, "jkt", 13, layerwise_steps=10)
    snapshots = UnitSnapshots(student)
    trainer.add_callback(snapshots)
    # Embeddings and heads were copied from the teacher.
    torch.testing.assert_close(
        student.mobilebert.embeddings.word_embeddings.weight, teacher.ib_bert.embeddings.word_embeddings.weight
    )
    trainer.train()
    stages = dict(_logged(trainer, "stage"))
    assert [stages[step] for step in range(1, 14)] == [0] * 10 + [1] * 3
    assert {step for step, _ in _logged(trainer, "mlm_loss")} == {11, 12, 13}
    assert all(step <= 10 for step, _ in _logged(trainer, "feature_map_loss"))
    layerwise = snapshots.changed_units(0, 10)
    assert (
        layerwise["embeddings"] == 0
        and layerwise["head"] == 0
        and layerwise["layer_0"] > 0
        and layerwise["layer_1"] > 0
    )
    distillation = snapshots.changed_units(10, 13)
    assert all(change > 0 for change in distillation.values())
    losses = [value for step, value in _logged(trainer, "feature_map_loss")]
    assert sum(losses[-3:]) < sum(losses[:3])


def test_pkt_trains_exactly_one_layer_per_stage(tmp_path):
    trainer, teacher, student = _trainer(tmp_path, "pkt", 8, steps_per_stage=3)
    snapshots = UnitSnapshots(student)
    trainer.add_callback(snapshots)
    teacher_before = {name: tensor.clone() for name, tensor in teacher.state_dict().items()}
    trainer.train()
    first, second, distillation = (
        snapshots.changed_units(0, 3),
        snapshots.changed_units(3, 6),
        snapshots.changed_units(6, 8),
    )
    assert first["layer_0"] > 0 and first["layer_1"] == 0 and first["embeddings"] == 0 and first["head"] == 0
    assert second["layer_1"] > 0 and second["layer_0"] == 0 and second["embeddings"] == 0 and second["head"] == 0
    assert all(change > 0 for change in distillation.values())
    assert [entry for step, entry in _logged(trainer, "stage")] == [0, 0, 0, 1, 1, 1, 2, 2]
    assert all(torch.equal(teacher_before[name], tensor) for name, tensor in teacher.state_dict().items())


def test_pkt_soft_freezing_moves_lower_layers_less(tmp_path):
    trainer, _, student = _trainer(tmp_path, "pkt", 6, steps_per_stage=3, lower_layer_lr_scale=0.05)
    snapshots = UnitSnapshots(student)
    trainer.add_callback(snapshots)
    trainer.train()
    second = snapshots.changed_units(3, 6)
    assert 0 < second["layer_0"] < 0.5 * second["layer_1"]


def test_incompatible_teacher_is_a_clear_error(tmp_path):
    teacher = IBBertForPreTraining(tiny_ib_bert_config())
    student = CompactMobileBertForPreTraining(tiny_mobilebert_config(num_hidden_layers=3, num_attention_heads=2))
    args = MobileBertDistillationConfig(output_dir=str(tmp_path), max_steps=4, report_to="none", use_cpu=True)
    with pytest.raises(
        ValueError, match=r"num_hidden_layers: teacher 2 vs student 3; num_attention_heads: teacher 4 vs student 2"
    ):
        MobileBertDistillationTrainer(model=student, teacher=teacher, args=args)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"strategy": "bkt"}, "strategy"),
        ({"max_steps": -1}, "max_steps"),
        ({"alpha": 2.0}, "alpha"),
        ({"lower_layer_lr_scale": 3.0}, "lower_layer_lr_scale"),
        ({"layerwise_steps": 99}, "layerwise_steps"),
        ({"temperature": 0.0}, "temperature"),
    ],
)
def test_config_validation(tmp_path, fields, message):
    with pytest.raises(ValueError, match=message):
        MobileBertDistillationConfig(output_dir=str(tmp_path), **{"max_steps": 10, **fields})


def test_pkt_needs_enough_steps(tmp_path):
    args = MobileBertDistillationConfig(output_dir=str(tmp_path), max_steps=3, steps_per_stage=2, report_to="none")
    with pytest.raises(ValueError, match="PKT needs 2 layer stages of 2 steps"):
        MobileBertDistillationTrainer(
            model=CompactMobileBertForPreTraining(tiny_mobilebert_config()),
            teacher=IBBertForPreTraining(tiny_ib_bert_config()),
            args=args,
        )


# Every schedule transformers builds without extra arguments, plus ones that need `lr_scheduler_kwargs`.
STEP_SCHEDULES = [
    ("linear", None),
    ("cosine", None),
    ("cosine_with_restarts", None),
    ("polynomial", None),
    ("constant", None),
    ("constant_with_warmup", None),
    ("inverse_sqrt", None),
    ("cosine_with_min_lr", {"min_lr_rate": 0.1}),
    ("warmup_stable_decay", {"num_decay_steps": 3}),
]


@pytest.mark.parametrize(("scheduler", "kwargs"), STEP_SCHEDULES)
def test_every_step_schedule_times_the_stage_multipliers(tmp_path, scheduler, kwargs):
    max_steps, learning_rate = 9, 3e-3
    trainer, _, _ = _trainer(
        tmp_path,
        "pkt",
        max_steps,
        steps_per_stage=3,
        lower_layer_lr_scale=0.1,
        warmup_steps=2,
        lr_scheduler_type=scheduler,
        lr_scheduler_kwargs=kwargs,
    )
    optimizer = trainer.create_optimizer()
    scheduler_under_test = trainer.create_scheduler(max_steps, optimizer)
    reference_optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=learning_rate)
    reference = get_scheduler(
        scheduler,
        reference_optimizer,
        num_warmup_steps=2,
        num_training_steps=max_steps,
        scheduler_specific_kwargs=kwargs,
    )
    units = {group["unit"] for group in optimizer.param_groups}
    assert {"embeddings", "head", "layer_0", "layer_1"} <= units
    multipliers_seen = set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # stepping schedulers without optimizer steps
        for step in range(max_steps):
            base = reference_optimizer.param_groups[0]["lr"]
            stage = stage_at(trainer.stages, step)
            for group in optimizer.param_groups:
                multiplier = unit_lr_scale(group["unit"], stage, 0.1)
                multipliers_seen.add(multiplier)
                assert group["lr"] == pytest.approx(base * multiplier, rel=1e-9, abs=1e-15), (step, group["unit"])
            scheduler_under_test.step()
            reference.step()
    assert multipliers_seen == {0.0, 0.1, 1.0}


@pytest.mark.parametrize("scheduler", ["reduce_lr_on_plateau", *(["greedy"] if TRANSFORMERS_5 else [])])
def test_metric_driven_schedules_are_rejected_up_front(tmp_path, scheduler):
    with pytest.raises(ValueError, match="cannot be combined with the MobileBERT stage multipliers"):
        MobileBertDistillationConfig(
            output_dir=str(tmp_path), max_steps=10, lr_scheduler_type=scheduler, eval_strategy="steps", eval_steps=5
        )


def test_schedule_missing_its_arguments_is_rejected_up_front(tmp_path):
    with pytest.raises(ValueError, match="`lr_scheduler_type` 'cosine_with_min_lr' cannot be built"):
        MobileBertDistillationConfig(output_dir=str(tmp_path), max_steps=10, lr_scheduler_type="cosine_with_min_lr")
