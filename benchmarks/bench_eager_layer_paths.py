"""Where a tiny student's eager time goes that its teacher's does not: both models on five eager paths, side by side.

On compact-bert's eager path (``optimize_for_inference``) the tiny-student study's 3-layer student of 320 channels,
10 heads and 448 FFN neurons costs 0.28-0.31x of the packaged teacher on a 2-core AMD EPYC, although it does 0.20x of
its multiply-adds: the costs every layer pays whatever its width — Python's dispatch of a dozen modules, the query,
key and value projections as three small GEMMs, the copies between them — are a larger share of a small layer's
time. Before any of that is built into ``optimize_for_inference``, this script measures what removing it would buy,
applied to both models alike (random weights, CoNLL-2003's 9-tag head, batch 1 x 128 without padding):

- ``plain``: transformers' model as it ships;
- ``every-swap``: ``optimize_for_inference(measure=False)``, every packed module swapped in whether or not its own
  timing favoured it;
- ``compact-bert``: ``optimize_for_inference``, the path every latency the project reports is measured on (it swaps
  only what measured faster here, an encoder's modules decided on the whole stack of layers; until 2026-11-30 module
  by module, which left the teacher up to 15% slower than ``every-swap``);
- ``fused-qkv``: the same, with each self-attention's query, key and value computed as one packed GEMM of their
  concatenated weights (transformers' attention interface does the rest);
- ``native-layer``: each BERT layer as one call of PyTorch's fused encoder-layer kernel
  (``torch._transformer_encoder_layer_fwd``, the kernel behind ``nn.TransformerEncoderLayer``'s inference fast
  path: the projections, attention, residuals, layer norms and FFN of a post-norm layer in C++), on unpacked weights.

Each path's logits are checked against the plain model's before anything is timed. Printed per repeat: each path's
milliseconds for both models, the student-to-teacher ratio on each path, and the ratio of the student's fastest path
to the teacher's fastest — the like-for-like ratio if ``optimize_for_inference`` chose the path per model. The two
modified paths exist only in this script (they handle unpadded inputs in eval mode, nothing else).

Run: ``python benchmarks/bench_eager_layer_paths.py`` (about a minute on 2 cores; ``--rounds``, ``--repeats``;
transformers 5, whose BERT modules the two paths wrap).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_tiny_shapes import shape_configs, timing_arguments

STUDENT = "3l-320h-448f"
PATHS = ("plain", "every-swap", "compact-bert", "fused-qkv", "native-layer")
# Largest difference allowed between a path's logits and the plain model's (float32 summation order only).
LOGITS_TOLERANCE = 1e-4


class FusedProjectionSelfAttention(nn.Module):
    """A ``BertSelfAttention`` whose query, key and value come from one packed GEMM of their concatenated weights."""

    def __init__(self, attention: nn.Module):
        from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
        from transformers.models.bert.modeling_bert import eager_attention_forward

        super().__init__()
        self.attention = attention
        self.weight = torch.cat([attention.query.weight, attention.key.weight, attention.value.weight]).detach()
        self.bias = torch.cat([attention.query.bias, attention.key.bias, attention.value.bias]).detach()
        self.packed = torch.ops.mkldnn._reorder_linear_weight(self.weight, None)
        self.interface = ALL_ATTENTION_FUNCTIONS.get_interface(
            attention.config._attn_implementation, eager_attention_forward
        )

    def forward(self, hidden_states, attention_mask=None, cache=None, **kwargs):
        attention = self.attention
        rows = hidden_states.reshape(-1, self.weight.shape[1])
        projected = torch.ops.mkldnn._linear_pointwise(rows, self.packed, self.bias, "none", [], "")
        heads_shape = (*hidden_states.shape[:-1], -1, attention.attention_head_size)
        query, key, value = (
            part.view(heads_shape).transpose(1, 2)
            for part in projected.view(*hidden_states.shape[:-1], -1).chunk(3, dim=-1)
        )
        output, weights = self.interface(
            attention, query, key, value, attention_mask, dropout=0.0, scaling=attention.scaling, **kwargs
        )
        return output.reshape(*hidden_states.shape[:-1], -1).contiguous(), weights


class NativeEncoderLayer(nn.Module):
    """A post-norm ``BertLayer`` with exact GELU as one call of PyTorch's fused encoder-layer kernel (no mask: the
    benchmark's inputs have no padding, which the logits check before timing confirms)."""

    def __init__(self, layer: nn.Module):
        super().__init__()
        attention, attention_output = layer.attention.self, layer.attention.output
        self.width = attention.num_attention_heads * attention.attention_head_size
        self.heads = attention.num_attention_heads
        self.eps = attention_output.LayerNorm.eps
        self.tensors = [
            torch.cat([attention.query.weight, attention.key.weight, attention.value.weight]).detach(),
            torch.cat([attention.query.bias, attention.key.bias, attention.value.bias]).detach(),
            attention_output.dense.weight.detach(),
            attention_output.dense.bias.detach(),
        ]
        self.norms = [
            attention_output.LayerNorm.weight.detach(),
            attention_output.LayerNorm.bias.detach(),
            layer.output.LayerNorm.weight.detach(),
            layer.output.LayerNorm.bias.detach(),
        ]
        self.ffn = [
            layer.intermediate.dense.weight.detach(),
            layer.intermediate.dense.bias.detach(),
            layer.output.dense.weight.detach(),
            layer.output.dense.bias.detach(),
        ]

    def forward(self, hidden_states, *args, **kwargs):
        return torch._transformer_encoder_layer_fwd(
            hidden_states,
            self.width,
            self.heads,
            *self.tensors,
            True,
            False,
            self.eps,
            *self.norms,
            *self.ffn,
            None,
            None,
        )


