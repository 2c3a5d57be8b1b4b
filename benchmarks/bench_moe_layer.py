"""MoE layer against its lower bounds (DESIGN.md §2.4), measured side by side in one run.

Inference (eval mode, ``torch.inference_mode``; "MoE" is the layer after ``optimize_for_inference``, its experts on
matrices packed once for oneDNN, ``optimization/packed_modules.py``; "plain" is the layer as the model file defines
it with the eager per-expert ``F.linear`` loop):

1. 4 experts, d=384, FFN 1536, 128 tokens: MoE layer vs one expert FFN over all tokens on the same kernel
   path (packed vs packed, plain vs plain); target <= 1.5x. Floor printed: the per-expert GEMMs over equal
   pre-sorted slices with no routing at all.
2. 64 experts, d=768, FFN 3072, 128 tokens: MoE layer vs the weight-read floor (one streaming read of the
   weights of the experts the batch uses, timed in the same rounds); target >= 80% of the floor, i.e.
   floor / MoE >= 0.8. Also against transformers' Mixtral-style per-expert loop over the same weights (target < 1x).
3. 64 experts, 4,096 tokens: MoE layer vs a dense FFN of the same size (its fastest path: packed) over the
   same tokens; target <= 1.3x, with the no-routing GEMM floor.

Training (train mode, gradients, no packing): forward + backward of the MoE layer vs the
dense FFN at 128 and 4,096 tokens (d=384, 4 experts; d=768, 64 experts), in the form the layer chooses (the
grouped GEMM of transformers' experts interface, ``experts_implementation="grouped_mm"``, on transformers 5), printed
for the record, and the grouped form against the per-expert loop.

Run: ``python benchmarks/bench_moe_layer.py`` (``--quick``: few rounds; ``--tiny``: small layers too; both
are smoke runs that check the script works, their numbers mean nothing).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import sys
from pathlib import Path

import torch
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import compare_latencies, format_ratio

from compact_bert import optimize_for_inference
from compact_bert.configuration import MiniMoEConfig
from compact_bert.models.minimoe.modeling_minimoe import MiniMoESparseFeedForward as MoEFeedForward
from compact_bert.optimization import packed_weight_bytes
from compact_bert.optimization.onednn_weights import PackedMatrices, packed_linear, packing_available


def _layer(experts: int, hidden: int, ffn: int) -> MoEFeedForward:
    config = MiniMoEConfig(hidden_size=hidden, num_attention_heads=12, intermediate_size=ffn, num_experts=experts)
    config._experts_implementation = "eager"  # the file's own loop (transformers 5 would default to grouped_mm)
    layer = MoEFeedForward(config).eval()
    with torch.no_grad():
        for parameter in layer.parameters():
            parameter.normal_(std=0.02)
    return layer


def _optimized(layer: MoEFeedForward) -> MoEFeedForward:
    """A copy of ``layer`` after ``optimize_for_inference`` (its experts on packed matrices)."""
    optimized = copy.deepcopy(layer)
    optimize_for_inference(optimized, measure=False)
    return optimized


@contextlib.contextmanager
def _experts_implementation(layer: MoEFeedForward, name: str):
    """``layer``'s experts through transformers' experts implementation ``name`` for the block (transformers 5)."""
    config = layer.experts.config
    previous = config._experts_implementation
    config._experts_implementation = name
    try:
        yield
    finally:
        config._experts_implementation = previous


def _one_expert(layer: MoEFeedForward, tokens: torch.Tensor) -> torch.Tensor:
    """Expert 0 as a dense FFN over every token, with ``F.linear`` (which packs its weight on every call)."""
    experts = layer.experts
    inner = experts.act_fn(F.linear(tokens, experts.up_proj[0], experts.up_proj_bias[0]))
    return F.linear(inner, experts.down_proj[0], experts.down_proj_bias[0])


def _packed_one_expert(layer: MoEFeedForward):
    """Expert 0 as a dense FFN over every token with weights packed once: the dense layer's fastest path."""
    experts = layer.experts
    if not packing_available():
        return lambda tokens: _one_expert(layer, tokens)
    fc1 = torch.ops.mkldnn._reorder_linear_weight(experts.up_proj[0].detach().contiguous(), None)
    fc2 = torch.ops.mkldnn._reorder_linear_weight(experts.down_proj[0].detach().contiguous(), None)

    def ffn(tokens: torch.Tensor) -> torch.Tensor:
        rows = tokens.reshape(-1, tokens.shape[-1])
        return packed_linear(packed_linear(rows, fc1, experts.up_proj_bias[0], "gelu"), fc2, experts.down_proj_bias[0])

    return ffn


