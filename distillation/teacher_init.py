"""Initialize a MiniMoE / MoE-BERT student from a pretrained BERT-like teacher instead of random weights.

Students that start from their teacher need a fraction of the distillation that random ones need: DistilBERT
starts from every other teacher layer (Sanh et al., 2019, §3), Minitron prunes the width of a trained model by
activation importance and then distills (Muralidharan et al., 2024), sparse upcycling copies a trained dense FFN
into every expert (Komatsuzaki et al., 2023), MoEBERT splits it into experts by neuron importance (Zuo et al.,
2022). ``initialize_from_teacher`` does all four, as far as the student's shape asks:

- **depth** — student layer ``i`` copies teacher layer ``layer_map[i]`` (embeddings, attention, FFN, norms).
  The default map is uniform and keeps the teacher's last layer: ``ceil((i + 1) · L_t / L_s) − 1`` (6 → 3 layers:
  teacher layers 1, 3, 5, 0-based, i.e. DistilBERT's every other layer);
- **width** — a narrower student keeps the most important residual channels (one subset, shared by the embeddings
  and every layer, since they add into one residual stream), the most important heads of each layer (head size must
  match) and the most important FFN neurons of each layer (``importance.py`` measures them);
- **experts** — a dense FFN becomes the student's experts: copies (upcycling) when an expert is as wide as the
  FFN, an importance split (MoEBERT §3.1: the top ``s`` neurons shared by every expert, the rest dealt out to the
  experts in importance order) when experts are narrower; ``s = (E·w − d) / (E − 1)`` shares just enough for the
  experts to cover all ``d`` neurons. A learned top-1 router starts balanced: its weights are random directions
  whitened by the covariance of the student's own input to that block (measured on calibration text once the
  weights are in place) and its bias removes their mean, so every expert takes
  about ``1/E`` of the tokens; they are scaled so that the logits are tiny and every gate ``p_k`` starts at
  ``1/E`` (to 1e-4 relative), and the experts' output weights are multiplied by ``E``: at step 0 an upcycled block
  computes the dense FFN's output whatever the routing.

The mapping is returned as a JSON-ready record, which the CLI prints and writes into the config
(``teacher_initialization``) and the model card.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn
from transformers import PretrainedConfig

from ..configuration.dense_students import BERT_LAYOUT_MODEL_TYPES
from ..models import SPARSE_MODEL_TYPES
from .importance import TeacherActivationStatistics, first_layer_inputs, measure_block_inputs
from .teacher_weights import (
    PADDING_OFFSET_POSITIONS,
    EncoderWeights,
    LayerWeights,
    TeacherShapeError,
    linear_weights,
    read_encoder_weights,
)

__all__ = [
    "INITIALIZABLE_MODEL_TYPES",
    "ROUTER_LOGIT_SCALE",
    "check_teacher_shapes",
    "initialize_from_teacher",
    "needs_activation_statistics",
    "parse_layer_map",
    "shared_neuron_count",
    "uniform_layer_map",
]

# The students ``initialize_from_teacher`` writes into: dense ones of transformers' BERT-layout encoders, and
# compact-bert's MiniMoE / MoE-BERT (whose dense parts carry the same module names).
INITIALIZABLE_MODEL_TYPES = (*BERT_LAYOUT_MODEL_TYPES, *SPARSE_MODEL_TYPES)

# Standard deviation of a fresh router's logits over the calibration tokens: small enough that every gate p_k is
# 1/E to about 1e-4 relative (so upcycled experts reproduce the dense FFN), large enough to be far above float32
# rounding (the argmax is scale-free: tiny logits route exactly as large ones would).
ROUTER_LOGIT_SCALE = 1e-4


def uniform_layer_map(teacher_layers: int, student_layers: int) -> list[int]:
    """0-based teacher layer of each student layer: evenly spaced, ending at the teacher's last layer."""
    if student_layers > teacher_layers:
        raise TeacherShapeError(
            f"The student has num_hidden_layers={student_layers} but the teacher only {teacher_layers}; give a "
            "--layer_map that repeats teacher layers explicitly, or a student of at most that depth."
        )
    return [math.ceil((index + 1) * teacher_layers / student_layers) - 1 for index in range(student_layers)]


