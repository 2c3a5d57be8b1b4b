"""Whole-model inference latency on CPU, side by side in one run.

1. Our MobileBERT vs transformers' MobileBertModel with the same weights, batch 1 x 128 tokens, outputs
   checked to match first: eager, ours after ``optimize_for_inference`` (target <= 0.8x; ours is also timed as its
   file defines it, every linear map an ``nn.Linear`` call; floor printed: the forward pass's 362 linear products
   alone, back to back, with the faster of ``F.linear`` and oneDNN-packed weights) and
   both compiled the same way (``torch.compile``, inductor with freezing, ``dynamic=True``; target <= 1.0x).
2. MiniMoE 4L;384H (1,4E) vs its dense twin (1,1E), batch 1 x 128, each in its fastest inference mode
   (the faster of eager after ``optimize_for_inference`` and compiled for each; target <= 1.15x); both also against transformers' own BertModel of
   the same size at its best (SDPA attention, fastest mode), so that a slow twin cannot flatter the ratio. Its
   floor is the MoE layer's own, printed by ``bench_moe_layer.py`` case 1 (the per-expert GEMMs with no routing, vs one FFN): the model pays it in
   each of its 4 FFN blocks on top of the shared attention.
3. MoE-BERT small (12 layers, H=128, 64 experts) vs its vanilla twin (1 expert), batch 8 x 128, eager
   (report).

Run: ``python benchmarks/bench_model_latency.py`` (``--no_compile`` skips the compiled cases, which take
minutes to compile; ``--quick`` runs few rounds and ``--tiny`` 1- or 2-layer models: smoke runs that check the
script works, their numbers mean nothing).
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

import torch
from transformers import BertConfig, BertModel, MobileBertConfig, MobileBertModel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import compare_latencies, format_ratio

import compact_bert
from compact_bert import optimize_for_inference
from compact_bert.configuration import preset_config
from compact_bert.optimization import packed_weight_bytes
from compact_bert.optimization.onednn_weights import packed_linear, packing_available


def compiled_for_inference(model):
    """What the README recommends for CPU inference: inductor with freezing (weights folded and packed)."""
    return torch.compile(model.eval(), dynamic=True, options={"freezing": True})


def _linear_products(model, input_ids):
    """Every ``nn.Linear`` product of one forward pass (inputs recorded once, on the plain model), run back to back with no other op and no module calls between them: what the eager
    model costs with everything but its matrix products removed. Returned twice: with ``F.linear`` (which re-packs
    each weight per call, on MKL's path on AMD CPUs) and with each weight packed once for oneDNN (the fastest GEMM
    this torch has on CPU, where it works); the floor is the faster of the two."""
    products = []
    handles = [
        module.register_forward_hook(lambda module, args, output: products.append((args[0], module)))
        for module in model.modules()
        if isinstance(module, torch.nn.Linear)
    ]
    with torch.inference_mode():
        model(input_ids=input_ids)
    for handle in handles:
        handle.remove()
    pairs = [(inputs, module.weight, module.bias) for inputs, module in products]

    def plain():
        for inputs, weight, bias in pairs:
            torch.nn.functional.linear(inputs, weight, bias)

    if not packing_available():
        return plain, plain
    packed = [
        (inputs.reshape(-1, inputs.shape[-1]), torch.ops.mkldnn._reorder_linear_weight(weight.detach(), None), bias)
        for inputs, weight, bias in pairs
    ]

    def onednn():
        for rows, matrix, bias in packed:
            packed_linear(rows, matrix, bias)

    return plain, onednn


def _warm(calls: dict) -> dict:
    """First calls (compilation, packing) outside the timed rounds."""
    with torch.inference_mode():
        for call in calls.values():
            call()
    return calls


def mobilebert_case(rounds: int, compile_models: bool, tiny: bool) -> None:
    input_ids = torch.randint(1, 30522, (1, 128))
    layers = {"num_hidden_layers": 2} if tiny else {}
    reference = MobileBertModel(MobileBertConfig(**layers)).eval()
    plain = compact_bert.CompactMobileBertModel(preset_config("mobilebert", **layers)).eval()
    plain.load_state_dict(reference.state_dict())
    ours = copy.deepcopy(plain)
    optimize_for_inference(ours, tokens=input_ids.numel())
    with torch.inference_mode():
        difference = ours(input_ids=input_ids).last_hidden_state - reference(input_ids=input_ids).last_hidden_state
    print(f"MobileBERT outputs: max |ours - transformers| = {difference.abs().max().item():.2e}")
    calls = {
        "ours": lambda: ours(input_ids=input_ids),
        "transformers": lambda: reference(input_ids=input_ids),
        "ours_plain": lambda: plain(input_ids=input_ids),
    }
    calls["linear_products"], calls["linear_products_packed"] = _linear_products(plain, input_ids)
    times = compare_latencies(_warm(calls), rounds=rounds)
    print(format_ratio("MobileBERT eager, ours vs transformers", times["ours"], times["transformers"], "<= 0.8x"))
    print(
        format_ratio(
            "  floor: the forward pass's linear products alone, back to back (faster of F.linear / oneDNN packed), "
            "vs transformers",
            min(times["linear_products"], times["linear_products_packed"]),
            times["transformers"],
            "report",
        )
    )
    print(
        format_ratio(
            "  ours as its file defines it (plain nn.Linear calls) vs transformers",
            times["ours_plain"],
            times["transformers"],
            "report",
        )
    )
    print(f"  packed weight copies: {packed_weight_bytes(ours) / 2**20:.1f} MiB")
    if not compile_models:
        return
    ours_compiled, reference_compiled = compiled_for_inference(plain), compiled_for_inference(reference)
    calls = _warm(
        {
            "ours": lambda: ours_compiled(input_ids=input_ids),
            "transformers": lambda: reference_compiled(input_ids=input_ids),
        }
    )
    times = compare_latencies(calls, rounds=rounds)
    print(
        format_ratio(
            "MobileBERT compiled (inductor, freezing), ours vs transformers",
            times["ours"],
            times["transformers"],
            "<= 1.0x",
        )
    )


def _fastest(name: str, model, inputs: dict, rounds: int, compile_models: bool) -> tuple[float, str]:
    optimized = copy.deepcopy(model)
    optimize_for_inference(optimized, tokens=inputs["input_ids"].numel())
    calls = {"eager": lambda: optimized(**inputs)}
    if compile_models:
        compiled = compiled_for_inference(model)
        calls["compiled"] = lambda: compiled(**inputs)
    times = compare_latencies(_warm(calls), rounds=rounds)
    mode = min(times, key=times.get)
    print(f"  {name}: " + ", ".join(f"{key} {value * 1e3:.2f} ms" for key, value in times.items()))
    return times[mode], mode


def minimoe_case(rounds: int, compile_models: bool, tiny: bool) -> None:
    inputs = {"input_ids": torch.randint(1, 30522, (1, 128))}
    layers = {"num_hidden_layers": 1} if tiny else {}
    sparse = compact_bert.MiniMoEModel(preset_config("minimoe-4l-384h", **layers)).eval()
    dense = compact_bert.MiniMoEModel(preset_config("minilm-4l-384h", **layers)).eval()
    print("MiniMoE 4L;384H, batch 1 x 128, each in its fastest mode:")
    moe_time, moe_mode = _fastest("MoE 1,4E", sparse, inputs, rounds, compile_models)
    dense_time, dense_mode = _fastest("dense 1,1E", dense, inputs, rounds, compile_models)
    # The reference at its best: transformers' own BertModel of the same size (SDPA attention), fastest mode.
    config = dense.config
    reference = BertModel(
        BertConfig(
            hidden_size=config.hidden_size,
            num_hidden_layers=config.num_hidden_layers,
            num_attention_heads=config.num_attention_heads,
            intermediate_size=config.intermediate_size,
        ),
        add_pooling_layer=False,
    ).eval()
    bert_time, bert_mode = _fastest("transformers BertModel, same size", reference, inputs, rounds, compile_models)
    print(format_ratio(f"MiniMoE 1,4E ({moe_mode}) vs dense twin ({dense_mode})", moe_time, dense_time, "<= 1.15x"))
    print(format_ratio(f"  vs transformers' BertModel ({bert_mode})", moe_time, bert_time, "report"))
    print(format_ratio(f"  our dense twin vs transformers' BertModel ({bert_mode})", dense_time, bert_time, "report"))


def moe_bert_case(rounds: int, tiny: bool) -> None:
    inputs = {"input_ids": torch.randint(1, 30522, (8, 128))}
    layers = {"num_hidden_layers": 1} if tiny else {}
    sparse = compact_bert.MoEBertModel(preset_config("moe-bert-small", **layers)).eval()
    dense = compact_bert.MoEBertModel(preset_config("vanilla-bert-small", **layers)).eval()
    for model in (sparse, dense):
        optimize_for_inference(model, tokens=inputs["input_ids"].numel())
    times = compare_latencies(
        {"moe": lambda: sparse(**inputs), "dense": lambda: dense(**inputs)}, rounds=max(3, rounds // 3)
    )
    print(
        format_ratio(
            "MoE-BERT small (64 experts) vs vanilla twin, batch 8 x 128, eager", times["moe"], times["dense"], "report"
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no_compile", action="store_true", help="Skip the torch.compile cases (slow to compile).")
    parser.add_argument("--quick", action="store_true", help="Few rounds: a smoke run whose numbers mean little.")
    parser.add_argument("--tiny", action="store_true", help="1- or 2-layer models: a smoke run, numbers mean nothing.")
    arguments = parser.parse_args()
    rounds = 3 if arguments.quick else 30
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    mobilebert_case(rounds, not arguments.no_compile, arguments.tiny)
    minimoe_case(rounds, not arguments.no_compile, arguments.tiny)
    moe_bert_case(rounds, arguments.tiny)


if __name__ == "__main__":
    main()
