"""Depth by latency budget: the line through the measured depths, the choice it makes, and ``finetune
--max_latency_ratio`` end to end with its early errors.

Which depth fits depends on the machine's timings, and these tests share 2 cores with others: where a test asserts
*which* depth is chosen, the clock is replaced by a fixed cost per layer (``fixed_timings``) and everything else — the
models built and run, the line, the choice, the run it shapes — is real. The real measurement runs in the depth
benchmark's smoke test (``tests/benchmarks/test_depth_budget_benchmark.py``), which asserts only what holds on any
machine."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from compact_bert.cli.main import main
from compact_bert.configuration import preset_config
from compact_bert.finetuning.bundled_data import bundled_sst2_files
from compact_bert.finetuning.depth_budget import _line, deepest_student_within_budget, narrowed_shapes
from tests.conftest import fixed_clock

TEACHER_SHAPE = {"hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128}


def test_the_line_through_the_medians_is_least_squares():
    assert _line({1: 3.0, 2: 5.0, 3: 7.0}) == pytest.approx((1.0, 2.0))
    fixed, slope = _line({1: 3.0, 2: 9.0, 3: 7.0})  # one disturbed round: the line still rises with depth
    assert slope == pytest.approx(2.0) and fixed == pytest.approx(7.0 / 3.0 + 0.0, abs=1.0)
    assert _line({2: 8.0}) == (0.0, 4.0)
    assert _line({1: 9.0, 2: 6.0, 3: 3.0}) == pytest.approx((6.0, 0.0))  # tilted by a busy machine: flat, not falling


@pytest.fixture
def fixed_timings(monkeypatch) -> SimpleNamespace:
    """``measure_interleaved`` that still runs every model once, then reports 1 ms + 1 ms per layer (the teacher:
    ``teacher_layers``, set by the test; the narrowed shapes: ``narrowed_ms``, one value for all or a list, widest
    first), as an idle machine would up to a constant. ``calls``: the runners' names."""
    state = SimpleNamespace(teacher_layers=None, narrowed_ms=None, calls=[])

    def measure(runners, rounds=30, warmup=3):
        state.calls.append(list(runners))
        for run in runners.values():
            run()

        def ms(name) -> float:
            if str(name).startswith("narrowed"):  # the tiny-student shapes: set by the test
                index = int(name.split()[1])
                return state.narrowed_ms[index] if isinstance(state.narrowed_ms, list) else state.narrowed_ms
            return 1.0 + (state.teacher_layers if name == "teacher" else name)

        return {name: SimpleNamespace(median_ms=ms(name)) for name in runners}

    fixed_clock(monkeypatch, measure)
    return state


def test_the_deepest_depth_within_the_budget_is_chosen_and_an_impossible_budget_is_named(fixed_timings):
    teacher = preset_config("minilm-6l-384h", num_hidden_layers=4, **TEACHER_SHAPE)
    student = preset_config("minilm-3l-96h", **TEACHER_SHAPE)
    fixed_timings.teacher_layers = 4  # teacher 5 ms; 1-3 layers 2 / 3 / 4 ms: 0.4x / 0.6x / 0.8x
    choice = deepest_student_within_budget(student, teacher, 0.7, rounds=3)
    assert fixed_timings.calls == [["teacher", 1, 2, 3]]
    assert choice.num_hidden_layers == 2 and choice.ratios == {1: 0.4, 2: 0.6, 3: 0.8}
    record = choice.as_record()
    assert record["num_hidden_layers"] == 2 and set(record["measured_ms_by_depth"]) == {"1", "2", "3"}
    assert (
        "2 layers: the deepest student within 0.7x" in record["reason"]
        and "3 layers would be 0.80x" in record["reason"]
    )
    assert deepest_student_within_budget(student, teacher, 1.0, rounds=3).num_hidden_layers == 3
    with pytest.raises(
        ValueError, match=r"--max_latency_ratio 0.3: no student depth fits; .*1 layer 0.40x, 2 layers 0.60x"
    ):
        deepest_student_within_budget(student, teacher, 0.3, rounds=3)
    with pytest.raises(ValueError, match=r"must be in \(0, 1\]"):
        deepest_student_within_budget(student, teacher, 1.5, rounds=3)