def _experts_only(layer: MoEFeedForward, counts: list[int] | None = None):
    """The experts' GEMMs over pre-sorted slices, no routing: the floor of any top-1 dispatch here (on the layer's
    own kernel path: its packed copies where it packs). Equal slices by default; ``counts`` gives each expert's
    number of tokens (a routing's own slice sizes: GEMMs on uneven row counts cost more than on equal ones)."""
    experts = layer.experts
    fc1 = fc2 = None
    if packing_available():
        with torch.inference_mode():
            fc1, fc2 = PackedMatrices().current(experts.up_proj), PackedMatrices().current(experts.down_proj)

    def expert_ffn(rows: torch.Tensor, expert: int) -> torch.Tensor:
        if fc1 is not None and fc2 is not None:
            hidden = packed_linear(rows, fc1[expert], experts.up_proj_bias[expert], "gelu")
            return packed_linear(hidden, fc2[expert], experts.down_proj_bias[expert])
        inner = experts.act_fn(F.linear(rows, experts.up_proj[expert], experts.up_proj_bias[expert]))
        return F.linear(inner, experts.down_proj[expert], experts.down_proj_bias[expert])

    def run(tokens: torch.Tensor) -> torch.Tensor:
        rows = tokens.reshape(-1, tokens.shape[-1])
        chunks = rows.chunk(layer.experts.num_experts) if counts is None else rows.split(counts)
        return torch.cat([expert_ffn(chunk, expert) for expert, chunk in enumerate(chunks)])

    return run


def _mixtral_style(layer: MoEFeedForward, tokens: torch.Tensor) -> torch.Tensor:
    """The dispatch of transformers' MixtralSparseMoeBlock (top-1) over our experts' weights."""
    flat = tokens.reshape(-1, tokens.shape[-1])
    probs = torch.softmax(layer.router.gate(flat).float(), dim=-1)
    gate, chosen = probs.max(dim=-1)
    expert_mask = F.one_hot(chosen, layer.experts.num_experts).permute(1, 0)
    output = torch.zeros_like(flat)
    experts = layer.experts
    for expert in torch.greater(expert_mask.sum(dim=-1), 0).nonzero().flatten().tolist():
        token_index = torch.where(expert_mask[expert])[0]
        inner = experts.act_fn(F.linear(flat[token_index], experts.up_proj[expert], experts.up_proj_bias[expert]))
        result = F.linear(inner, experts.down_proj[expert], experts.down_proj_bias[expert]) * gate[token_index, None]
        output.index_add_(0, token_index, result)
    return output.view_as(tokens)


def _read_weights(layer: MoEFeedForward, experts: list[int]):
    """One streaming read of the given experts' weights (a sum over each matrix): the weight-read floor of a
    layer that must read them once. Their 15 MiB per expert are far beyond the caches, so this is DRAM bandwidth.
    (A copy from an untouched ``torch.empty`` tensor would not do: its pages all map the kernel's one zero page,
    so it measures write bandwidth, about twice the read speed real weights allow.)"""
    matrices = [parameter[expert] for expert in experts for parameter in layer.experts.parameters()]

    def read() -> None:
        for matrix in matrices:
            matrix.sum()

    return read


# (experts, hidden, FFN) of each case at full size and in a --tiny smoke run.
SIZES = {"small": (4, 384, 1536), "large": (64, 768, 3072)}
TINY_SIZES = {"small": (4, 48, 96), "large": (8, 48, 96)}


def small_layer_case(rounds: int, sizes: dict) -> None:
    experts, hidden, ffn = sizes["small"]
    layer = _layer(experts, hidden, ffn)
    optimized = _optimized(layer)
    tokens, mask = torch.randn(1, 128, hidden), torch.ones(1, 128, dtype=torch.bool)
    packed_ffn, experts_only = _packed_one_expert(layer), _experts_only(layer)
    times = compare_latencies(
        {
            "moe": lambda: optimized(tokens, mask, None),
            "one_expert": lambda: packed_ffn(tokens),
            "experts_only": lambda: experts_only(tokens),
            "moe_plain": lambda: layer(tokens, mask, None),
            "one_expert_plain": lambda: _one_expert(layer, tokens),
        },
        rounds=rounds,
    )
    one_expert, plain_one_expert = times["one_expert"], times["one_expert_plain"]
    label = f"{experts} experts, d={hidden}, FFN {ffn}, 128 tokens vs one expert FFN (packed, same path)"
    print(format_ratio(label, times["moe"], one_expert, "<= 1.5x"))
    print(format_ratio("  floor: per-expert packed GEMMs, no routing", times["experts_only"], one_expert, "report"))
    print(format_ratio("  plain F.linear path, MoE vs one FFN", times["moe_plain"], plain_one_expert, "report"))
    print(format_ratio("  MoE optimized vs MoE plain", times["moe"], times["moe_plain"], "report"))