def parse_layer_map(text: str | Sequence[int] | None, teacher_layers: int, student_layers: int) -> list[int]:
    """``None``/``"uniform"`` → ``uniform_layer_map``; else a comma-separated list (or sequence) of 0-based teacher
    layers, one per student layer, each checked against both depths."""
    if text is None or text == "uniform":
        return uniform_layer_map(teacher_layers, student_layers)
    if isinstance(text, str):
        try:
            layer_map = [int(item) for item in text.split(",")]
        except ValueError:
            raise TeacherShapeError(
                f"layer_map {text!r} must be 'uniform' or comma-separated 0-based teacher layers, e.g. '1,3,5'."
            ) from None
    else:
        layer_map = [int(item) for item in text]
    if len(layer_map) != student_layers:
        raise TeacherShapeError(
            f"layer_map {layer_map} names {len(layer_map)} teacher layers but the student has "
            f"num_hidden_layers={student_layers}: give one teacher layer per student layer."
        )
    bad = [layer for layer in layer_map if not 0 <= layer < teacher_layers]
    if bad:
        raise TeacherShapeError(
            f"layer_map {layer_map}: teacher layers {bad} are out of range; the teacher has {teacher_layers} layers "
            f"(valid: 0 to {teacher_layers - 1})."
        )
    return layer_map


def shared_neuron_count(num_experts: int, expert_width: int, ffn_width: int) -> int:
    """MoEBERT's shared neurons ``s``: just enough that ``s + E·(w − s)`` covers the ``d`` neurons, rounded up (so
    that every expert is filled): where the sizes do not divide, the ``d − s − E·(w − s) ≤ E − 2`` least important
    neurons are left out; where even disjoint experts cannot cover the FFN, ``s = 0`` and the least important
    neurons beyond ``E·w`` are left out."""
    if num_experts == 1:
        return expert_width
    return max(0, math.ceil((num_experts * expert_width - ffn_width) / (num_experts - 1)))


def _top(scores: torch.Tensor, count: int) -> torch.Tensor:
    """Indices of the ``count`` largest scores, in increasing index order (so kept units keep their order)."""
    if count >= scores.shape[-1]:
        return torch.arange(scores.shape[-1])
    return torch.topk(scores, count, sorted=False).indices.sort().values


def _student_shape(config: PretrainedConfig) -> tuple[int, int, int]:
    return config.hidden_size, config.num_attention_heads, config.intermediate_size


def needs_activation_statistics(student_config: PretrainedConfig, teacher_config) -> bool:
    """Whether initializing this student needs ``measure_teacher_activations``: a narrower width, fewer heads or
    neurons, or experts narrower than the FFN (split by neuron importance)."""
    hidden, heads, intermediate = _student_shape(student_config)
    narrower = (
        hidden < teacher_config.hidden_size
        or heads < teacher_config.num_attention_heads
        or intermediate < teacher_config.intermediate_size
    )
    split = _num_experts(student_config) > 1 and student_config.expert_intermediate_size < intermediate
    return narrower or split


def _num_experts(config: PretrainedConfig) -> int:
    """Experts per FFN block: a dense student (transformers' BERT) has no ``num_experts`` field, and one FFN."""
    return getattr(config, "num_experts", 1)


def _position_rows(config: PretrainedConfig, teacher: EncoderWeights) -> torch.Tensor:
    """The teacher's position table as the student reads it: a RoBERTa-like student keeps the rows before position 0
    that its padding offset skips (``PADDING_OFFSET_POSITIONS``), a BERT-like one starts at position 0."""
    if getattr(config, "model_type", None) in PADDING_OFFSET_POSITIONS:
        return torch.cat([teacher.position_offset_rows, teacher.position_embeddings])
    return teacher.position_embeddings


