"""A Hub-compatible HTTP server on loopback: enough of huggingface.co for pushing and loading models in tests.

No pip-installable local Hub implements uploads, so this serves the routes that the real ``huggingface_hub``
client (0.36 with transformers 4.57, 2.x with transformers 5) calls, with the headers it checks. Point a fresh
process at it with ``HF_ENDPOINT`` (read when ``huggingface_hub`` is imported). Model repos only.

Routes, and the client calls they serve:

- ``POST /api/repos/create``: ``create_repo`` (409 when the repo exists; the client accepts it with
  ``exist_ok``); answers the repo ``url`` on this endpoint, from which the client takes the repo id.
- ``POST /api/validate-yaml``: ``create_commit`` when the commit holds a ``README.md`` (model cards).
- ``GET /api/agent-harnesses``: the 2.x client's user-agent detection of coding agents; an empty registry.
- ``POST /api/models/{repo}/preupload/{rev}``: ``create_commit`` asks how to send each file; always
  ``regular`` (base64 inside the commit), never LFS or Xet.
- ``POST /api/models/{repo}/commit/{rev}``: ``create_commit`` / ``upload_folder``; NDJSON lines ``header``,
  ``file`` (base64), ``deletedFile``, ``deletedFolder``; ``?create_pr=1`` commits to a new ``refs/pr/N``.
- ``POST /api/models/{repo}/branch/{branch}``: ``create_branch`` (transformers' push with a ``revision``).
- ``GET /api/models/{repo}[/revision/{rev}]``: ``model_info`` / ``repo_info`` (``sha``, ``siblings``).
- ``GET /api/models/{repo}/tree/{rev}[/{path}]``: ``list_repo_tree`` / ``list_repo_files``.
- ``HEAD`` / ``GET /{repo}/resolve/{rev}/{path}``: ``hf_hub_download`` (HEAD for ``X-Repo-Commit``, ``ETag``
  and ``Content-Length``, then GET). Missing repos, revisions and files answer 404 with the Hub's
  ``X-Error-Code`` (``RepoNotFound``, ``RevisionNotFound``, ``EntryNotFound``), which the client turns into the
  exceptions transformers catches when it probes optional files.

Writes need an ``Authorization`` header (any token); reads do not. Each commit is stored as a full copy of the
repo's files under ``root/{namespace}/{name}/{commit sha}/``. Requests are recorded in ``HubServer.requests``
so that a test can show which routes a client needed (``unknown_requests``: those that matched none).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

__all__ = ["HubServer"]

_REPO = r"(?P<repo>[\w.-]+/[\w.-]+)"
_ROUTES = [  # (method, pattern, handler name); `rev` and `path` are matched URL-quoted
    ("POST", r"/api/repos/create", "create_repo"),
    ("POST", r"/api/validate-yaml", "validate_yaml"),
    ("GET", r"/api/agent-harnesses", "agent_harnesses"),
    ("POST", rf"/api/models/{_REPO}/preupload/(?P<rev>[^/]+)", "preupload"),
    ("POST", rf"/api/models/{_REPO}/commit/(?P<rev>[^/]+)", "commit"),
    ("POST", rf"/api/models/{_REPO}/branch/(?P<rev>[^/]+)", "create_branch"),
    ("GET", rf"/api/models/{_REPO}(?:/revision/(?P<rev>[^/]+))?", "model_info"),
    ("GET", rf"/api/models/{_REPO}/tree/(?P<rev>[^/]+)(?:/(?P<path>.*))?", "tree"),
    ("GET", rf"/{_REPO}/resolve/(?P<rev>[^/]+)/(?P<path>.+)", "resolve"),
    ("HEAD", rf"/{_REPO}/resolve/(?P<rev>[^/]+)/(?P<path>.+)", "resolve"),
]


def _git_blob_sha(content: bytes) -> str:
    """The id the Hub gives a regular (non-LFS) file: its git blob hash, used as ETag and ``oid``."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


class HubError(Exception):
    """An error answer: ``X-Error-Code`` / ``X-Error-Message`` headers (what the client maps to exceptions), extra
    ``headers``, and a JSON body of ``error`` plus ``fields``."""

    def __init__(self, status: int, error_code: str | None, message: str, headers: dict | None = None, **fields):
        super().__init__(message)
        self.status, self.error_code, self.message = status, error_code, message
        self.headers, self.fields = headers or {}, fields


