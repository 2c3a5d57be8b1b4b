"""``compact-bert presets``: the model zoo with parameter counts and FLOPs, built on the meta device, and how each
ships: a dense student as transformers' own BERT (no code in the folder), the mixture-of-experts and paper families
as compact-bert model types with their remote code."""

from __future__ import annotations

import argparse
import json

from ..configuration import CONFIG_CLASSES, PRESETS, preset_config
from ..modeling.model_stats import count_parameters, estimate_flops, meta_model

__all__ = ["SHIPS_AS", "add_parser", "preset_rows", "run"]

SHIPS_AS = {
    "transformers": "transformers BERT (no remote code)",
    "code": "compact-bert type (trust_remote_code)",
}


def preset_rows(sequence_length: int = 128) -> list[dict]:
    rows = []
    for name in PRESETS:
        config = preset_config(name)
        total, active = count_parameters(meta_model(config))
        bottleneck = getattr(config, "intra_bottleneck_size", None)
        rows.append(
            {
                "preset": name,
                "model_type": config.model_type,
                "ships_as": SHIPS_AS["code" if config.model_type in CONFIG_CLASSES else "transformers"],
                "layers": config.num_hidden_layers,
                "hidden_size": config.hidden_size,
                "intra_bottleneck_size": bottleneck if getattr(config, "use_bottleneck", False) else None,
                "attention_experts": getattr(config, "num_attention_experts", 1),
                "ffn_experts": getattr(config, "num_experts", 1),
                "total_params": total,
                "active_params_per_token": active,
                "flops_per_sequence": estimate_flops(config, sequence_length),
                "sequence_length": sequence_length,
            }
        )
    return rows


def _millions(value: int) -> str:
    return f"{value / 1e9:.2f}B" if value >= 1e9 else f"{value / 1e6:.1f}M"


def format_table(rows: list[dict]) -> str:
    header = (
        "| preset | model_type | ships as | layers | hidden (inter/intra) | experts (MHA,FFN) | params | active/token "
        "| FLOPs |"
    )
    lines = [header, "|" + "---|" * 9]
    for row in rows:
        hidden = str(row["hidden_size"])
        if row["intra_bottleneck_size"] is not None:
            hidden += f"/{row['intra_bottleneck_size']}"
        lines.append(
            f"| {row['preset']} | {row['model_type']} | {row['ships_as']} | {row['layers']} | {hidden} | "
            f"{row['attention_experts']},{row['ffn_experts']} | {_millions(row['total_params'])} | "
            f"{_millions(row['active_params_per_token'])} | {row['flops_per_sequence'] / 1e9:.2f}B |"
        )
    return "\n".join(lines)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "presets",
        help="List the paper-size presets with params, active params, FLOPs and how each ships.",
        description="Every named preset, built on the meta device (no memory), with total parameters, "
        "parameters active per token and forward FLOPs of the base model for one sequence "
        "(multiply-add = 2 FLOPs).",
    )
    parser.add_argument("--json", action="store_true", help="Print JSON instead of a Markdown table.")
    parser.add_argument(
        "--sequence-length", type=int, default=128, help="Tokens per sequence for FLOPs (default 128)."
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.sequence_length < 1:
        raise SystemExit(f"--sequence-length must be >= 1, got {args.sequence_length}.")
    rows = preset_rows(args.sequence_length)
    print(json.dumps(rows, indent=2) if args.json else format_table(rows))
    return 0