def check_teacher_shapes(config: PretrainedConfig, teacher: EncoderWeights) -> None:
    """Raise ``TeacherShapeError`` naming every field of ``config`` that ``teacher`` cannot initialize."""
    hidden, heads, intermediate = _student_shape(config)
    problems = []
    if config.vocab_size != teacher.word_embeddings.shape[0]:
        problems.append(
            f"vocab_size {config.vocab_size} differs from the teacher's {teacher.word_embeddings.shape[0]} "
            "(both must read the same token ids: use the teacher's tokenizer and vocab_size)"
        )
    if config.hidden_act != teacher.hidden_act:
        problems.append(f"hidden_act {config.hidden_act!r} differs from the teacher's {teacher.hidden_act!r}")
    if hidden > teacher.hidden_size:
        problems.append(
            f"hidden_size {hidden} is larger than the teacher's {teacher.hidden_size} (valid: at most that)"
        )
    if hidden // heads != teacher.head_size:
        problems.append(
            f"hidden_size / num_attention_heads = {hidden // heads} must equal the teacher's head size "
            f"{teacher.head_size} (valid: num_attention_heads = hidden_size / {teacher.head_size})"
        )
    if heads > teacher.num_attention_heads:
        problems.append(f"num_attention_heads {heads} is more than the teacher's {teacher.num_attention_heads}")
    if getattr(config, "num_attention_experts", 1) != 1:
        problems.append(
            f"num_attention_experts {config.num_attention_experts}: only dense attention (1) is "
            "initialized from a teacher"
        )
    teacher_experts = teacher.layers[0].num_experts
    if teacher_experts > 1:
        if (_num_experts(config), getattr(config, "expert_intermediate_size", None), intermediate) != (
            teacher_experts,
            teacher.intermediate_size,
            teacher.intermediate_size,
        ):
            problems.append(
                f"the teacher's FFNs are {teacher_experts} experts of width {teacher.intermediate_size}: "
                "the student must have the same num_experts and expert width"
            )
    elif intermediate > teacher.intermediate_size:
        problems.append(f"intermediate_size {intermediate} is larger than the teacher's {teacher.intermediate_size}")
    if _num_experts(config) > 1 and config.expert_intermediate_size > intermediate:
        problems.append(
            f"moe_intermediate_size {config.expert_intermediate_size} is larger than intermediate_size "
            f"{intermediate} (an expert is at most the FFN it comes from)"
        )
    positions = _position_rows(config, teacher).shape[0]
    if config.max_position_embeddings > positions:
        problems.append(
            f"max_position_embeddings {config.max_position_embeddings} is more than the teacher's {positions}"
        )
    if problems:
        raise TeacherShapeError("Cannot initialize the student from the teacher: " + "; ".join(problems) + ".")


def _copy(parameter: torch.Tensor, value: torch.Tensor, name: str) -> None:
    if parameter.shape != value.shape:  # a bug of this module, never the user's input
        raise RuntimeError(f"{name}: mapped teacher tensor {tuple(value.shape)} != student {tuple(parameter.shape)}")
    parameter.copy_(value.to(parameter.dtype))


def _copy_linear(module: nn.Linear, weight_bias, rows: torch.Tensor, columns: torch.Tensor, name: str) -> None:
    weight, bias = weight_bias
    _copy(module.weight, weight[rows][:, columns], f"{name}.weight")
    _copy(module.bias, bias[rows], f"{name}.bias")


def _copy_norm(module: nn.LayerNorm, weight_bias, channels: torch.Tensor, name: str) -> None:
    _copy(module.weight, weight_bias[0][channels], f"{name}.weight")
    _copy(module.bias, weight_bias[1][channels], f"{name}.bias")


def _head_rows(heads: torch.Tensor, head_size: int) -> torch.Tensor:
    return (heads[:, None] * head_size + torch.arange(head_size)).reshape(-1)


def _copy_attention(attention: nn.Module, source: LayerWeights, heads, channels, head_size: int, name: str) -> None:
    rows = _head_rows(heads, head_size)
    for projection in ("query", "key", "value"):
        _copy_linear(
            getattr(attention.self, projection),
            getattr(source, projection),
            rows,
            channels,
            f"{name}.self.{projection}",
        )
    _copy_linear(attention.output.dense, source.attention_output, channels, rows, f"{name}.output.dense")
    _copy_norm(attention.output.LayerNorm, source.attention_norm, channels, f"{name}.output.LayerNorm")


def _expert_neurons(importance: torch.Tensor | None, ffn_width: int, num_experts: int, expert_width: int):
    """Per expert, the FFN neurons it gets (indices into the student's dense FFN), and the shared count."""
    if expert_width == ffn_width:
        return [torch.arange(ffn_width)] * num_experts, ffn_width
    shared = shared_neuron_count(num_experts, expert_width, ffn_width)
    ranked = torch.argsort(importance, descending=True, stable=True)
    top, rest = ranked[:shared], ranked[shared:]
    own = expert_width - shared
    slices = [rest[expert : num_experts * own : num_experts] for expert in range(num_experts)]
    return [torch.cat([top, own_slice]).sort().values for own_slice in slices], shared