class HubServer:
    """``with HubServer(root) as hub:`` serves on ``hub.endpoint`` (a free loopback port) from a thread."""

    def __init__(self, root: Path, default_namespace: str = "user"):
        self.root = Path(root)
        self.default_namespace = default_namespace
        self.refs: dict[str, dict[str, str]] = {}  # repo id → ref name ("main", "refs/pr/1") → commit sha
        self.requests: list[tuple[str, str, int]] = []
        self.commit_messages: dict[str, str] = {}  # commit sha → summary
        self._lock = threading.Lock()
        self._commit_count = 0
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._httpd.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def __enter__(self) -> HubServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    @property
    def unknown_requests(self) -> list[tuple[str, str, int]]:
        return [request for request in self.requests if request[2] == 501]

    def files(self, repo_id: str, revision: str = "main") -> dict[str, bytes]:
        """The repo's files at ``revision`` (a ref or a commit sha): path in repo → content."""
        folder = self._snapshot(repo_id, revision)
        return {path.relative_to(folder).as_posix(): path.read_bytes() for path in folder.rglob("*") if path.is_file()}

    def _snapshot(self, repo_id: str, revision: str) -> Path:
        if repo_id not in self.refs:
            raise HubError(404, "RepoNotFound", f"Repository {repo_id} not found")
        sha = self.refs[repo_id].get(revision, revision)
        if not re.fullmatch(r"[0-9a-f]{40}", sha) or not (self.root / repo_id / sha).is_dir():
            raise HubError(404, "RevisionNotFound", f"Invalid rev id: {revision}")
        return self.root / repo_id / sha

    def _new_commit(self, repo_id: str, ref: str, parent: str | None, change) -> str:
        """Copy the parent snapshot, let ``change(folder)`` edit it, store it under its new sha and move ``ref``."""
        self._commit_count += 1
        sha = hashlib.sha1(f"{repo_id}/{ref}/{self._commit_count}".encode()).hexdigest()
        folder = self.root / repo_id / sha
        if parent is None:
            folder.mkdir(parents=True)
        else:
            shutil.copytree(self.root / repo_id / parent, folder)
        change(folder)
        self.refs[repo_id][ref] = sha
        return sha

    # Route handlers: (URL match, query, body) → (status, JSON-able answer or file bytes, extra headers).

    def create_repo(self, match, query, body):
        request = json.loads(body)
        repo_id = f"{request.get('organization') or self.default_namespace}/{request['name']}"
        if repo_id in self.refs:  # the 0.x client reads the `url` of the 409 answer too
            raise HubError(409, None, "You already created this model repo", url=f"{self.endpoint}/{repo_id}")
        self.refs[repo_id] = {}
        self._new_commit(repo_id, "main", None, lambda folder: None)
        return 200, {"url": f"{self.endpoint}/{repo_id}", "name": repo_id, "id": repo_id}, {}

    def validate_yaml(self, match, query, body):
        return 200, {"errors": [], "warnings": []}, {}

    def agent_harnesses(self, match, query, body):
        return 200, {"standardEnvVars": [], "harnesses": {}}, {}

    def preupload(self, match, query, body):
        folder = self._snapshot(match["repo"], unquote(match["rev"]))
        files = []
        for file in json.loads(body)["files"]:
            existing = folder / file["path"]
            oid = _git_blob_sha(existing.read_bytes()) if existing.is_file() else None
            files.append({"path": file["path"], "uploadMode": "regular", "shouldIgnore": False, "oid": oid})
        return 200, {"files": files}, {}

    def commit(self, match, query, body):
        repo_id, revision = match["repo"], unquote(match["rev"])
        parent = self._snapshot(repo_id, revision).name
        ref = revision if revision in self.refs[repo_id] else "main"
        pull_request_url = None
        if "create_pr" in query:
            ref = f"refs/pr/{sum(name.startswith('refs/pr/') for name in self.refs[repo_id]) + 1}"
            pull_request_url = f"{self.endpoint}/{repo_id}/discussions/{ref.rsplit('/', 1)[1]}"
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]

        def apply(folder: Path) -> None:
            for line in lines:
                target = folder / line["value"].get("path", "")
                if line["key"] == "file":
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(base64.b64decode(line["value"]["content"]))
                elif line["key"] == "deletedFile":
                    target.unlink()
                elif line["key"] == "deletedFolder":
                    shutil.rmtree(target)
                elif line["key"] != "header":
                    raise HubError(400, None, f"Unsupported commit operation {line['key']}")

        sha = self._new_commit(repo_id, ref, parent, apply)
        self.commit_messages[sha] = next(line["value"]["summary"] for line in lines if line["key"] == "header")
        commit_url = f"{self.endpoint}/{repo_id}/commit/{sha}"
        return 200, {"commitOid": sha, "commitUrl": commit_url, "pullRequestUrl": pull_request_url}, {}

    def create_branch(self, match, query, body):
        repo_id, branch = match["repo"], unquote(match["rev"])
        main = self._snapshot(repo_id, "main").name
        if branch in self.refs[repo_id]:
            raise HubError(409, None, f"Reference {branch} already exists")
        self.refs[repo_id][branch] = main
        return 200, {}, {}

    def model_info(self, match, query, body):
        repo_id = match["repo"]
        folder = self._snapshot(repo_id, unquote(match["rev"] or "main"))
        siblings = [{"rfilename": path} for path in sorted(self.files(repo_id, folder.name))]
        return 200, {"id": repo_id, "modelId": repo_id, "sha": folder.name, "private": False, "siblings": siblings}, {}

    def tree(self, match, query, body):
        folder = self._snapshot(match["repo"], unquote(match["rev"]))
        base = folder / unquote(match["path"] or "")
        if not base.is_dir():
            raise HubError(404, "EntryNotFound", f"{match['path']} does not exist")
        recursive = query.get("recursive", ["false"])[0].lower() in ("1", "true")
        entries = []
        for path in sorted(base.rglob("*") if recursive else base.iterdir()):
            relative = path.relative_to(folder).as_posix()
            content = b"" if path.is_dir() else path.read_bytes()
            kind = "directory" if path.is_dir() else "file"
            entries.append({"type": kind, "path": relative, "oid": _git_blob_sha(content), "size": len(content)})
        return 200, entries, {}

    def resolve(self, match, query, body):
        folder = self._snapshot(match["repo"], unquote(match["rev"]))
        file = folder / unquote(match["path"])
        if not file.is_file():  # the client caches, per commit, that the file does not exist
            raise HubError(404, "EntryNotFound", "Entry not found", headers={"X-Repo-Commit": folder.name})
        content = file.read_bytes()
        return 200, content, {"X-Repo-Commit": folder.name, "ETag": f'"{_git_blob_sha(content)}"'}


