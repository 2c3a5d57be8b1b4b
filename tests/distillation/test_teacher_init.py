"""Students initialized from a teacher: identity maps reproduce it, upcycled experts reproduce its FFN, width
reduction keeps what it reports, routers start balanced, and shapes that cannot map fail naming the field."""

from __future__ import annotations

import pytest
import torch
import transformers

from compact_bert.configuration import MiniMoEConfig, MoEBertConfig
from compact_bert.distillation.importance import measure_teacher_activations
from compact_bert.distillation.teacher_init import (
    initialize_from_teacher,
    parse_layer_map,
    shared_neuron_count,
    uniform_layer_map,
)
from compact_bert.distillation.teacher_weights import TeacherShapeError
from compact_bert.modeling import MiniMoEModel, MoEBertModel

FAMILIES = {"minimoe": (MiniMoEConfig, MiniMoEModel), "moe_bert": (MoEBertConfig, MoEBertModel)}
SHAPE = {
    "vocab_size": 96,
    "hidden_size": 32,
    "num_attention_heads": 4,
    "intermediate_size": 64,
    "max_position_embeddings": 40,
    "type_vocab_size": 2,
}


def _bert_teacher(layers: int = 4, **overrides):
    torch.manual_seed(0)
    config = transformers.BertConfig(**{**SHAPE, "num_hidden_layers": layers, **overrides})
    return transformers.BertModel(config).eval()


def _student(family: str, **fields):
    config_class, model_class = FAMILIES[family]
    config = config_class(
        **{
            **SHAPE,
            "num_hidden_layers": 4,
            "num_experts": 1,
            "hidden_dropout_prob": 0.0,
            "attention_probs_dropout_prob": 0.0,
            **fields,
        }
    )
    return model_class(config).eval()


def _inputs(seed: int = 1):
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(1, SHAPE["vocab_size"], (3, 20), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 14:] = 0
    token_type_ids = torch.zeros_like(input_ids)
    token_type_ids[:, 10:] = 1
    return {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}


def _calibration(count: int = 6):
    return [_inputs(seed) for seed in range(10, 10 + count)]


def _real(tensor, mask):
    return tensor[mask.bool()]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_identity_map_reproduces_a_bert_teacher_exactly(family):
    teacher = _bert_teacher()
    student = _student(family)
    record = initialize_from_teacher(student, teacher)
    inputs = _inputs()
    with torch.no_grad():
        expected, got = teacher(**inputs), student(**inputs)
    assert record["layer_map"] == [0, 1, 2, 3] and record["hidden_channels"] == "all"
    mask = inputs["attention_mask"]
    torch.testing.assert_close(
        _real(got.last_hidden_state, mask), _real(expected.last_hidden_state, mask), atol=1e-5, rtol=1e-5
    )
    torch.testing.assert_close(got.pooler_output, expected.pooler_output, atol=1e-5, rtol=1e-5)


def test_a_fine_tuned_teachers_task_head_is_copied_with_its_labels():
    torch.manual_seed(0)
    config = transformers.BertConfig(**SHAPE, num_hidden_layers=2, num_labels=3)
    teacher = transformers.BertForSequenceClassification(config).eval()
    student_config = MiniMoEConfig(
        **SHAPE, num_hidden_layers=2, num_experts=1, num_labels=3, id2label=config.id2label, label2id=config.label2id
    )
    student = transformers.AutoModelForSequenceClassification.from_config(student_config).eval()
    record = initialize_from_teacher(student, teacher)
    inputs = _inputs()
    with torch.no_grad():
        torch.testing.assert_close(student(**inputs).logits, teacher(**inputs).logits, atol=1e-5, rtol=1e-5)
    assert record["task_head"] == "copied"


