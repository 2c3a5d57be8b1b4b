"""``compact-bert push`` against the loopback Hub of ``tests/hub_server.py``: a real run's folder is pushed, the repo
holds exactly the shippable files, loads by id without compact-bert, and every bad input fails before any request.

The CLI runs in fresh processes because ``huggingface_hub`` reads ``HF_ENDPOINT`` when it is imported.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import transformers

from compact_bert.model_cards import excluded_files, hub_files
from compact_bert.modeling import AUTO_CLASSES_BY_CONFIG
from tests.conftest import tiny_configs
from tests.hub_server import HubServer
from tests.remote_code_helpers import load_in_fresh_process

REPO_ROOT = Path(__file__).resolve().parents[2]
EXPECTED_FILES = {
    "README.md",
    "config.json",
    "configuration_minimoe.py",
    "modeling_minimoe.py",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
}
# transformers 4.57 also saves the tokenizer's special_tokens_map.json (5.x folds it into tokenizer_config.json).
LINE_DEPENDENT_TOKENIZER_FILES = {"special_tokens_map.json"}


def _expected_files(folder) -> set[str]:
    return EXPECTED_FILES | {name for name in LINE_DEPENDENT_TOKENIZER_FILES if (folder / name).is_file()}


def _push(hub: HubServer, home: Path, *arguments: str, token: str | None = "hf_test") -> subprocess.CompletedProcess:
    environment = {
        **os.environ,
        "HF_ENDPOINT": hub.endpoint,
        "HF_HUB_OFFLINE": "0",
        "TRANSFORMERS_OFFLINE": "0",
        "HF_HOME": str(home),
        "HF_HUB_CACHE": str(home / "hub"),
    }
    environment.pop("HF_TOKEN", None)
    environment.pop("HUGGING_FACE_HUB_TOKEN", None)
    if token:
        environment["HF_TOKEN"] = token
    return subprocess.run(
        [sys.executable, "-m", "compact_bert.cli.main", "push", *arguments],
        cwd=REPO_ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_hub_files_allow_list(tmp_path):
    shipped = [
        "README.md",
        "adapter_config.json",
        "config.json",
        "configuration_minimoe.py",
        "latency.json",
        "model-00001-of-00002.safetensors",
        "model.onnx",
        "model.safetensors.index.json",
        "model.tflite",
        "modeling_minimoe.py",
        "onnx/config.json",
        "onnx/model.onnx",
        "special_tokens_map.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "vocab.txt",
        # a sentence-transformers folder's pipeline
        "modules.json",
        "sentence_bert_config.json",
        "config_sentence_transformers.json",
        "1_Pooling/config.json",
        "2_Dense/config.json",
        "2_Dense/model.safetensors",
    ]
    kept = [
        "checkpoint-2/model.safetensors",
        "checkpoint-2/optimizer.pt",
        "runs/events.out.tfevents.1",
        "loss_terms.png",
        "run_summary.json",
        "training_args.bin",
        "pytorch_model.bin",
        "onnx/weights.pt",
        "remote_code.py",
        "trainer_state.json",
        ".write-check-x",
        "model.pkl",
        "2_Dense/pytorch_model.bin",
        "1_Pooling/extra/deep.json",
    ]
    for name in shipped + kept:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"x")
    assert hub_files(tmp_path) == sorted(shipped)
    assert excluded_files(tmp_path) == sorted(kept)


@pytest.mark.parametrize(
    "arguments, message",
    [
        (("{parent}", "user/tiny"), "DIR {parent} is not a model folder"),
        (("{parent}/missing", "user/tiny"), "is not a folder"),
        (("{student}", "user//tiny"), "REPO_ID 'user//tiny' is not a valid repo id"),
        (("{student}", "user/tiny", "--revision", "refs/pr/1"), "--revision 'refs/pr/1'"),
    ],
)
def test_bad_arguments_fail_early_naming_the_argument(tmp_path, arguments, message):
    """Checked before the token and the network: this process is offline, so any request would raise instead."""
    from compact_bert.cli.main import main

    config = tiny_configs()["minimoe"]
    student = tmp_path / "model"
    AUTO_CLASSES_BY_CONFIG[type(config)]["AutoModel"](config).save_pretrained(student)
    paths = {"parent": student.parent, "student": student}
    with pytest.raises(SystemExit, match=re.escape(message.format(**paths))):
        main(["push", *(argument.format(**paths) for argument in arguments), "--token", "hf_test"])


def test_dry_run_lists_the_files_and_card_and_uploads_nothing(main_job_run, tmp_path):
    student, _ = main_job_run
    card_before = (student / "README.md").read_bytes()
    with HubServer(tmp_path / "hub") as hub:
        no_token = _push(hub, tmp_path / "home", str(student), "user/tiny", token=None)
        dry_run = _push(hub, tmp_path / "home", str(student), "user/tiny-moe", "--dry-run", token=None)
        assert hub.requests == []
    assert no_token.returncode == 1 and "no Hub token; pass --token, set HF_TOKEN" in no_token.stderr, no_token.stderr
    assert "Traceback" not in no_token.stderr
    assert dry_run.returncode == 0, dry_run.stderr[-3000:]
    listing, card = dry_run.stdout.split("--- README.md ---")
    assert {line.split()[-1] for line in listing.splitlines()[1:] if line.startswith("  ")} == _expected_files(student)
    assert f"{(student / 'model.safetensors').stat().st_size:>12}" in listing
    assert 'from_pretrained("user/tiny-moe", trust_remote_code=True)' in card
    assert (student / "README.md").read_bytes() == card_before, "a dry run rewrote the card"


def test_pushed_run_holds_exactly_the_shippable_files_and_loads_by_id(main_job_run, tmp_path):
    student, _ = main_job_run
    assert {"checkpoint-1", "checkpoint-2", "runs", "loss_terms.png", "run_summary.json"} <= {
        path.name for path in student.iterdir()
    }, "the run no longer writes what the allow-list must keep out"
    assert any(path.suffix in (".pt", ".pth") for path in student.rglob("*")), "the run wrote no pickle to keep out"
    with HubServer(tmp_path / "hub") as hub:
        result = _push(hub, tmp_path / "pusher", str(student), "user/tiny-moe", "--private")
        assert result.returncode == 0, result.stderr[-3000:]
        assert set(hub.files("user/tiny-moe")) == _expected_files(student)
        for name in _expected_files(student):
            assert hub.files("user/tiny-moe")[name] == (student / name).read_bytes(), name
        assert 'from_pretrained("user/tiny-moe", trust_remote_code=True)' in (student / "README.md").read_text()
        branch = _push(hub, tmp_path / "pusher", str(student), "user/tiny-moe", "--revision", "dev", "--keep-card")
        assert branch.returncode == 0, branch.stderr[-3000:]
        assert set(hub.files("user/tiny-moe", "dev")) == _expected_files(
            student
        )  # the branch was created, then pushed to

        batch = {
            "input_ids": torch.tensor([[101, 2023, 2003, 1037, 3231, 102]]),
            "attention_mask": torch.ones(1, 6, dtype=torch.long),
        }
        model = transformers.AutoModel.from_pretrained(student).eval()
        with torch.no_grad():
            expected = model(**batch).last_hidden_state
        torch.save({"inputs": batch, "expected": expected}, tmp_path / "reference.pt")
        environment = {
            "HF_ENDPOINT": hub.endpoint,
            "HF_HUB_OFFLINE": "0",
            "TRANSFORMERS_OFFLINE": "0",
            "HF_HOME": str(tmp_path / "loader"),
            "HF_HUB_CACHE": str(tmp_path / "loader" / "hub"),
        }
        case = {
            "folder": "user/tiny-moe",
            "auto_name": "AutoModel",
            "output": "last_hidden_state",
            "reference": str(tmp_path / "reference.pt"),
        }
        load_in_fresh_process([case], tmp_path / "load", environment=environment)
        download = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from huggingface_hub import hf_hub_download; "
                "print(hf_hub_download('user/tiny-moe', 'README.md', revision='dev'))",
            ],
            env={**os.environ, **environment},
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
        )
        assert download.returncode == 0, download.stderr[-2000:]
        assert Path(download.stdout.strip()).read_bytes() == (student / "README.md").read_bytes()
        assert hub.unknown_requests == []


@pytest.mark.parametrize("flag", ["--private", "--dry-run", "--revision", "--keep-card", "--token"])
def test_push_help_lists_its_flags(flag, capsys):
    from compact_bert.cli.main import main

    with pytest.raises(SystemExit):
        main(["push", "--help"])
    assert flag in capsys.readouterr().out


@pytest.mark.parametrize(
    ("size", "text"), [(512, "512 B"), (4_200, "4.2 kB"), (70_000_000, "70.0 MB"), (1_300_000_000, "1.3 GB")]
)
def test_listed_sizes_use_the_same_si_units_as_every_other_size_printed(size, text):
    from compact_bert.jobs.push import _size

    assert _size(size) == text


def test_symbolic_links_are_never_uploaded_and_are_named(tmp_path):
    """A link inside the folder can point anywhere (``onnx/model_notes.txt -> /etc/passwd``): neither it nor a
    linked folder is listed for upload, whatever its name."""
    from compact_bert.model_cards.hub_files import symbolic_links

    folder = tmp_path / "model"
    config = tiny_configs()["minimoe"]
    AUTO_CLASSES_BY_CONFIG[type(config)]["AutoModel"](config).save_pretrained(folder)
    outside = tmp_path / "secret"
    outside.mkdir()
    (outside / "config.json").write_text("{}")
    (folder / "onnx").mkdir()
    (folder / "onnx" / "model_notes.txt").symlink_to("/etc/passwd")
    (folder / "tokenizer.json").symlink_to(outside / "config.json")
    (folder / "tflite").symlink_to(outside, target_is_directory=True)
    assert hub_files(folder) == ["config.json", "configuration_minimoe.py", "model.safetensors", "modeling_minimoe.py"]
    assert symbolic_links(folder) == ["onnx/model_notes.txt", "tflite", "tokenizer.json"]
    with HubServer(tmp_path / "hub") as hub:
        result = _push(hub, tmp_path / "home", str(folder), "user/linked")
        assert result.returncode == 0, result.stderr[-3000:]
        assert "Skipped 3 link(s), never uploaded" in result.stdout
        assert set(hub.files("user/linked")) == {
            "README.md",
            "config.json",
            "configuration_minimoe.py",
            "model.safetensors",
            "modeling_minimoe.py",
        }


def test_hard_links_are_never_uploaded_and_a_folder_of_links_is_refused(tmp_path):
    """A hard link is the same data as a file elsewhere (``notes.txt`` and ``/etc/passwd`` could be one inode): left
    out and named like a symbolic link. A folder whose weights are links (a hub-cache snapshot) is refused instead
    of pushed as a repository holding only its card."""
    import os

    from compact_bert.model_cards.hub_files import symbolic_links

    folder = tmp_path / "model"
    config = tiny_configs()["minimoe"]
    AUTO_CLASSES_BY_CONFIG[type(config)]["AutoModel"](config).save_pretrained(folder)
    (tmp_path / "secret.txt").write_text("private")
    os.link(tmp_path / "secret.txt", folder / "tokenizer.json")
    assert "tokenizer.json" not in hub_files(folder) and symbolic_links(folder) == ["tokenizer.json"]
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    for path in folder.iterdir():
        (snapshot / path.name).symlink_to(path)
    from compact_bert.cli.main import main

    with pytest.raises(SystemExit, match=r"push: .*snapshot: its config\.json or weights are links"):
        main(["push", str(snapshot), "user/snapshot", "--dry-run"])


def test_pushed_embedding_student_loads_by_id_in_sentence_transformers(tmp_path):
    """The module files travel with the weights: sentence-transformers loads the pushed repo by id with the same
    pooling, projection and normalisation, and the card says how."""
    pytest.importorskip("sentence_transformers")
    from compact_bert.distillation.data import default_tokenizer
    from compact_bert.embeddings import save_sentence_embedder
    from tests.embeddings.helpers import SENTENCES, tiny_embedder

    embedder = tiny_embedder(projection_to=48)
    save_sentence_embedder(embedder, tmp_path / "student", default_tokenizer())
    expected = embedder.encode(SENTENCES, default_tokenizer())
    with HubServer(tmp_path / "hub") as hub:
        result = _push(hub, tmp_path / "home", str(tmp_path / "student"), "user/tiny-embedder")
        assert result.returncode == 0, result.stderr[-3000:]
        assert {"modules.json", "1_Pooling/config.json", "2_Dense/model.safetensors"} <= set(
            hub.files("user/tiny-embedder")
        )
        card = hub.files("user/tiny-embedder")["README.md"].decode()
        assert "library_name: sentence-transformers" in card and 'SentenceTransformer("user/tiny-embedder"' in card
        environment = {
            **os.environ,
            "HF_ENDPOINT": hub.endpoint,
            "HF_HUB_OFFLINE": "0",
            "TRANSFORMERS_OFFLINE": "0",
            "HF_HOME": str(tmp_path / "loader"),
            "HF_HUB_CACHE": str(tmp_path / "loader" / "hub"),
        }
        script = (
            "import sys, json, numpy; from sentence_transformers import SentenceTransformer; "
            "model = SentenceTransformer('user/tiny-embedder', trust_remote_code=True, device='cpu'); "
            "numpy.save(sys.argv[2], model.encode(json.loads(sys.argv[1])))"
        )
        loaded = subprocess.run(
            [sys.executable, "-c", script, __import__("json").dumps(SENTENCES), str(tmp_path / "out.npy")],
            env=environment,
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
        )
        assert loaded.returncode == 0, loaded.stderr[-3000:]
    import numpy

    torch.testing.assert_close(torch.from_numpy(numpy.load(tmp_path / "out.npy")), expected, atol=1e-6, rtol=0)