def test_the_narrowed_shape_is_taken_only_where_no_whole_student_half_the_teachers_depth_fits(fixed_timings):
    teacher = preset_config("minilm-6l-384h", **TEACHER_SHAPE)
    student = preset_config("minilm-3l-96h", **TEACHER_SHAPE)
    fixed_timings.teacher_layers = 6  # teacher 7 ms; 1-5 layers 2-6 ms; 3 narrowed layers 2 ms
    fixed_timings.narrowed_ms = 2.0
    choice = deepest_student_within_budget(student, teacher, 0.3, rounds=3, narrow=True)
    assert fixed_timings.calls[-1] == ["teacher", 1, 2, 3, 4, 5, "narrowed 0", "narrowed 1"]
    # the widest that fits: five sixths (and three quarters) of 4 heads of 16 channels (3 heads, 48 channels), an FFN
    # twice that
    assert choice.overrides() == {
        "num_hidden_layers": 3,
        "hidden_size": 48,
        "num_attention_heads": 3,
        "intermediate_size": 96,
    }
    assert choice.narrowed_ratio == 0.286 and choice.as_record()["narrowed"]["hidden_size"] == 48
    assert "3 layers of 48 channels, 3 heads and 96 FFN neurons (the widest narrowed shape)" in choice.reason
    assert "1 whole layer would" in choice.reason  # 1 whole layer fits (0.29x) but is shallower
    assert choice.as_record()["narrowed_latency_ratios"] == {
        "3 layers of 48 channels, 3 heads and 96 FFN neurons": 0.286,
        "3 layers of 32 channels, 2 heads and 64 FFN neurons": 0.286,
    }
    fixed_timings.narrowed_ms = [
        2.2,
        2.0,
    ]  # the wider shape over budget (0.31x): two thirds of the heads, half the FFN
    narrower = deepest_student_within_budget(student, teacher, 0.3, rounds=3, narrow=True)
    assert narrower.overrides() == {
        "num_hidden_layers": 3,
        "hidden_size": 32,
        "num_attention_heads": 2,
        "intermediate_size": 64,
    }
    assert narrower.narrowed_ratio == 0.286
    assert (
        "3 layers of 32 channels, 2 heads and 64 FFN neurons (3 layers of 48 channels, 3 heads and 96 FFN neurons would be 0.31x)"
        in narrower.reason
    )
    whole = deepest_student_within_budget(student, teacher, 0.6, rounds=3, narrow=True)
    assert whole.overrides() == {"num_hidden_layers": 3} and whole.narrowed is None  # 3 whole layers fit: 0.57x
    assert whole.narrowed_ratio is None and len(whole.narrowed_ratios) == 2
    assert deepest_student_within_budget(student, teacher, 0.3, rounds=3).overrides() == {"num_hidden_layers": 1}
    with pytest.raises(
        ValueError, match=r"no student depth fits; .*3 layers of 48 channels, .* 0.31x; 3 layers of 32"
    ):
        deepest_student_within_budget(student, teacher, 0.2, rounds=3, narrow=True)


def test_the_widest_narrowed_shape_that_fits_is_taken_and_the_wider_ones_are_named(fixed_timings):
    """Twelve heads of 8 channels give four narrowed widths (10 heads with two FFNs, 9 and 8 heads); the first that
    fits the budget is taken — the smaller FFN at the widest attention where the larger is over, then the next
    attention — and the reason says what every wider one would have cost."""
    twelve_heads = {"hidden_size": 96, "num_attention_heads": 12, "intermediate_size": 192}
    teacher = preset_config("minilm-6l-384h", **twelve_heads)
    student = preset_config("minilm-3l-96h", **twelve_heads)
    fixed_timings.teacher_layers = 6  # teacher 7 ms; 3 whole layers 4 ms (0.57x)
    fixed_timings.narrowed_ms = [2.2, 2.1, 2.0, 1.9]  # 0.31x, 0.30x, 0.29x, 0.27x
    choice = deepest_student_within_budget(student, teacher, 0.3, rounds=3, narrow=True)
    assert choice.overrides() == {
        "num_hidden_layers": 3,
        "hidden_size": 80,
        "num_attention_heads": 10,
        "intermediate_size": 112,
    }
    assert "(3 layers of 80 channels, 10 heads and 160 FFN neurons would be 0.31x):" in choice.reason
    assert list(choice.narrowed_ratios.values()) == [0.314, 0.3, 0.286, 0.271]
    fixed_timings.narrowed_ms = [2.2, 2.2, 2.0, 1.9]  # both 10-head shapes over: the 9-head one
    narrower = deepest_student_within_budget(student, teacher, 0.3, rounds=3, narrow=True)
    assert narrower.overrides() == {
        "num_hidden_layers": 3,
        "hidden_size": 72,
        "num_attention_heads": 9,
        "intermediate_size": 144,
    }
    assert (
        "(3 layers of 80 channels, 10 heads and 160 FFN neurons would be 0.31x, "
        "3 layers of 80 channels, 10 heads and 112 FFN neurons would be 0.31x):" in narrower.reason
    )


