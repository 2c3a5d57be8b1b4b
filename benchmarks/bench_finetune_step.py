"""A LoRA fine-tuning step against a full fine-tuning step of the same model, side by side: time and peak memory.

One "step" is what a fine-tuning run repeats: forward with labels (sequence classification, 2 labels), backward,
AdamW update, gradients cleared — on the same batch of 32 sequences × 64 tokens. Full fine-tuning updates every
weight; LoRA is what ``compact-bert finetune --peft lora`` builds (``finetuning.peft_support.build_peft_config``:
rank 8 on ``query``/``value`` and on every MoE FFN's stacked expert weights, the task head trained in full), on a
copy of the same initial weights. Models: MiniMoE 4L;384H (1,4E) (preset ``minimoe-4l-384h``) and MoE-BERT small
(preset ``moe-bert-small``: 12 layers, H=128, 64 experts), random weights.

Time: the four steps run interleaved, round after round, in this process (``timing.compare_latencies``); the
medians and their LoRA/full ratio are printed.

Peak memory: CPU PyTorch keeps no allocator statistics, so each (model, variant) runs again alone in a fresh
subprocess (a new address space: its high-water mark owes nothing to this process's models). That subprocess
builds the model and optimizer, reads its resident set (``VmRSS``), resets the kernel's high-water mark to it
(``/proc/self/clear_refs``, "5"), runs the steps and reads the high-water mark (``VmHWM``). Printed per variant:
the peak RSS during the steps (imports and weights included) and the steps' working memory — that peak minus
the RSS before them (activations, gradients, AdamW's states, which it allocates on the first step). Where the
kernel refuses the reset, the working memory is the peak above the construction's own high-water mark, a lower
bound, marked ``>=``. ``ru_maxrss`` is not used: Linux carries it over from the parent through fork and exec.

Run: ``python benchmarks/bench_finetune_step.py`` (``--rounds 3 --memory_steps 2 --tiny`` for a quick smoke run
with 2-layer models; its numbers mean nothing). Measure on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import subprocess
import sys
from pathlib import Path

import torch
from transformers import AutoModelForSequenceClassification

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import compare_latencies, format_seconds

from compact_bert.configuration import preset_config
from compact_bert.finetuning.peft_support import build_peft_config

MODELS = {"MiniMoE 4L;384H (1,4E)": "minimoe-4l-384h", "MoE-BERT small": "moe-bert-small"}
TINY = {"minimoe-4l-384h": {"num_hidden_layers": 2}, "moe-bert-small": {"num_hidden_layers": 2, "num_experts": 8}}
VARIANTS = ("full", "lora")
BATCH, TOKENS = 32, 64


def build_model(preset: str, tiny: bool):
    torch.manual_seed(0)
    config = preset_config(preset, num_labels=2, **(TINY[preset] if tiny else {}))
    return AutoModelForSequenceClassification.from_config(config).train()


def with_lora(model):
    import peft

    return peft.get_peft_model(model, build_peft_config("lora", model, "SEQ_CLS")).train()


def make_batch() -> dict:
    generator = torch.Generator().manual_seed(0)
    return {
        "input_ids": torch.randint(1000, 30000, (BATCH, TOKENS), generator=generator),
        "attention_mask": torch.ones(BATCH, TOKENS, dtype=torch.long),
        "labels": torch.randint(0, 2, (BATCH,), generator=generator),
    }


def make_step(model, batch):
    trainable = [parameter for parameter in model.parameters() if parameter.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=1e-4, weight_decay=0.01)

    def step() -> None:
        model(**batch).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step, sum(parameter.numel() for parameter in trainable)


def _status_mib(field: str) -> float:
    """``VmRSS`` (resident now) or ``VmHWM`` (resident at most) of this process, in MiB (Linux only)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status (Linux only)")


def _reset_high_water_mark() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")  # Linux >= 4.0: VmHWM := VmRSS
    except OSError:
        return False
    return True


