"""Pushed repos hold the remote code and ``auto_map`` and load by repo id where compact-bert is absent.

The pushes and loads talk to the loopback Hub of ``tests/hub_server.py`` with the real ``huggingface_hub``
client. They run in fresh processes because the client reads ``HF_ENDPOINT`` (and the offline switches) when it
is imported, which this process did long ago; one process pushes every case, one loads them all back.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import transformers

from compact_bert.modeling import AUTO_CLASSES_BY_CONFIG
from tests.conftest import random_batch, tiny_configs
from tests.hub_server import HubServer
from tests.remote_code_helpers import load_in_fresh_process

# (tiny config id, Auto class, output compared, repo id, how it is pushed)
CASES = [
    ("minimoe", "AutoModel", "last_hidden_state", "user/tiny-minimoe", "save_pretrained"),
    ("mobilebert_tiny", "AutoModelForSequenceClassification", "logits", "user/tiny-mobilebert", "push_to_hub"),
    ("moe_bert", "AutoModel", "last_hidden_state", "user/tiny-moe-bert", "push_to_hub"),
]

PUSHER = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path

    import torch
    from huggingface_hub import hf_hub_download, list_repo_files, model_info
    from huggingface_hub.utils import HfHubHTTPError, RepositoryNotFoundError
    from transformers import AutoConfig, AutoModel, BertModel

    from compact_bert.modeling import AUTO_CLASSES_BY_CONFIG

    work = Path(sys.argv[1])
    batch = torch.load(work / "batch.pt")
    for case in json.loads((work / "cases.json").read_text()):
        config = AutoConfig.from_pretrained(case["config"])
        torch.manual_seed(0)
        if config.model_type == "bert":
            model = BertModel(config)
        else:
            model = compact_model = AUTO_CLASSES_BY_CONFIG[type(config)][case["auto_name"]](config)
        model.eval()
        with torch.no_grad():
            expected = getattr(model(**batch), case["output"])
        torch.save({"inputs": batch, "expected": expected}, case["reference"])
        if case["push"] == "save_pretrained":
            folder = work / "saved" / case["folder"]
            # str paths: 4.57's ``save_pretrained(push_to_hub=True)`` splits the folder's name off the path it is given.
            model.save_pretrained(str(folder), push_to_hub=True, repo_id=case["folder"])
            downloaded = Path(hf_hub_download(case["folder"], "config.json"))
            assert downloaded.read_bytes() == (folder / "config.json").read_bytes(), "hf_hub_download differs"
            siblings = {sibling.rfilename for sibling in model_info(case["folder"]).siblings}
            assert set(list_repo_files(case["folder"])) == siblings and "config.json" in siblings, siblings
            with torch.no_grad():  # changed weights, pushed as a pull request and to a new branch; main keeps its own
                next(model.parameters()).add_(1.0)
            model.save_pretrained(str(folder), push_to_hub=True, repo_id=case["folder"], create_pr=True,
                                  commit_message="Shifted weights")
            # A branch is ``push_to_hub``'s (transformers' ``save_pretrained`` creates the repo with its keywords).
            model.push_to_hub(case["folder"], revision="shifted")
            with torch.no_grad():  # a pull request against that branch
                next(model.parameters()).add_(1.0)
            model.push_to_hub(case["folder"], revision="shifted", create_pr=True, commit_message="Shifted twice")
        else:
            model.push_to_hub(case["folder"])
        if config.model_type == "bert":  # transformers' own model loads by id through the same server
            loaded = AutoModel.from_pretrained(case["folder"]).eval()
            with torch.no_grad():
                torch.testing.assert_close(getattr(loaded(**batch), case["output"]), expected)

    try:
        hf_hub_download("user/missing", "config.json")
    except RepositoryNotFoundError:
        pass
    else:
        raise AssertionError("a missing repo was found")
    try:
        compact_model.save_pretrained(str(work / "no-token"), push_to_hub=True, repo_id="user/no-token", token=False)
    except HfHubHTTPError as error:
        assert error.response.status_code == 401, error
        no_token = work / "no-token"  # 5.x makes the folder first, 4.57 does not: nothing is saved in either
        assert not no_token.exists() or not any(no_token.iterdir()), "the repo is created before anything is saved"
    else:
        raise AssertionError("a push without a token succeeded")
    print("pushed")
    """
)


def _hub_environment(hub: HubServer, home) -> dict[str, str]:
    """Point a child at the loopback Hub, online, with an empty cache and a token the server accepts."""
    return {
        "HF_ENDPOINT": hub.endpoint,
        "HF_HUB_OFFLINE": "0",
        "TRANSFORMERS_OFFLINE": "0",
        "HF_HOME": str(home),
        "HF_HUB_CACHE": str(home / "hub"),
        "HF_TOKEN": "hf_test",
    }