def large_layer_cases(rounds: int, sizes: dict) -> None:
    experts, hidden, ffn = sizes["large"]
    layer = _layer(experts, hidden, ffn)
    optimized = _optimized(layer)
    tokens, mask = torch.randn(1, 128, hidden), torch.ones(1, 128, dtype=torch.bool)
    with torch.inference_mode():
        _, decision = layer(tokens, mask, None, output_router_stats=True)
    used = (decision.expert_load > 0).nonzero().flatten().tolist()
    times = compare_latencies(
        {
            "moe": lambda: optimized(tokens, mask, None),
            "floor": _read_weights(layer, used),
            "moe_plain": lambda: layer(tokens, mask, None),
            "mixtral_loop": lambda: _mixtral_style(layer, tokens),
        },
        rounds=rounds,
    )
    bytes_read = len(used) * sum(p[0].numel() * p.element_size() for p in layer.experts.parameters())
    floor = times["floor"]
    print(
        f"{experts} experts, d={hidden}, FFN {ffn}, 128 tokens ({len(used)} experts used, {bytes_read / 2**20:.0f} MiB "
        f"of weights): MoE {times['moe'] * 1e3:.2f} ms, weight-read floor {floor * 1e3:.2f} ms "
        f"({bytes_read / floor / 1e9:.1f} GB/s) -> {floor / times['moe']:.0%} of the floor's speed (target >= 80%)"
    )
    print(format_ratio("  MoE optimized vs plain", times["moe"], times["moe_plain"], "report"))
    print(format_ratio("  MoE vs Mixtral-style loop", times["moe"], times["mixtral_loop"], "< 1x"))
    expert_bytes = sum(p.numel() * p.element_size() for p in layer.experts.parameters())
    print(
        f"  packed copies: {packed_weight_bytes(optimized) / 2**20:.0f} MiB next to {expert_bytes / 2**20:.0f} MiB "
        "of expert weights"
    )

    tokens, mask = torch.randn(8, 512, hidden), torch.ones(8, 512, dtype=torch.bool)
    packed_ffn, experts_only = _packed_one_expert(layer), _experts_only(layer)
    times = compare_latencies(
        {
            "moe": lambda: optimized(tokens, mask, None),
            "dense": lambda: packed_ffn(tokens),
            "dense_plain": lambda: _one_expert(layer, tokens),
            "experts_only": lambda: experts_only(tokens),
        },
        rounds=max(3, rounds // 4),
        warmup=1,
    )
    print(
        format_ratio(f"{experts} experts, 4096 tokens vs dense FFN (packed)", times["moe"], times["dense"], "<= 1.3x")
    )
    print(format_ratio("  vs dense FFN with F.linear", times["moe"], times["dense_plain"], "report"))
    print(
        format_ratio("  floor: per-expert packed GEMMs, no routing", times["experts_only"], times["dense"], "report")
    )


def training_cases(rounds: int, sizes: dict) -> None:
    """Forward + backward, train mode: what a training step pays for the MoE layer over a dense FFN."""
    for experts, hidden, ffn in sizes.values():
        layer = _layer(experts, hidden, ffn).train()
        for tokens_count in (128, 4096):
            tokens = torch.randn(tokens_count // 128, 128, hidden, requires_grad=True)
            mask = torch.ones(tokens_count // 128, 128, dtype=torch.bool)
            upstream = torch.randn(tokens_count // 128, 128, hidden)  # a dense gradient, as a model hands it

            def step(layer=layer, tokens=tokens, mask=mask, upstream=upstream):
                layer(tokens, mask, None)[0].backward(upstream)

            def loop_step(layer=layer, step=step):
                with _experts_implementation(layer, "eager"):
                    step()

            def grouped_step(layer=layer, step=step):
                with _experts_implementation(layer, "grouped_mm"):
                    step()

            candidates = {"moe_loop": loop_step, "dense": lambda: _one_expert(layer, tokens).backward(upstream)}  # noqa: B023
            # transformers 5's default: its grouped GEMM (4.57 has no experts interface: the loop).
            grouped_by_default = hasattr(layer.experts, "has_gate")
            if grouped_by_default:
                candidates["moe_grouped"] = grouped_step
            times = compare_latencies(
                candidates, rounds=max(3, rounds // (4 if tokens_count > 128 else 1)), warmup=1, inference=False
            )
            default = times["moe_grouped"] if grouped_by_default else times["moe_loop"]
            form = "grouped_mm" if grouped_by_default else "per-expert loop"
            label = f"training fwd+bwd, {experts} experts d={hidden}, {tokens_count} tokens ({form}) vs dense FFN"
            print(format_ratio(label, default, times["dense"], "report"))
            if "moe_grouped" in times:
                print(
                    format_ratio("  grouped_mm vs per-expert loop", times["moe_grouped"], times["moe_loop"], "report")
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="Few rounds: a smoke run whose numbers mean little.")
    parser.add_argument("--tiny", action="store_true", help="Tiny layers: a smoke run whose numbers mean nothing.")
    arguments = parser.parse_args()
    rounds = 2 if arguments.quick else 40
    sizes = TINY_SIZES if arguments.tiny else SIZES
    torch.manual_seed(0)
    packing = "available" if packing_available() else "unavailable: every packed case runs the plain path"
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, oneDNN packing {packing}")
    small_layer_case(rounds, sizes)
    large_layer_cases(rounds, sizes)
    training_cases(rounds, sizes)


if __name__ == "__main__":
    main()
