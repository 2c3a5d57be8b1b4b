"""MoE layer against its lower bounds (DESIGN.md §2.4, issue targets).

1. 4 experts, d=384, FFN 1536, 128 tokens: MoE layer vs one expert FFN over all tokens (target <= 1.5x).
2. 64 experts, d=768, FFN 3072, 4096 tokens: MoE layer vs a dense FFN of the same size (target <= 1.3x).
3. 64 experts, 128 tokens: MoE layer vs the per-expert loop of transformers' Mixtral block (one-hot mask,
   ``torch.where`` per expert, ``index_add_``) re-implemented over the same expert weights (target < 1x);
   and against the memory floor: the time to read the weights of the experts the batch uses, at the
   copy bandwidth measured here.

Cases 1 and 2 also print the GEMM floor: the same expert GEMMs over pre-sorted equal slices, with no
routing at all. On this 2-core CPU each small GEMM repacks its expert's weight matrix, so that floor
alone is ~1.4-1.7x one large GEMM; the MoE layer's ratio should be read against it.

Run: ``python benchmarks/bench_moe_layer.py`` (CPU, eval mode, no gradients).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import compare_latencies, format_ratio  # noqa: E402

from compact_bert.configuration import MiniMoEConfig  # noqa: E402
from compact_bert.modeling.moe_layer import MoEFeedForward  # noqa: E402


def _layer(experts: int, hidden: int, ffn: int) -> MoEFeedForward:
    config = MiniMoEConfig(hidden_size=hidden, num_attention_heads=12, intermediate_size=ffn, num_experts=experts)
    layer = MoEFeedForward(config).eval()
    with torch.no_grad():
        for parameter in layer.parameters():
            parameter.normal_(std=0.02)
    return layer


def _one_expert(layer: MoEFeedForward, tokens: torch.Tensor) -> torch.Tensor:
    experts = layer.experts
    inner = experts.act(F.linear(tokens, experts.fc1_weight[0], experts.fc1_bias[0]))
    return F.linear(inner, experts.fc2_weight[0], experts.fc2_bias[0])


def _mixtral_style(layer: MoEFeedForward, tokens: torch.Tensor) -> torch.Tensor:
    """The dispatch of transformers' MixtralSparseMoeBlock (top-1) over our experts' weights."""
    flat = tokens.reshape(-1, tokens.shape[-1])
    probs = torch.softmax(layer.router.gate(flat).float(), dim=-1)
    gate, chosen = probs.max(dim=-1)
    expert_mask = F.one_hot(chosen, layer.num_experts).permute(1, 0)
    output = torch.zeros_like(flat)
    experts = layer.experts
    for expert in torch.greater(expert_mask.sum(dim=-1), 0).nonzero().flatten().tolist():
        token_index = torch.where(expert_mask[expert])[0]
        inner = experts.act(F.linear(flat[token_index], experts.fc1_weight[expert], experts.fc1_bias[expert]))
        result = F.linear(inner, experts.fc2_weight[expert], experts.fc2_bias[expert]) * gate[token_index, None]
        output.index_add_(0, token_index, result)
    return output.view_as(tokens)


def _experts_only(layer: MoEFeedForward, tokens: torch.Tensor) -> torch.Tensor:
    """The experts' GEMMs over equal pre-sorted slices, no routing: the floor of any top-1 dispatch here."""
    experts = layer.experts
    outputs = []
    for expert, chunk in enumerate(tokens.reshape(-1, tokens.shape[-1]).chunk(layer.num_experts)):
        inner = experts.act(F.linear(chunk, experts.fc1_weight[expert], experts.fc1_bias[expert]))
        outputs.append(F.linear(inner, experts.fc2_weight[expert], experts.fc2_bias[expert]))
    return torch.cat(outputs)


def _copy_bandwidth() -> float:
    """Bytes per second of a large tensor copy: the floor for reading weights that are not in cache."""
    source = torch.empty(64 * 1024 * 1024, dtype=torch.float32)
    target = torch.empty_like(source)
    seconds = compare_latencies({"copy": lambda: target.copy_(source)}, rounds=10)["copy"]
    return 2 * source.numel() * source.element_size() / seconds  # read + write


def main() -> None:
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")

    layer = _layer(4, 384, 1536)
    tokens = torch.randn(1, 128, 384)
    mask = torch.ones(1, 128)
    times = compare_latencies(
        {
            "moe": lambda: layer(tokens, mask, None),
            "one_expert": lambda: _one_expert(layer, tokens),
            "experts_only": lambda: _experts_only(layer, tokens),
        },
        rounds=60,
    )
    print(format_ratio("4 experts, 128 tokens vs one expert FFN", times["moe"], times["one_expert"], "<= 1.5x"))
    print(format_ratio("  of which GEMM floor: per-expert GEMMs, no routing", times["experts_only"], times["one_expert"], "report"))

    layer = _layer(64, 768, 3072)
    tokens = torch.randn(8, 512, 768)
    mask = torch.ones(8, 512)
    times = compare_latencies(
        {
            "moe": lambda: layer(tokens, mask, None),
            "dense": lambda: _one_expert(layer, tokens),
            "experts_only": lambda: _experts_only(layer, tokens),
        },
        rounds=8,
        warmup=1,
    )
    print(format_ratio("64 experts, 4096 tokens vs dense FFN", times["moe"], times["dense"], "<= 1.3x"))
    print(format_ratio("  of which GEMM floor: per-expert GEMMs, no routing", times["experts_only"], times["dense"], "report"))

    tokens = torch.randn(1, 128, 768)
    mask = torch.ones(1, 128)
    times = compare_latencies(
        {"moe": lambda: layer(tokens, mask, None), "mixtral_loop": lambda: _mixtral_style(layer, tokens)}, rounds=20
    )
    print(format_ratio("64 experts, 128 tokens vs Mixtral-style loop", times["moe"], times["mixtral_loop"], "< 1x"))
    with torch.inference_mode():
        _, decision = layer(tokens, mask, None)
    used = int((decision.expert_load > 0).sum())
    bytes_read = used * sum(p[0].numel() * p.element_size() for p in layer.experts.parameters())
    floor = bytes_read / _copy_bandwidth()
    print(format_ratio(f"64 experts, 128 tokens ({used} experts used) vs memory floor", times["moe"], floor, "report"))


if __name__ == "__main__":
    main()
