"""The relation KL as one compiled C loop (``relation_kl.c``): no ``[seq, seq]`` tensor is ever written to memory.

The chunked PyTorch backend still writes and re-reads each relation score matrix about ten times (two products, two
``log_softmax``, two ``exp``, the differences, the gradient kernel and its backward GEMMs): at a batch of 16 × 128
with 32 relation heads that made the loss about a quarter of a distillation step. The C kernel computes one row's
scores, softmaxes, divergence and gradient in L1 cache and moves on, so the loss costs about what its arithmetic costs.

The loss it serves is a weighted sum ``Σ_i w_i KL_i`` whose weights are known before the forward pass (real query
tokens, averaged over relation heads), so the gradient is computed in the same pass and saved; the backward pass only
scales it by the upstream gradient (the fused-loss pattern of fused cross-entropy kernels).

The library is built once per machine with the system C compiler (``$CC``, else ``cc``/``gcc``/``clang``) into the
compact-bert cache, keyed by the source, the compiler, its flags and the CPU (``-march=native``), written atomically;
it is called through ``ctypes``, which releases the GIL, from ``torch.get_num_threads()`` threads over disjoint
relation heads. Where no compiler works, ``NativeKernelUnavailable`` says why and the caller falls back to PyTorch.

A C loop trusts the sizes it is given, so ``native_relation_kl`` checks shapes, dtypes and device
(``validation.py``) and makes every tensor contiguous float32 before a pointer leaves Python.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from .validation import check_relation_inputs

__all__ = ["NativeKernelUnavailable", "native_relation_kl", "load_native_library"]

_SOURCE = Path(__file__).with_name("relation_kl.c")
# -fno-math-errno and -fno-trapping-math change no result (no errno, no floating-point traps to preserve) but let the
# loops with comparisons and float-to-int conversions vectorise: 2.9x faster than -O3 alone on an AVX2 EPYC.
_FLAG_SETS = (
    ["-O3", "-march=native", "-fopenmp-simd", "-fno-math-errno", "-fno-trapping-math"],
    ["-O3", "-fopenmp-simd", "-fno-math-errno", "-fno-trapping-math"],
)
_COMMON_FLAGS = ["-std=c99", "-fPIC", "-shared"]


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


def _build(compiler: str, flags: list[str], target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        built = Path(scratch) / target.name
        command = [compiler, *flags, *_COMMON_FLAGS, "-o", str(built), str(_SOURCE), "-lm"]
        result = subprocess.run(command, capture_output=True, text=True, timeout=300)
        if result.returncode != 0:
            raise NativeKernelUnavailable(
                f"`{' '.join(command)}` failed: {(result.stderr or result.stdout).strip()[-2000:]}"
            )
        os.replace(built, target)  # atomic: another process sees no library or a whole one


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


def _build_and_load() -> ctypes.CDLL:
    compiler = _compiler()
    try:
        version = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as error:
        raise NativeKernelUnavailable(f"{compiler} --version failed: {error}") from None
    failures = []
    for flags in _FLAG_SETS:
        key = hashlib.sha256(
            "\n".join([_SOURCE.read_text(), compiler, version, " ".join(flags), _cpu_signature()]).encode()
        )
        target = _cache_dir() / f"relation_kl-{key.hexdigest()[:20]}{'.dll' if os.name == 'nt' else '.so'}"
        try:
            if not target.exists():
                _build(compiler, flags, target)
            library = ctypes.CDLL(str(target))
        except (NativeKernelUnavailable, OSError, subprocess.SubprocessError) as error:
            failures.append(str(error))
            continue
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
            raise RuntimeError(
                f"{name} reached the native relation kernel as {list(tensor.shape)} {str(tensor.dtype).removeprefix('torch.')} on "
                f"{tensor.device}, not {list(shape)} float32 on cpu"
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