def _calibrate_routers(student, encoder, calibration, seed: int, copied: bool) -> bool:
    """Balance every learned router of ``student`` on its own MoE inputs, block after block (each block's inputs
    measured with the routers before it already set); ``False`` when there is nothing to calibrate.

    The calibration batches go through the encoder one layer at a time: the first layer's inputs come from the
    embeddings, each layer with a router runs twice on its inputs (to measure its block's input, then with the
    router set to give the next layer's inputs), every other layer once — a cost linear in the depth."""
    layers = list(encoder.encoder.layer)
    routed = [
        index for index, layer in enumerate(layers) if hasattr(layer, "moe") and hasattr(layer.moe.router, "gate")
    ]
    if copied or not routed:
        return False
    if calibration is None:
        raise TeacherShapeError(
            "The student's learned routers are balanced on calibration text: pass `calibration` "
            "(a few batches of model inputs)."
        )
    print(f"Balancing {len(routed)} routers on {len(calibration)} calibration batches, layer by layer ...", flush=True)
    generator = torch.Generator().manual_seed(seed)
    masks = [batch["attention_mask"].reshape(-1).bool() for batch in calibration]
    was_training = student.training
    student.eval()
    try:
        inputs = first_layer_inputs(student, layers[0], calibration)
        for index, layer in enumerate(layers[: routed[-1] + 1]):
            if index in routed:
                mean, covariance = measure_block_inputs(layer, layer.moe, inputs, masks)
                _balanced_router(layer.moe.router.gate, mean, covariance, generator)
            if index < routed[-1]:
                inputs = [((layer(*args, **kwargs)[0], *args[1:]), kwargs) for args, kwargs in inputs]
    finally:
        student.train(was_training)
    return True


def _balanced_router(gate: nn.Linear, mean: torch.Tensor, covariance: torch.Tensor, generator) -> None:
    """Random whitened directions, centred on the FFN input's mean, scaled to logits of std ``ROUTER_LOGIT_SCALE``."""
    eigenvalues, eigenvectors = torch.linalg.eigh(covariance)
    floor = eigenvalues.max().clamp(min=1e-12) * 1e-6
    inverse_root = eigenvectors @ torch.diag(eigenvalues.clamp(min=floor).rsqrt()) @ eigenvectors.T
    directions = torch.randn(gate.out_features, gate.in_features, generator=generator, dtype=torch.float64)
    directions = directions / directions.norm(dim=-1, keepdim=True)  # unit logit variance after whitening
    weight = ROUTER_LOGIT_SCALE * directions @ inverse_root
    _copy(gate.weight, weight, "router.gate.weight")
    _copy(gate.bias, -(weight @ mean), "router.gate.bias")


def _copy_ffn(
    layer: nn.Module, source: LayerWeights, neurons, channels, student_config, statistics, teacher_index, name: str
) -> dict:
    """The student's FFN (dense, or experts made from the dense FFN) from teacher FFN ``source``; a record of how."""
    _copy_norm(layer.output.LayerNorm, source.ffn_norm, channels, f"{name}.output.LayerNorm")
    if source.num_experts > 1:  # an MoE teacher of the same shape: experts and router as they are
        experts = layer.moe.experts
        _copy(experts.up_proj, source.ffn_in[0][:, :, channels], f"{name}.moe.experts.up_proj")
        _copy(experts.up_proj_bias, source.ffn_in[1], f"{name}.moe.experts.up_proj_bias")
        _copy(experts.down_proj, source.ffn_out[0][:, channels], f"{name}.moe.experts.down_proj")
        _copy(experts.down_proj_bias, source.ffn_out[1][:, channels], f"{name}.moe.experts.down_proj_bias")
        if source.router is not None and hasattr(layer.moe.router, "gate"):
            _copy_linear(
                layer.moe.router.gate,
                source.router,
                torch.arange(source.router[0].shape[0]),
                channels,
                f"{name}.moe.router.gate",
            )
        return {"mode": "copied"}
    up_proj, up_proj_bias = source.ffn_in[0][neurons][:, channels], source.ffn_in[1][neurons]
    down_proj, down_proj_bias = source.ffn_out[0][channels][:, neurons], source.ffn_out[1][channels]
    if _num_experts(student_config) == 1:
        _copy_linear(
            layer.intermediate.dense,
            (up_proj, up_proj_bias),
            torch.arange(len(neurons)),
            torch.arange(len(channels)),
            f"{name}.intermediate.dense",
        )
        _copy(layer.output.dense.weight, down_proj, f"{name}.output.dense.weight")
        _copy(layer.output.dense.bias, down_proj_bias, f"{name}.output.dense.bias")
        return {"mode": "dense"}
    num_experts, width = student_config.num_experts, student_config.expert_intermediate_size
    importance = (
        None
        if statistics is None or statistics.neuron_importance is None
        else statistics.neuron_importance[teacher_index][neurons]
    )
    per_expert, shared = _expert_neurons(importance, len(neurons), num_experts, width)
    router = layer.moe.router
    learned = hasattr(router, "gate")
    # Every gate p_k starts at 1/E for a learned router (see the module docstring); hash routing's gate is 1.
    scale = float(num_experts) if learned else 1.0
    experts = layer.moe.experts
    for expert, kept in enumerate(per_expert):
        _copy(experts.up_proj[expert], up_proj[kept], f"{name}.moe.experts.up_proj[{expert}]")
        _copy(experts.up_proj_bias[expert], up_proj_bias[kept], f"{name}.moe.experts.up_proj_bias[{expert}]")
        _copy(experts.down_proj[expert], scale * down_proj[:, kept], f"{name}.moe.experts.down_proj[{expert}]")
        _copy(experts.down_proj_bias[expert], scale * down_proj_bias, f"{name}.moe.experts.down_proj_bias[{expert}]")
    if learned:  # calibrated on the student's own MoE inputs once every weight is in place (``_calibrate_routers``)
        router.gate.weight.zero_()
        router.gate.bias.zero_()
    if width == len(neurons):
        return {"mode": "upcycled", "experts": num_experts}
    return {"mode": "split", "experts": num_experts, "expert_width": width, "shared_neurons": shared}