def test_a_roberta_teacher_maps_its_offset_positions_and_single_token_type():
    torch.manual_seed(0)
    config = transformers.RobertaConfig(
        **{**SHAPE, "type_vocab_size": 1, "max_position_embeddings": 42}, num_hidden_layers=2, pad_token_id=1
    )
    teacher = transformers.RobertaModel(config).eval()
    student = _student("minimoe", num_hidden_layers=2)
    initialize_from_teacher(student, teacher)
    input_ids = torch.randint(3, SHAPE["vocab_size"], (2, 16), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        expected = teacher(input_ids=input_ids).last_hidden_state
        got = student(input_ids=input_ids).last_hidden_state
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_upcycled_experts_reproduce_the_dense_ffn_whatever_the_routing(family):
    teacher = _bert_teacher()
    student = _student(family, num_experts=4)
    statistics = measure_teacher_activations(teacher, _calibration())
    record = initialize_from_teacher(student, teacher, statistics=statistics, calibration=_calibration())
    assert {layer["mode"] for layer in record["layers"]} == {"upcycled"}
    inputs = _inputs()
    mask = inputs["attention_mask"]
    with torch.no_grad():
        expected = _real(teacher(**inputs).last_hidden_state, mask)
        got = _real(student(**inputs).last_hidden_state, mask)
        torch.testing.assert_close(got, expected, atol=1e-3, rtol=1e-3)
        # Another routing: every router's rows permuted sends tokens elsewhere; identical experts do not care.
        for layer in student.encoder.layer:
            gate = layer.moe.router.gate
            gate.weight.copy_(gate.weight.roll(1, dims=0))
            gate.bias.copy_(gate.bias.roll(1, dims=0))
        rerouted = student(**inputs)
    torch.testing.assert_close(_real(rerouted.last_hidden_state, mask), expected, atol=1e-3, rtol=1e-3)


def test_split_experts_share_the_top_neurons_and_deal_out_the_rest():
    teacher = _bert_teacher(layers=2)
    student = _student("minimoe", num_hidden_layers=2, num_experts=4, moe_intermediate_size=24)
    statistics = measure_teacher_activations(teacher, _calibration())
    record = initialize_from_teacher(student, teacher, statistics=statistics, calibration=_calibration())
    shared = shared_neuron_count(4, 24, 64)
    assert shared == 11 and record["layers"][0]["shared_neurons"] == shared
    ranking = torch.argsort(statistics.neuron_importance[0], descending=True, stable=True)
    teacher_rows = teacher.encoder.layer[0].intermediate.dense.weight
    experts = student.encoder.layer[0].moe.experts.up_proj
    covered = set()
    for expert in range(4):
        rows = {int(torch.nonzero((teacher_rows == row).all(1))[0]) for row in experts[expert]}
        assert set(ranking[:shared].tolist()) <= rows and len(rows) == 24
        covered |= rows
    # Sizes that do not divide leave out at most E - 2 neurons: always the least important ones.
    assert len(covered) >= 64 - 2 and covered == set(ranking[: len(covered)].tolist())


def test_width_reduction_keeps_the_channels_and_heads_it_reports():
    teacher = _bert_teacher(layers=2)
    statistics = measure_teacher_activations(teacher, _calibration())
    student = _student("minimoe", num_hidden_layers=2, hidden_size=16, num_attention_heads=2, intermediate_size=32)
    record = initialize_from_teacher(student, teacher, statistics=statistics)
    channels = torch.tensor(record["channel_indices"])
    assert channels.tolist() == sorted(torch.topk(statistics.channel_importance, 16).indices.tolist())
    torch.testing.assert_close(
        student.embeddings.word_embeddings.weight, teacher.embeddings.word_embeddings.weight[:, channels]
    )
    heads = record["layers"][1]["heads"]
    assert heads == sorted(torch.topk(statistics.head_importance[1], 2).indices.tolist())
    rows = torch.cat([torch.arange(head * 8, head * 8 + 8) for head in heads])
    torch.testing.assert_close(
        student.encoder.layer[1].attention.self.query.weight,
        teacher.encoder.layer[1].attention.self.query.weight[rows][:, channels],
    )
    neurons = sorted(torch.topk(statistics.neuron_importance[1], 32).indices.tolist())
    torch.testing.assert_close(
        student.encoder.layer[1].intermediate.dense.bias, teacher.encoder.layer[1].intermediate.dense.bias[neurons]
    )


def test_routers_start_balanced_on_real_text():
    """The packaged all-MiniLM-L6-v2 into the main job's MiniMoE shape, on the bundled corpus: no expert starved."""
    from compact_bert.configuration import preset_config
    from compact_bert.distillation.data import default_tokenizer, packaged_teacher_dir
    from tests.distillation.helpers import held_out_blocks

    teacher = transformers.AutoModel.from_pretrained(packaged_teacher_dir()).eval()
    blocks = held_out_blocks(False, 64)
    batches = [
        {
            "input_ids": torch.tensor(blocks[start : start + 16]["input_ids"]),
            "attention_mask": torch.ones(16, len(blocks[0]["input_ids"]), dtype=torch.long),
        }
        for start in range(0, 64, 16)
    ]
    statistics = measure_teacher_activations(teacher, batches[:2])
    student = transformers.AutoModel.from_config(preset_config("minimoe-4l-192h", capacity_factor=None)).eval()
    initialize_from_teacher(student, teacher, statistics=statistics, calibration=batches[:2])
    with torch.no_grad():
        loads = torch.stack([student(**batch, output_router_stats=True).expert_load for batch in batches[2:]]).mean(0)
    assert default_tokenizer() is not None
    assert loads.min() > 0.5 / 4, loads  # every expert of every block takes at least half its fair share


def test_layer_maps():
    assert uniform_layer_map(6, 3) == [1, 3, 5]
    assert uniform_layer_map(6, 4) == [1, 2, 4, 5]
    assert uniform_layer_map(12, 4)[-1] == 11
    assert parse_layer_map("0,2,5", 6, 3) == [0, 2, 5]
    with pytest.raises(TeacherShapeError, match=r"out of range.*valid: 0 to 5"):
        parse_layer_map("0,2,6", 6, 3)
    with pytest.raises(TeacherShapeError, match="one teacher layer per student layer"):
        parse_layer_map("0,2", 6, 3)
    with pytest.raises(TeacherShapeError, match="num_hidden_layers=7"):
        uniform_layer_map(6, 7)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"hidden_size": 64, "num_attention_heads": 8}, "hidden_size 64 is larger than the teacher's 32"),
        ({"num_attention_heads": 2}, "must equal the teacher's head size 8"),
        ({"intermediate_size": 128}, "intermediate_size 128 is larger"),
        ({"vocab_size": 100}, "vocab_size 100 differs"),
        ({"hidden_act": "relu"}, "hidden_act 'relu' differs"),
        ({"num_experts": 4, "moe_intermediate_size": 80}, "moe_intermediate_size 80 is larger"),
    ],
)
def test_shapes_that_cannot_map_fail_naming_the_field(fields, message):
    with pytest.raises(TeacherShapeError, match=message):
        initialize_from_teacher(_student("minimoe", **fields), _bert_teacher(), statistics=None)


