"""The relation KL as one compiled C loop (``relation_kl.c``): no ``[seq, seq]`` tensor is ever written to memory.

The chunked PyTorch backend still writes and re-reads each relation score matrix about ten times (two products, two
``log_softmax``, two ``exp``, the differences, the gradient kernel and its backward GEMMs): at a batch of 16 × 128
with 32 relation heads that made the loss about a quarter of a distillation step. The C kernel computes one row's
scores, softmaxes, divergence and gradient in L1 cache and moves on, so the loss costs about what its arithmetic costs.

The loss it serves is a weighted sum ``Σ_i w_i KL_i`` whose weights are known before the forward pass (real query
tokens, averaged over relation heads), so the gradient is computed in the same pass and saved; the backward pass only
scales it by the upstream gradient (the fused-loss pattern of fused cross-entropy kernels).

The library is built once per machine with the system C compiler (``$CC``, else ``cc``/``gcc``/``clang``), keyed by
the source, the compiler, its flags and the CPU (``-march=native``), and called through ``ctypes``, which releases the
GIL, from ``torch.get_num_threads()`` threads over disjoint relation heads. Where no compiler works,
``NativeKernelUnavailable`` says why and the caller falls back to PyTorch.

A C loop trusts the sizes it is given, so ``native_relation_kl`` checks shapes, dtypes and device
(``validation.py``) and makes every tensor contiguous float32 before a pointer leaves Python.

Loading a shared library runs its code, so the cache is treated as code, not data. The library lives in a folder that
only this user can write (created 0700; one owned by another user is refused), is loaded only if it is a regular file
of this user's that no one else can write and whose SHA-256 is the one recorded when it was built (a truncated
library handed to the dynamic loader killed the process with SIGBUS), and is otherwise rebuilt with the same flags
and a warning naming the file — never silently replaced by the slower portable build. Building and checking hold an
``flock`` on the folder, which the kernel releases when its holder dies.

Why not ``torch.utils.cpp_extension.load``: it needs ``ninja`` (not a dependency of compact-bert; without it the
kernel would fall back to the 2x slower ``eager`` on machines with a working C compiler), compiles C++ and links
libtorch for a kernel that uses neither, keys its cache by source and flags but not by CPU (a ``-march=native`` build
in a home folder shared between machines dies with SIGILL on another CPU), takes its lock by creating a file that a
killed build leaves behind (later processes wait on it forever), and loads whatever its cache folder holds
(``$TORCH_EXTENSIONS_DIR`` may be shared) without checking who wrote it. Nor Inductor: ``torch.compile`` of the
autograd formulation took 31 s to compile and ran 2.8x slower than this kernel (248 vs 88 ms forward and backward,
batch 16 x 128, 32 relation heads, 2 threads of an AMD EPYC), short of the 1.2x that would justify replacing it.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import logging
import os
import platform
import re
import shutil
import stat
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from .validation import check_relation_inputs

try:
    import fcntl
except ImportError:  # Windows: no flock; the atomic renames still keep a reader from seeing half a library
    fcntl = None

__all__ = ["NativeKernelUnavailable", "native_relation_kl", "load_native_library"]

logger = logging.getLogger(__name__)

_SOURCE = Path(__file__).with_name("relation_kl.c")
# -fno-math-errno and -fno-trapping-math change no result (no errno, no floating-point traps to preserve) but let the
# loops with comparisons and float-to-int conversions vectorise: 2.9x faster than -O3 alone on an AVX2 EPYC.
_FLAG_SETS = (
    ["-O3", "-march=native", "-fopenmp-simd", "-fno-math-errno", "-fno-trapping-math"],
    ["-O3", "-fopenmp-simd", "-fno-math-errno", "-fno-trapping-math"],
)
_COMMON_FLAGS = ["-std=c99", "-fPIC", "-shared"]
_NO_CHECKSUM = "no checksum was recorded for it (built by an earlier compact-bert)"


class NativeKernelUnavailable(RuntimeError):
    """The C relation kernel cannot be built or loaded here; the message says why (compiler, its output)."""


def _compiler() -> str:
    for candidate in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if candidate and shutil.which(candidate):
            return shutil.which(candidate)
    raise NativeKernelUnavailable("no C compiler found ($CC, cc, gcc or clang on PATH)")


def _cpu_signature() -> str:
    """What ``-march=native`` depends on: the CPU model and its instruction-set flags (Linux), else the platform."""
    signature = [platform.machine(), platform.processor()]
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "flags", "Features")):
                signature.append(line)
            if line.strip() == "":
                break  # the first processor describes them all
    except OSError:
        pass
    return "\n".join(signature)


def _cache_dir() -> Path:
    from ...training.cache_folder import compact_bert_cache_root

    return compact_bert_cache_root() / "kernels"


def _current_uid() -> int | None:
    """This process's user id; None where there are none (Windows), and ownership is then not checked."""
    return os.getuid() if hasattr(os, "getuid") else None