def _copy_task_head(student: nn.Module, teacher: nn.Module, channels: torch.Tensor) -> str:
    """A fine-tuned teacher's classifier, when the student has the same kind of head over the same labels: the
    student then starts by predicting what the teacher predicts (``new`` when there is none to copy). BERT's head is
    one linear layer over the pooled or token state; RoBERTa's sequence head is ``dense`` (hidden → hidden, tanh)
    then ``out_proj``, whose hidden side is cut to the student's channels like every other weight."""
    student_head, teacher_head = getattr(student, "classifier", None), getattr(teacher, "classifier", None)
    same_kind = type(student).__name__.rsplit("For", 1)[-1] == type(teacher).__name__.rsplit("For", 1)[-1]
    if student_head is None or teacher_head is None or not same_kind:
        return "new"
    if student.config.num_labels != teacher.config.num_labels or student.config.id2label != teacher.config.id2label:
        return "new"
    if isinstance(student_head, nn.Linear) and isinstance(teacher_head, nn.Linear):
        labels = torch.arange(teacher_head.out_features)
        _copy_linear(student_head, linear_weights(teacher_head), labels, channels, "classifier")
        return "copied"
    projections = ("dense", "out_proj")
    if all(
        isinstance(getattr(head, name, None), nn.Linear)
        for head in (student_head, teacher_head)
        for name in projections
    ):
        _copy_linear(student_head.dense, linear_weights(teacher_head.dense), channels, channels, "classifier.dense")
        labels = torch.arange(teacher_head.out_proj.out_features)
        _copy_linear(
            student_head.out_proj, linear_weights(teacher_head.out_proj), labels, channels, "classifier.out_proj"
        )
        return "copied"
    return "new"


def _linear_weights(module: nn.Linear) -> tuple[torch.Tensor, torch.Tensor]:
    return module.weight.detach(), module.bias.detach()