def _make_handler(hub: HubServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the clients' connection pools expect

        def do_GET(self):
            self._dispatch("GET")

        def do_HEAD(self):
            self._dispatch("HEAD")

        def do_POST(self):
            self._dispatch("POST")

        def log_message(self, format, *args):  # the record in ``hub.requests`` replaces stderr logging
            pass

        def _dispatch(self, method: str) -> None:
            url = urlsplit(self.path)
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                route = next(
                    (
                        (name, found)
                        for verb, pattern, name in _ROUTES
                        if verb == method and (found := re.fullmatch(pattern, url.path))
                    ),
                    None,
                )
                if route is None:
                    raise HubError(501, None, f"{method} {url.path} is not implemented by the test Hub")
                if method == "POST" and not self.headers.get("Authorization", "").startswith("Bearer "):
                    raise HubError(401, None, "Invalid username or password.")
                with hub._lock:
                    status, payload, headers = getattr(hub, route[0])(route[1], parse_qs(url.query), body)
            except HubError as error:
                status, payload = error.status, {"error": error.message, **error.fields}
                headers = {"X-Error-Message": error.message, **error.headers}
                if error.error_code:
                    headers["X-Error-Code"] = error.error_code
            hub.requests.append((method, self.path, status))
            content = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            self.send_response(status)
            content_type = "application/octet-stream" if isinstance(payload, bytes) else "application/json"
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(content)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            if method != "HEAD":
                self.wfile.write(content)

    return Handler