def test_the_narrowed_shapes_of_the_main_jobs_preset_are_the_studys():
    """The widths ``--max_latency_ratio`` times for the main job's student are the four the tiny-student study
    trained (examples/tiny_students.py): 320 channels with 10 heads and a 640-neuron FFN, the same attention with
    448, 288 with 9 and 576, then 256 with 8 and 768. A student with too few heads for a wider shape gets only the
    narrower one, and a width whose FFN would be no larger than the next one's is left out."""
    assert narrowed_shapes(preset_config("minilm-3l-384h")) == [
        {"hidden_size": 320, "num_attention_heads": 10, "intermediate_size": 640},
        {"hidden_size": 320, "num_attention_heads": 10, "intermediate_size": 448},
        {"hidden_size": 288, "num_attention_heads": 9, "intermediate_size": 576},
        {"hidden_size": 256, "num_attention_heads": 8, "intermediate_size": 768},
    ]
    three_heads = preset_config("minilm-3l-96h", num_attention_heads=3)
    assert [width["num_attention_heads"] for width in narrowed_shapes(three_heads)] == [2]
    # four heads of 16 channels: five sixths and three quarters both keep 3 heads, whose FFN twice the width (96)
    # is larger than 1.4 times it (67): one 3-head shape, then the 2-head one
    four_heads = preset_config("minilm-3l-96h", hidden_size=64, num_attention_heads=4, intermediate_size=128)
    assert [(width["num_attention_heads"], width["intermediate_size"]) for width in narrowed_shapes(four_heads)] == [
        (3, 96),
        (2, 64),
    ]


QUICK = [
    "--task_name",
    "sst2",
    "--max_train_samples",
    "32",
    "--max_eval_samples",
    "16",
    "--per_device_train_batch_size",
    "16",
    "--num_train_epochs",
    "1",
    "--report_to",
    "none",
    "--eval_strategy",
    "no",
    "--save_strategy",
    "no",
    "--load_best_model_at_end",
    "false",
    "--disable_tqdm",
    "true",
    "--max_seq_length",
    "32",
]


def _data() -> list[str]:
    files = bundled_sst2_files()
    return ["--train_file", str(files["train"]), "--validation_file", str(files["validation"])]


def test_finetune_takes_the_depth_its_budget_allows_against_its_teacher(tmp_path, capsys, fixed_timings):
    fixed_timings.teacher_layers = 3  # teacher 4 ms; 1-2 layers 2 / 3 ms: 0.5x / 0.75x
    teacher = tmp_path / "teacher"
    shape = json.dumps({**TEACHER_SHAPE, "num_hidden_layers": 3})
    argv = ["finetune", "--model_name_or_path", "minilm-3l-96h", "--model_overrides", shape, *_data(), *QUICK]
    assert main([*argv, "--output_dir", str(teacher)]) == 0
    student = tmp_path / "student"
    budget = ["--teacher", str(teacher), "--max_latency_ratio", "1.0", "--output_dir", str(student)]
    budget += ["--teacher_cache_dir", str(tmp_path / "cache")]
    assert main([*argv[:3], "--model_overrides", json.dumps(TEACHER_SHAPE), *argv[5:], *budget]) == 0
    assert "Depth by latency budget: 2 layers: the deepest student within 1.0x" in capsys.readouterr().out
    summary = json.loads((student / "run_summary.json").read_text())
    assert summary["depth_by_latency_budget"]["num_hidden_layers"] == 2
    assert summary["depth_by_latency_budget"]["latency_ratio_by_depth"] == {"1": 0.5, "2": 0.75}
    assert summary["teacher_initialization"]["layer_map"] == [1, 2]
    assert json.loads((student / "config.json").read_text())["num_hidden_layers"] == 2
    # the card says the budget sized it, and what the shape measured (teacher 4 ms here)
    card = (student / "README.md").read_text(encoding="utf-8")
    sized = "- Sized by `--max_latency_ratio 1.0`: timed against the teacher with random weights before training, this"
    assert f"{sized} shape ran at 0.75x its latency (teacher 4.0 ms; batch 1 x 128, compact-bert's eager path" in card

    def fails(extra) -> str:
        with pytest.raises(SystemExit) as raised:
            main([*argv[:3], "--model_overrides", json.dumps(TEACHER_SHAPE), *argv[5:], *extra])
        return str(raised.value.code)

    out = ["--output_dir", str(tmp_path / "never")]
    assert "give --teacher" in fails(["--max_latency_ratio", "0.5", *out])
    assert "no student depth fits" in fails(["--teacher", str(teacher), "--max_latency_ratio", "0.001", *out])
    with pytest.raises(SystemExit) as raised:
        main(["finetune", "--model_name_or_path", str(teacher), *_data(), *QUICK, *budget[:4], *out])
    assert "trained model folder, whose depth is fixed" in str(raised.value.code)
    with pytest.raises(SystemExit) as raised:
        main([*argv, "--teacher", str(teacher), "--max_latency_ratio", "0.5", *out])
    assert "drop it from --model_overrides" in str(raised.value.code)
    assert not (tmp_path / "never" / "model.safetensors").exists()