@torch.no_grad()
def initialize_from_teacher(
    student: nn.Module,
    teacher: nn.Module,
    layer_map: str | Sequence[int] | None = None,
    statistics: TeacherActivationStatistics | None = None,
    calibration: Sequence[dict] | None = None,
    seed: int = 0,
    teacher_name: str | None = None,
) -> dict:
    """Copy ``teacher``'s weights into ``student`` (a dense BERT-layout model — transformers' BERT, RoBERTa, ... —
    or a compact-bert MiniMoE / MoE-BERT model; base or with a head) as the module docstring describes; return the
    record of the mapping.

    ``statistics`` (``measure_teacher_activations`` on a few hundred blocks of the training text) is required when
    ``needs_activation_statistics`` says so; ``calibration`` (batches of model inputs) whenever the student has
    learned routers to balance. A task head is copied from a fine-tuned teacher with the same kind of
    head over the same labels (``task_head`` in the record), else left as initialized.
    """
    config = student.config
    if getattr(config, "model_type", None) not in INITIALIZABLE_MODEL_TYPES:
        raise TeacherShapeError(
            f"Only students laid out as BERT (model_type {', '.join(INITIALIZABLE_MODEL_TYPES)}) can be initialized "
            f"from a teacher; got model_type {getattr(config, 'model_type', '?')!r}."
        )
    source = read_encoder_weights(teacher)
    check_teacher_shapes(config, source)
    if statistics is None and needs_activation_statistics(config, teacher.config):
        raise TeacherShapeError(
            "This student is narrower than its teacher or splits its FFN into narrower experts: initializing it needs "
            "the teacher's activation statistics (measure_teacher_activations on a few hundred blocks of text)."
        )
    layers = parse_layer_map(layer_map, source.num_hidden_layers, config.num_hidden_layers)
    hidden, heads, intermediate = _student_shape(config)
    channels = (
        torch.arange(source.hidden_size)
        if hidden == source.hidden_size
        else _top(statistics.channel_importance, hidden)
    )
    encoder = getattr(student, "base_model", student)
    embeddings = encoder.embeddings
    _copy(embeddings.word_embeddings.weight, source.word_embeddings[:, channels], "embeddings.word_embeddings")
    _copy(
        embeddings.position_embeddings.weight,
        _position_rows(config, source)[: config.max_position_embeddings][:, channels],
        "embeddings.position_embeddings",
    )
    token_types = source.token_type_embeddings[:, channels]
    rows = torch.arange(config.type_vocab_size).clamp(max=token_types.shape[0] - 1)  # one-type teachers: row 0 for all
    _copy(embeddings.token_type_embeddings.weight, token_types[rows], "embeddings.token_type_embeddings")
    _copy_norm(embeddings.LayerNorm, source.embedding_norm, channels, "embeddings.LayerNorm")
    record_layers = []
    for index, teacher_index in enumerate(layers):
        layer, weights = encoder.encoder.layer[index], source.layers[teacher_index]
        kept_heads = (
            torch.arange(source.num_attention_heads)
            if heads == source.num_attention_heads
            else _top(statistics.head_importance[teacher_index], heads)
        )
        neurons = (
            torch.arange(source.intermediate_size)
            if intermediate == source.intermediate_size
            else _top(statistics.neuron_importance[teacher_index], intermediate)
        )
        name = f"encoder.layer.{index}"
        _copy_attention(layer.attention, weights, kept_heads, channels, source.head_size, f"{name}.attention")
        ffn = _copy_ffn(layer, weights, neurons, channels, config, statistics, teacher_index, name)
        record_layers.append(
            {
                "teacher_layer": teacher_index,
                "heads": "all" if heads == source.num_attention_heads else kept_heads.tolist(),
                "ffn_neurons": "all"
                if intermediate == source.intermediate_size
                else f"top {intermediate} by importance",
                **ffn,
            }
        )
    auxiliary = getattr(encoder.encoder, "auxiliary_attention", None)
    if auxiliary is not None:  # aligned with the teacher's last layer in relation distillation: start from it
        last = source.num_hidden_layers - 1
        kept_heads = (
            torch.arange(source.num_attention_heads)
            if heads == source.num_attention_heads
            else _top(statistics.head_importance[last], heads)
        )
        _copy_attention(auxiliary, source.layers[last], kept_heads, channels, source.head_size, "auxiliary_attention")
    pooler = getattr(encoder, "pooler", None)
    if pooler is not None and source.pooler is not None:
        _copy_linear(pooler.dense, source.pooler, channels, channels, "pooler.dense")
    calibrated = _calibrate_routers(student, encoder, calibration, seed, source.layers[0].num_experts > 1)
    return {
        "task_head": _copy_task_head(student, teacher, channels),
        **({"routers": "balanced on the student's inputs (whitened random directions)"} if calibrated else {}),
        "teacher": teacher_name or getattr(teacher.config, "_name_or_path", "") or source.model_type,
        "teacher_model_type": source.model_type,
        "layer_map": layers,
        "hidden_channels": "all"
        if hidden == source.hidden_size
        else f"top {hidden} of {source.hidden_size} by importance",
        **({} if hidden == source.hidden_size else {"channel_indices": channels.tolist()}),
        "layers": record_layers,
        "importance": None
        if statistics is None
        else {
            "criterion": "activation-based (Minitron, Muralidharan et al. 2024, sec. 2.2)",
            "tokens": statistics.num_tokens,
        },
    }
