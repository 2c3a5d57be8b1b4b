"""compact-bert's inference path against an earlier commit's, side by side in one process: no speed regression.

For each case, the same weights run through (1) the model files of ``--ref`` (default ``218cafd``, the last commit whose
model files chose their kernels inside ``forward``) with their default implementations, (2) today's model file as
it is (``plain``) and (3) today's model after ``compact_bert.optimize_for_inference`` (``optimized``, what the CLI
runs). The earlier files are read with ``git show`` into a temporary package, so run this from a git checkout.
Batch 1 and 32 x 128 tokens, random weights, interleaved rounds; prints medians with min / p90 and the ratios.

Run: ``python benchmarks/bench_against_release.py [--ref COMMIT] [--rounds N] [--quick] [--only TEXT]``.
"""

from __future__ import annotations

import argparse
import copy
import importlib
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import compare_latencies, format_ratio, format_seconds

from compact_bert import optimize_for_inference
from compact_bert.models import configuration_module, modeling_module

REPOSITORY = Path(__file__).resolve().parents[1]
# name → (model type, config fields): the main job's dense student and teacher shapes, its MiniMoE twin, MobileBERT.
CASES = {
    "MiniLM 3L;384H (main job's student)": ("minimoe", {"num_hidden_layers": 3, "num_experts": 1}),
    "MiniLM 6L;384H (the teacher's shape)": ("minimoe", {"num_hidden_layers": 6, "num_experts": 1}),
    "MiniMoE 3L;384H, 4 experts": ("minimoe", {"num_hidden_layers": 3, "num_experts": 4}),
    "MobileBERT (24 layers)": ("compact_mobilebert", {}),
    "IB-BERT large (24 layers)": ("ib_bert", {}),
}
_PREFIXES = {"minimoe": "MiniMoE", "compact_mobilebert": "CompactMobileBert", "ib_bert": "IBBert"}
# Today's weight names → the earlier files' (0.1.0's expert names).
_EARLIER_NAMES = {
    "up_proj_bias": "fc1_bias",
    "down_proj_bias": "fc2_bias",
    "up_proj": "fc1_weight",
    "down_proj": "fc2_weight",
}


def _earlier_modeling(ref: str, model_type: str, folder: Path):
    """The ``models/<model_type>`` files of ``ref`` as an importable package ``earlier_<model_type>``."""
    package = folder / f"earlier_{model_type}"
    package.mkdir(exist_ok=True)
    (package / "__init__.py").write_text("")
    for kind in ("configuration", "modeling"):
        path = f"models/{model_type}/{kind}_{model_type}.py"
        text = subprocess.run(["git", "show", f"{ref}:{path}"], cwd=REPOSITORY, check=True, capture_output=True).stdout
        (package / f"{kind}_{model_type}.py").write_bytes(text)
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    return (
        importlib.import_module(f"earlier_{model_type}.configuration_{model_type}"),
        importlib.import_module(f"earlier_{model_type}.modeling_{model_type}"),
    )


def _earlier_key(key: str) -> str:
    for today, earlier in _EARLIER_NAMES.items():
        if key.endswith(f".{today}"):
            return key[: -len(today)] + earlier
    return key


def _models(ref: str, model_type: str, fields: dict, folder: Path):
    prefix = _PREFIXES[model_type]
    config = getattr(configuration_module(model_type), f"{prefix}Config")(**fields)
    plain = getattr(modeling_module(model_type), f"{prefix}Model")(config).eval()
    earlier_configuration, earlier_modeling = _earlier_modeling(ref, model_type, folder)
    earlier = getattr(earlier_modeling, f"{prefix}Model")(getattr(earlier_configuration, f"{prefix}Config")(**fields))
    earlier.load_state_dict({_earlier_key(key): value for key, value in plain.state_dict().items()})
    return earlier.eval(), plain


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ref", default="218cafd", help="the earlier commit whose model files to time")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="batch 1 only, 8 rounds")
    parser.add_argument("--only", default="", help="run the cases whose name contains this text")
    args = parser.parse_args()
    torch.manual_seed(0)
    rounds = 8 if args.quick else args.rounds
    batches = (1,) if args.quick else (1, 32)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; earlier = {args.ref}'s default path")
    with tempfile.TemporaryDirectory() as folder:
        for name, (model_type, fields) in CASES.items():
            if args.only not in name:
                continue
            earlier, plain = _models(args.ref, model_type, fields, Path(folder))
            for batch in batches:
                input_ids = torch.randint(1000, 30000, (batch, 128))
                optimized = copy.deepcopy(plain)
                optimize_for_inference(optimized, tokens=input_ids.numel())
                with torch.inference_mode():
                    reference = earlier(input_ids=input_ids).last_hidden_state
                    difference = (optimized(input_ids=input_ids).last_hidden_state - reference).abs().max()
                times = compare_latencies(
                    {
                        "earlier": lambda model=earlier, ids=input_ids: model(input_ids=ids),
                        "plain": lambda model=plain, ids=input_ids: model(input_ids=ids),
                        "optimized": lambda model=optimized, ids=input_ids: model(input_ids=ids),
                    },
                    rounds=rounds,
                    warmup=3,
                )
                print(f"{name}, batch {batch} x 128 (max |optimized - earlier| {difference:.1e}):")
                print(f"  earlier default: {format_seconds(times['earlier'])}")
                print("  " + format_ratio("optimized vs earlier", times["optimized"], times["earlier"], "<= 1.0x"))
                print("  " + format_ratio("plain vs earlier", times["plain"], times["earlier"], "report"), flush=True)


if __name__ == "__main__":
    main()
