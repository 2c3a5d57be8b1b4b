"""Model cards for compact-bert model folders, and what of a folder is shipped to the Hub."""

from ..evaluation.latency_report import LATENCY_FILE, LatencyReport, RuntimeLatency, read_latency, write_latency
from .hub_files import excluded_files, hub_files
from .model_card import MODEL_CARD_FILE, build_model_card, write_model_card

__all__ = [
    "LATENCY_FILE",
    "MODEL_CARD_FILE",
    "LatencyReport",
    "RuntimeLatency",
    "build_model_card",
    "excluded_files",
    "hub_files",
    "read_latency",
    "write_latency",
    "write_model_card",
]