def _foreign_owner(info: os.stat_result) -> str | None:
    uid = _current_uid()
    if uid is None or info.st_uid == uid:
        return None
    return f"belongs to user id {info.st_uid}, not to this user ({uid})"


def _writable_by_others(info: os.stat_result) -> bool:
    """Group or world write permission; never on Windows, whose mode bits copy the owner's (ACLs decide there)."""
    return os.name == "posix" and bool(info.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def _private_folder() -> Path:
    """The kernels folder, created private (0700). Another user's folder is refused: whoever can write there chooses
    the code this process runs. One of ours that others can write is made private: its files are checked anyway."""
    folder = _cache_dir()
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = folder.stat()
    except OSError as error:
        raise NativeKernelUnavailable(
            f"the kernel cache folder {folder} cannot be created: {error} (set $COMPACT_BERT_CACHE to a folder you can "
            "write to)"
        ) from None
    foreign = _foreign_owner(info)
    if foreign or not stat.S_ISDIR(info.st_mode):
        message = (
            f"the kernel cache folder {folder} {foreign or 'is not a folder'}: no library is loaded from a folder "
            "another user can write; point $COMPACT_BERT_CACHE at a folder of yours"
        )
        logger.warning("The native relation kernel is not loaded: %s.", message)
        raise NativeKernelUnavailable(message)
    if _writable_by_others(info):
        logger.warning("The kernel cache folder %s was writable by other users; it is now private (0700).", folder)
        folder.chmod(0o700)
    return folder


@contextlib.contextmanager
def _folder_lock(folder: Path):
    """Hold an exclusive ``flock`` on ``folder/build.lock``: one process checks or builds at a time, and a process
    killed while building leaves nothing that blocks the next one (the kernel drops the lock with its holder)."""
    if fcntl is None:
        yield
        return
    descriptor = os.open(folder / "build.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # releases the lock


def _checksum_path(library: Path) -> Path:
    return library.with_name(library.name + ".sha256")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _distrust(library: Path) -> str | None:
    """Why the cached ``library`` must not be loaded, or None when it is this user's, writable by no one else and
    the bytes that were built (a truncated or altered file is caught here, before the dynamic loader maps it)."""
    checksum = _checksum_path(library)
    for path in (library, checksum):
        try:
            info = path.lstat()
        except FileNotFoundError:
            return _NO_CHECKSUM if path == checksum else f"{path} is missing"
        if not stat.S_ISREG(info.st_mode):
            return f"{path} is not a regular file"
        foreign = _foreign_owner(info)
        if foreign:
            return f"{path} {foreign}"
        if _writable_by_others(info):
            return f"{path} is writable by other users"
    recorded, actual = checksum.read_bytes().strip(), _sha256(library)
    if recorded != actual.encode():
        shown = f"the {recorded[:16].decode()}…" if re.fullmatch(rb"[0-9a-f]{64}", recorded) else "no SHA-256"
        return f"its SHA-256 is {actual[:16]}…, not {shown} recorded when it was built: corrupt or replaced"
    return None


def _remove(library: Path) -> None:
    for path in (library, _checksum_path(library)):
        path.unlink(missing_ok=True)


def _build(compiler: str, flags: list[str], target: Path) -> None:
    """Compile into a private scratch folder, then rename the library and its checksum into place (atomic: another
    reader sees no library or a whole one)."""
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        built = Path(scratch) / target.name
        command = [compiler, *flags, *_COMMON_FLAGS, "-o", str(built), str(_SOURCE), "-lm"]
        result = subprocess.run(command, capture_output=True, text=True, timeout=300)
        if result.returncode != 0:
            raise NativeKernelUnavailable(
                f"`{' '.join(command)}` failed: {(result.stderr or result.stdout).strip()[-2000:]}"
            )
        built.chmod(0o700)  # the compiler applies the umask, which may leave it group-writable
        checksum = _checksum_path(built)
        checksum.write_text(_sha256(built) + "\n")
        checksum.chmod(0o600)
        os.replace(built, target)
        os.replace(checksum, _checksum_path(target))


def _verified_or_built(compiler: str, flags: list[str], target: Path) -> None:
    """Leave ``target`` a library that ``_distrust`` accepts: the cached one, else a fresh build. A cached file that
    fails the checks is rebuilt with the same flags and a warning naming it."""
    if target.exists() or target.is_symlink():
        problem = _distrust(target)
        if problem is None:
            return
        level = logging.INFO if problem == _NO_CHECKSUM else logging.WARNING
        logger.log(level, "Rebuilding the native relation kernel %s: %s.", target, problem)
        _remove(target)
    _build(compiler, flags, target)


def load_native_library() -> ctypes.CDLL:
    """The compiled kernel, built on first use (well under a second with gcc) and cached per source, compiler and
    CPU. Raises ``NativeKernelUnavailable`` where no compiler can build it — the same error on every later call,
    without probing the compiler again (``auto`` asks at every loss call)."""
    outcome = _load_once()
    if isinstance(outcome, NativeKernelUnavailable):
        raise outcome
    return outcome


def _clear_cache() -> None:
    """Forget the loaded library or the failure (tests that change the compiler or the cache folder)."""
    _load_once.cache_clear()


load_native_library.cache_clear = _clear_cache


@functools.lru_cache(maxsize=1)
def _load_once() -> ctypes.CDLL | NativeKernelUnavailable:
    try:
        return _build_and_load()
    except NativeKernelUnavailable as error:
        return error


def _library_path(compiler: str, version: str, flags: list[str], folder: Path) -> Path:
    key = hashlib.sha256(
        "\n".join([_SOURCE.read_text(), compiler, version, " ".join(flags), _cpu_signature()]).encode()
    )
    return folder / f"relation_kl-{key.hexdigest()[:20]}{'.dll' if os.name == 'nt' else '.so'}"


def _build_and_load() -> ctypes.CDLL:
    compiler = _compiler()
    try:
        version = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as error:
        raise NativeKernelUnavailable(f"{compiler} --version failed: {error}") from None
    folder = _private_folder()
    failures = []
    for flags in _FLAG_SETS:
        target = _library_path(compiler, version, flags, folder)
        try:
            with _folder_lock(folder):
                _verified_or_built(compiler, flags, target)
                library = ctypes.CDLL(str(target))
        except (NativeKernelUnavailable, OSError, subprocess.SubprocessError) as error:
            if isinstance(error, OSError):  # not the compiler refusing the flags: a file it did not expect
                logger.warning("The native relation kernel %s does not load: %s", target, error)
            failures.append(str(error))
            continue
        if failures:
            logger.info("The native relation kernel is built without %s: %s", " ".join(flags), "; ".join(failures))
        int64, pointer = ctypes.c_int64, ctypes.c_void_p
        library.relation_kl.argtypes = [int64] * 5 + [pointer] * 6
        library.relation_kl.restype = ctypes.c_int
        return library
    raise NativeKernelUnavailable("; ".join(failures))


@functools.lru_cache(maxsize=4)
def _threads(count: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=count, thread_name_prefix="compact-bert-relation-kl")


def _address(tensor: torch.Tensor | None) -> int | None:
    return None if tensor is None else tensor.data_ptr()


def _check_layout(student, teacher, key_mask, row_weight, divergence, grad) -> None:
    """The last guard before addresses go to C: each tensor a dense CPU float32 block of the shape the C loop walks.
    ``native_relation_kl`` arranges this; a failure here is a bug in this module, not in the caller's input."""
    rows, seq = student.shape[:2]
    expected = (student.shape, (rows, seq, teacher.shape[-1]), (rows, seq), (rows, seq), (rows, seq), student.shape)
    names = ("student", "teacher", "key_mask", "row_weight", "divergence", "grad")
    for name, shape, tensor in zip(names, expected, (student, teacher, key_mask, row_weight, divergence, grad)):
        if tensor is None:
            continue
        if tensor.shape != shape or tensor.dtype != torch.float32 or tensor.device.type != "cpu":
            dtype = str(tensor.dtype).removeprefix("torch.")
            raise RuntimeError(
                f"{name} reached the native relation kernel as {list(tensor.shape)} {dtype} on {tensor.device}, "
                f"not {list(shape)} float32 on cpu"
            )
        if not tensor.is_contiguous():
            raise RuntimeError(f"{name} reached the native relation kernel with strides {tensor.stride()}")


def _run(student, teacher, key_mask, row_weight, divergence, grad) -> None:
    rows, seq, student_width = student.shape
    teacher_width = teacher.shape[-1]
    _check_layout(student, teacher, key_mask, row_weight, divergence, grad)
    library = load_native_library()
    pointers = [_address(t) for t in (student, teacher, key_mask, row_weight, divergence, grad)]

    def heads(first: int, last: int) -> int:
        return library.relation_kl(first, last, seq, student_width, teacher_width, *pointers)

    workers = max(1, min(torch.get_num_threads(), rows))
    bounds = [rows * part // workers for part in range(workers + 1)]
    if workers == 1:
        codes = [heads(0, rows)]
    else:
        codes = list(_threads(workers).map(heads, bounds[:-1], bounds[1:]))
    if any(codes):
        raise MemoryError("the native relation kernel could not allocate its scratch rows")


class _NativeRelationKL(torch.autograd.Function):
    @staticmethod
    def forward(ctx, student_heads, teacher_heads, key_mask, row_weight):
        divergence = student_heads.new_empty(student_heads.shape[:2])
        grad = torch.zeros_like(student_heads) if ctx.needs_input_grad[0] else None
        _run(student_heads, teacher_heads, key_mask, row_weight, divergence, grad)
        ctx.save_for_backward(grad)
        return (divergence * row_weight).sum()

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_output):
        (grad,) = ctx.saved_tensors
        return grad * grad_output, None, None, None


def native_relation_kl(
    student_heads: torch.Tensor, teacher_heads: torch.Tensor, key_mask: torch.Tensor, row_weight: torch.Tensor
) -> torch.Tensor:
    """``Σ_i w_i KL_i`` over every relation row ``i`` (see ``relation_kernels.relation_kl``); CPU, float32.

    Checks its inputs itself (the same ``ValueError`` as ``relation_kl``): it may be called directly, and the C loop
    would read past the end of a shorter tensor. Strided inputs are copied into contiguous ones; the key mask becomes
    0/1 floats, so that a key counts as real when its mask is nonzero, as in ``eager``."""
    check_relation_inputs(student_heads, teacher_heads, key_mask, row_weight)
    if student_heads.device.type != "cpu":
        raise ValueError(
            f"The native relation kernel runs on CPU tensors only, got {student_heads.device.type}; use 'eager'."
        )
    teacher = teacher_heads.detach().contiguous()
    mask = key_mask.detach().ne(0).to(torch.float32)
    weight = row_weight.detach().contiguous()
    return _NativeRelationKL.apply(student_heads.contiguous(), teacher, mask, weight)