def test_a_mobilebert_teacher_is_refused_by_model_type():
    from compact_bert.modeling import CompactMobileBertModel
    from tests.distillation.helpers import tiny_mobilebert_config

    teacher = CompactMobileBertModel(tiny_mobilebert_config())
    with pytest.raises(TeacherShapeError, match="'compact_mobilebert' teacher cannot initialize"):
        initialize_from_teacher(_student("minimoe"), teacher)


def test_narrow_students_need_activation_statistics_and_routers_calibration():
    with pytest.raises(TeacherShapeError, match="activation statistics"):
        initialize_from_teacher(_student("minimoe", hidden_size=16, num_attention_heads=2), _bert_teacher())
    with pytest.raises(TeacherShapeError, match="calibration"):
        initialize_from_teacher(_student("minimoe", num_experts=4), _bert_teacher())


def test_the_config_names_the_teacher_portably_and_the_run_keeps_its_path(tmp_path):
    """config.json is pushed with the model: it names the packaged teacher by its Hub id and a local teacher by its
    folder's name, never a local path; the record returned (kept in the local run summary) keeps the path."""
    from compact_bert.distillation.data import PACKAGED_TEACHER_HUB_ID, packaged_teacher_dir, portable_model_name

    assert portable_model_name("all-MiniLM-L6-v2") == PACKAGED_TEACHER_HUB_ID
    assert portable_model_name(str(packaged_teacher_dir())) == PACKAGED_TEACHER_HUB_ID
    assert portable_model_name("sentence-transformers/all-MiniLM-L6-v2") == PACKAGED_TEACHER_HUB_ID
    (tmp_path / "my-teacher").mkdir()
    assert portable_model_name(str(tmp_path / "my-teacher")) == "my-teacher"


@pytest.mark.parametrize("layers", [2, 4, 8])
def test_router_calibration_runs_each_layer_a_fixed_number_of_times_whatever_the_depth(layers):
    """Calibration cost is linear in depth: the batches go through the encoder layer by layer (each routed layer
    twice: to measure its block's input, then with its router set), never through the whole model once per block;
    and the routers it sets are those that calibrating each block through the whole model sets."""
    from compact_bert.distillation.importance import measure_moe_inputs
    from compact_bert.distillation.teacher_init import ROUTER_LOGIT_SCALE, _balanced_router

    teacher = _bert_teacher(layers)
    fields = {"num_hidden_layers": layers, "num_experts": 4, "moe_intermediate_size": 16, "capacity_factor": None}
    student = _student("minimoe", **fields)
    calibration = [_inputs(seed) for seed in (1, 2)]
    statistics = measure_teacher_activations(teacher, calibration)
    calls = [0] * layers
    handles = [
        layer.register_forward_hook(
            lambda module, args, output, index=index: calls.__setitem__(index, calls[index] + 1)
        )
        for index, layer in enumerate(student.encoder.layer)
    ]
    initialize_from_teacher(student, teacher, statistics=statistics, calibration=calibration, seed=3)
    for handle in handles:
        handle.remove()
    assert calls == [2 * len(calibration)] * (layers - 1) + [len(calibration)]  # completed layer forwards
    # the same routers as measuring every block through the whole model, block after block
    reference = _student("minimoe", **fields)
    initialize_from_teacher(reference, teacher, statistics=statistics, calibration=calibration, seed=3)
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for layer in reference.encoder.layer:
            mean, covariance = measure_moe_inputs(reference, layer.moe, calibration)
            _balanced_router(layer.moe.router.gate, mean, covariance, generator)
    for ours, theirs in zip(student.encoder.layer, reference.encoder.layer):
        torch.testing.assert_close(ours.moe.router.gate.weight, theirs.moe.router.gate.weight, rtol=1e-6, atol=1e-12)
        assert ours.moe.router.gate.weight.abs().max() < 1e3 * ROUTER_LOGIT_SCALE