def path_model(config, path: str, inputs: dict) -> nn.Module:
    """A random-weight token classifier of ``config`` (seed 0) on ``path``, its logits checked against the plain
    model's (``ValueError`` naming the path and the difference otherwise)."""
    import transformers
    from transformers.models.bert import modeling_bert

    from compact_bert import optimize_for_inference

    torch.manual_seed(0)
    model = transformers.AutoModelForTokenClassification.from_config(config).eval()
    with torch.inference_mode():
        expected = model(**inputs).logits
    if path in ("every-swap", "compact-bert", "fused-qkv"):
        optimize_for_inference(model, tokens=inputs["input_ids"].numel(), measure=path != "every-swap")
    for module in list(model.modules()):
        if path == "fused-qkv" and isinstance(module, modeling_bert.BertAttention):
            module.self = FusedProjectionSelfAttention(module.self)
        if path == "native-layer" and isinstance(module, modeling_bert.BertEncoder):
            module.layer = nn.ModuleList(NativeEncoderLayer(layer) for layer in module.layer)
    with torch.inference_mode():
        difference = (model(**inputs).logits - expected).abs().max().item()
    if difference > LOGITS_TOLERANCE:
        raise ValueError(f"The {path} path's logits differ from the plain model's by {difference:.2e}.")
    return model


def main(argv: list[str] | None = None) -> None:
    import transformers

    from compact_bert.evaluation.runtime_latency import (
        device_description,
        eager_runner,
        latency_inputs,
        measure_interleaved,
    )

    parser, args = timing_arguments(
        argv, __doc__.split("\n\n")[0], 30, 3, "Measurements of every runner, one line each"
    )
    if int(transformers.__version__.split(".")[0]) < 5:
        parser.error(f"the two modified paths wrap transformers 5's BERT modules; this is {transformers.__version__}.")

    configs = shape_configs([STUDENT])
    inputs = latency_inputs(configs["teacher"].vocab_size, 1, 128)
    runners = {
        (role, path): eager_runner(path_model(config, path, inputs), inputs)
        for role, config in configs.items()
        for path in PATHS
    }
    print(device_description())
    print(f"teacher: all-MiniLM-L6-v2's shape; student: {STUDENT}; ms per call (median), batch 1 x 128")
    header = [f"{role} {path} ms" for role in configs for path in PATHS]
    print(" | ".join([*header, *(f"ratio {path}" for path in PATHS), "ratio fastest / fastest"]))
    for _ in range(args.repeats):
        measured = {key: result.median_ms for key, result in measure_interleaved(runners, rounds=args.rounds).items()}
        ratios = [measured[(STUDENT, path)] / measured[("teacher", path)] for path in PATHS]
        fastest = min(measured[(STUDENT, path)] for path in PATHS) / min(measured[("teacher", path)] for path in PATHS)
        cells = [f"{measured[(role, path)]:.2f}" for role in configs for path in PATHS]
        print(" | ".join([*cells, *(f"{ratio:.3f}" for ratio in ratios), f"{fastest:.3f}"]), flush=True)


if __name__ == "__main__":
    main()