def measure_memory(preset: str, variant: str, steps: int, tiny: bool) -> dict:
    """Run in a fresh process: peak RSS and the steps' working memory of one variant, in MiB."""
    model = build_model(preset, tiny)
    model = with_lora(model) if variant == "lora" else model
    step, _ = make_step(model, make_batch())
    gc.collect()
    before = _status_mib("VmRSS")
    reset = _reset_high_water_mark()
    baseline = before if reset else _status_mib("VmHWM")
    for _ in range(steps):
        step()
    peak = _status_mib("VmHWM")
    return {"peak_rss_mib": peak, "step_mib": peak - baseline, "lower_bound": not reset}


def _memory_in_subprocess(preset: str, variant: str, steps: int, tiny: bool) -> dict:
    command = [sys.executable, __file__, "--memory_of", preset, variant, "--memory_steps", str(steps)]
    result = subprocess.run(command + (["--tiny"] if tiny else []), capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def _report(label: str, times: dict, trainable: dict, memory: dict) -> None:
    full, lora = times["full"], times["lora"]
    step_full, step_lora = memory["full"]["step_mib"], memory["lora"]["step_mib"]
    marks = {variant: ">=" if memory[variant]["lower_bound"] else "" for variant in VARIANTS}
    print(
        f"{label}: full step {format_seconds(full)}, LoRA step {format_seconds(lora)} -> LoRA/full {lora / full:.2f}x "
        "time; "
        f"trainable {trainable['full'] / 1e6:.2f}M vs {trainable['lora'] / 1e6:.2f}M parameters"
    )
    print(
        f"  peak RSS full {memory['full']['peak_rss_mib']:.0f} MiB, LoRA {memory['lora']['peak_rss_mib']:.0f} MiB -> "
        f"{memory['lora']['peak_rss_mib'] / memory['full']['peak_rss_mib']:.2f}x; step memory full "
        f"{marks['full']}{step_full:.0f} MiB, LoRA {marks['lora']}{step_lora:.0f} MiB -> "
        f"{step_lora / step_full:.2f}x (target: report; LoRA expected below 1x)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rounds", type=int, default=10, help="Interleaved timing rounds (median, minimum and p90 are reported)."
    )
    parser.add_argument("--warmup", type=int, default=2, help="Untimed rounds first (AdamW allocates its states).")
    parser.add_argument("--memory_steps", type=int, default=3, help="Steps of each memory subprocess.")
    parser.add_argument("--tiny", action="store_true", help="2-layer models (and 8 experts in MoE-BERT): smoke runs.")
    parser.add_argument("--memory_of", nargs=2, metavar=("PRESET", "VARIANT"), help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.memory_of:
        print(json.dumps(measure_memory(*arguments.memory_of, arguments.memory_steps, arguments.tiny)))
        return
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads; batch {BATCH} x {TOKENS} tokens, sequence "
        f"classification, AdamW; medians of {arguments.rounds} interleaved rounds"
        f"{' (tiny models: smoke run)' if arguments.tiny else ''}"
    )
    batch = make_batch()
    candidates, trainable = {}, {}
    models = {f"{label} [tiny]" if arguments.tiny else label: preset for label, preset in MODELS.items()}
    for label, preset in models.items():
        full = build_model(preset, arguments.tiny)
        lora = with_lora(copy.deepcopy(full))  # the same initial weights
        for variant, model in (("full", full), ("lora", lora)):
            candidates[(label, variant)], trainable[(label, variant)] = make_step(model, batch)
    times = compare_latencies(candidates, rounds=arguments.rounds, warmup=arguments.warmup, inference=False)
    del candidates
    gc.collect()
    for label, preset in models.items():
        memory = {
            variant: _memory_in_subprocess(preset, variant, arguments.memory_steps, arguments.tiny)
            for variant in VARIANTS
        }
        _report(
            label,
            {variant: times[(label, variant)] for variant in VARIANTS},
            {variant: trainable[(label, variant)] for variant in VARIANTS},
            memory,
        )


if __name__ == "__main__":
    main()