@pytest.fixture(scope="module")
def pushed(tmp_path_factory):
    """Every case pushed once to a fresh loopback Hub; yields the server, the cases and the work folder."""
    work = tmp_path_factory.mktemp("hub_push")
    torch.save(random_batch(), work / "batch.pt")
    cases = []
    for config_id, auto_name, output, repo_id, push in CASES:
        tiny_configs()[config_id].save_pretrained(work / "configs" / config_id)
        cases.append(
            {
                "config": str(work / "configs" / config_id),
                "auto_name": auto_name,
                "output": output,
                "folder": repo_id,
                "push": push,
                "reference": str(work / f"{config_id}.pt"),
            }
        )
    bert = transformers.BertConfig(
        vocab_size=128,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=4,
        intermediate_size=48,
        max_position_embeddings=64,
    )
    bert.save_pretrained(work / "configs" / "bert")
    cases.append(
        {
            "config": str(work / "configs" / "bert"),
            "auto_name": "AutoModel",
            "output": "last_hidden_state",
            "folder": "user/plain-bert",
            "push": "push_to_hub",
            "reference": str(work / "bert.pt"),
        }
    )
    (work / "cases.json").write_text(json.dumps(cases))
    (work / "pusher.py").write_text(PUSHER)
    with HubServer(work / "hub") as hub:
        environment = {**os.environ, **_hub_environment(hub, work / "pusher_home")}
        result = subprocess.run(
            [sys.executable, str(work / "pusher.py"), str(work)],
            cwd=work,
            env=environment,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert result.returncode == 0 and "pushed" in result.stdout, result.stderr[-4000:]
        yield hub, cases, work


def test_pushed_repos_hold_the_remote_code_and_auto_map(pushed, tmp_path):
    hub, cases, _ = pushed
    for (config_id, auto_name, *_), case in zip(CASES, cases):
        config = tiny_configs()[config_id]
        local = tmp_path / config_id
        AUTO_CLASSES_BY_CONFIG[type(config)][auto_name](config).save_pretrained(local)
        remote = hub.files(case["folder"])
        code = {path.name: path.read_bytes() for path in local.glob("*.py")}
        assert code and {name: remote.get(name) for name in code} == code, sorted(remote)
        auto_map = json.loads(remote["config.json"])["auto_map"]
        assert auto_map == json.loads((local / "config.json").read_text())["auto_map"]
        assert auto_map[auto_name].startswith("modeling_") and "README.md" in remote and "model.safetensors" in remote
    assert hub.unknown_requests == []


def test_push_keywords_reach_the_hub(pushed):
    hub, cases, _ = pushed
    repo_id = next(case["folder"] for case in cases if case["push"] == "save_pretrained")
    weights = {ref: hub.files(repo_id, ref)["model.safetensors"] for ref in ("main", "refs/pr/1", "shifted")}
    assert weights["refs/pr/1"] == weights["shifted"] != weights["main"]
    assert hub.commit_messages[hub.refs[repo_id]["refs/pr/1"]] == "Shifted weights"
    against_branch = hub.files(repo_id, "refs/pr/2")
    assert against_branch["model.safetensors"] not in weights.values()
    assert hub.commit_messages[hub.refs[repo_id]["refs/pr/2"]] == "Shifted twice"


def test_pushed_repos_load_by_id_without_compact_bert(pushed):
    hub, cases, work = pushed
    compact_cases = [case for case in cases if not case["folder"].endswith("plain-bert")]
    load_in_fresh_process(compact_cases, work, environment=_hub_environment(hub, work / "loader_home"))
    assert hub.unknown_requests == []


def test_only_the_main_process_writes_remote_code_or_pushes(tmp_path):
    """transformers' own saving: 5.x writes and pushes from the main process only. (4.57's ``save_pretrained`` copies
    the code files and creates the repo from every process; the Trainer saves from the main process only.)"""
    if transformers.__version__.startswith("4."):
        pytest.skip("transformers 4.57 writes the code files and creates the repo from every process")
    config = tiny_configs()["minimoe"]
    model = AUTO_CLASSES_BY_CONFIG[type(config)]["AutoModel"](config)
    model.save_pretrained(tmp_path / "saved", is_main_process=False)
    assert not list((tmp_path / "saved").glob("*.py")) and not (tmp_path / "saved" / "config.json").exists()
    # This process is offline (conftest): any attempt to create the repo or upload would raise.
    model.save_pretrained(str(tmp_path), is_main_process=False, push_to_hub=True, repo_id="user/not-pushed")
    assert not list(tmp_path.glob("*.py")) and not (tmp_path / "README.md").exists()