def test_a_narrowed_student_trains_the_tiny_recipe_unless_its_settings_are_given(tmp_path, fixed_timings):
    """``finetune --teacher --max_latency_ratio`` that chooses the narrowed shape trains it
    ``NARROWED_STUDENT_EPOCHS`` on the teacher's soft targets alone (the tiny-student recipe: it relearns to use the
    channels it kept); a given ``--num_train_epochs`` and ``--distillation_alpha`` are kept; with ``--unlabeled_file``
    the width and epochs of the recipe over unlabeled text."""
    from compact_bert.finetuning.task_recipe import (
        NARROWED_DISTILLATION_ALPHA,
        NARROWED_STUDENT_EPOCHS,
        UNLABELED_STUDENT_EPOCHS,
    )

    fixed_timings.teacher_layers = 4  # teacher 5 ms; 1-3 whole layers 0.4x-0.8x; 2 narrowed layers 0.3x
    fixed_timings.narrowed_ms = 1.5
    at = QUICK.index("--num_train_epochs")
    one_epoch, untimed = QUICK[at : at + 2], QUICK[:at] + QUICK[at + 2 :]
    teacher = tmp_path / "teacher"
    teacher_shape = json.dumps({"num_hidden_layers": 4})
    base = ["finetune", "--model_name_or_path", "minilm-3l-96h", *_data()]
    assert main([*base, "--model_overrides", teacher_shape, *QUICK, "--output_dir", str(teacher)]) == 0
    budget = ["--teacher", str(teacher), "--max_latency_ratio", "0.3", "--teacher_cache_dir", str(tmp_path / "cache")]
    given = [*one_epoch, "--distillation_alpha", "0.25"]
    for extra, epochs, alpha in (([], NARROWED_STUDENT_EPOCHS, NARROWED_DISTILLATION_ALPHA), (given, 1.0, 0.25)):
        student = tmp_path / f"student-{epochs:g}"
        assert main([*base, *untimed, *budget, *extra, "--output_dir", str(student)]) == 0
        summary = json.loads((student / "run_summary.json").read_text())
        assert summary["depth_by_latency_budget"]["narrowed"] == {
            "hidden_size": 64,
            "num_attention_heads": 2,
            "intermediate_size": 192,
        }
        assert (summary["epoch"], summary["task_distillation"]["alpha"]) == (epochs, alpha), extra
    # with unlabeled sentences: the one width for a student that learns from them (2 of 3 heads, an FFN twice the
    # channels), over the slice and those sentences without copies, for their recipe's epochs
    sentences = tmp_path / "unlabeled.tsv"
    rows = bundled_sst2_files()["validation"].read_text(encoding="utf-8").splitlines()[1:21]
    sentences.write_text("sentence\n" + "".join(row.split("\t")[0] + "\n" for row in rows), encoding="utf-8")
    student = tmp_path / "student-unlabeled"
    unlabeled = ["--unlabeled_file", str(sentences), "--output_dir", str(student)]
    assert main([*base, *untimed, *budget, *unlabeled]) == 0
    summary = json.loads((student / "run_summary.json").read_text())
    narrowed = {"hidden_size": 64, "num_attention_heads": 2, "intermediate_size": 128}
    assert summary["depth_by_latency_budget"]["narrowed"] == narrowed
    assert "this shape ran at 0.3x its latency (teacher 5.0 ms;" in (student / "README.md").read_text("utf-8")
    distillation = summary["task_distillation"]
    assert (summary["epoch"], distillation["augment_copies"], distillation["unlabeled_examples"]) == (
        UNLABELED_STUDENT_EPOCHS,
        0,
        20,
    )
