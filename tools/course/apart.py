"""Each exercise's check run in a process the learner's code never ran in: the verdict the grader keeps.

nbgrader runs a submission top to bottom in one kernel, checks included, so everything the learner's code can reach
there (an alias of a module, `__main__`, an IPython magic, an input transformer, `sys.settrace`) can reach a check.
Here the two are kept apart by design, not by reading the code:

- the *answers* process runs the rebuilt submission (the release's locked cells and the learner's answer cells, in
  order, check cells left out) in an IPython shell with the grading guard (grading_guard.py), then answers requests;
- the *checks* process runs the instructor's version (tools/course/assignments.py's source notebook, hidden tests
  included): its locked cells and its check cells, never an answer cell. Where the release has an answer cell, each
  name its stub defines is bound to what the answers process holds under that name: a value (tensors, numbers,
  strings and lists, tuples or dicts of them) is copied across; a function becomes a stand-in whose calls are run
  by the answers process, their arguments sent and their result copied back.

What comes back is read with `torch.load(weights_only=True)`, which builds tensors and Python's plain containers and
nothing else: no code of the learner's runs in the checks process, and an object that pretends to be a right answer
(a tensor subclass whose comparisons always hold, a list whose `__eq__` says yes) cannot be read at all. The
refusals a check asks for (`tfm.check.without`: the exercise's `tfm` function or the chapter's reference object
made unavailable) are sent with the call and applied where the learner's function runs.

Some checks cannot work on copies: they hand the learner's function a model whose gradients or weights it must
change in place, or read back a module it returns, or instantiate the learner's class. Those exercises are listed in
`IN_KERNEL` (found by `python -m tools.course.apart --survey`, which grades the instructor's version of every
chapter apart: an exercise whose right answer fails apart is one of them), and their verdict stays nbgrader's alone,
guarded by the rebuild and tools/course/tampering.py's reading. The course kit says which they are.

Usage (the grader calls `verdicts`):  python -m tools.course.apart --survey [chapters/NN_*.ipynb ...]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import nbformat

from tools.course.fresh_inputs import hidden_tests

ROOT = Path(__file__).resolve().parents[2]
GUARD = Path(__file__).with_name("grading_guard.py")
SURVEY = Path(__file__).with_name("in_kernel.json")
CHECK_ID_SUFFIXES = ("-check-", "-answer-")
# the children import this module by its name (run as __main__, pickles would name IPython's __main__ instead)
CHILD = [sys.executable, "-c", "import sys; from tools.course.apart import main; sys.exit(main())"]
READY_TIMEOUT_PER_CELL = 60  # seconds an answers process may take per cell before the checks give up on it


def in_kernel() -> dict[str, str]:
    """Exercise label -> why its check runs in nbgrader's kernel only (the survey's record)."""
    return json.loads(SURVEY.read_text(encoding="utf-8")) if SURVEY.exists() else {}


# ---- messages: an 8-byte length, then the bytes ------------------------------------------------------------------

def _send(fd: int, payload: bytes) -> None:
    data = struct.pack("<Q", len(payload)) + payload
    while data:
        data = data[os.write(fd, data):]


def _receive(fd: int, timeout: float | None = None) -> bytes:
    def exactly(n: int) -> bytes:
        chunks, left = [], n
        while left:
            if timeout is not None and not select.select([fd], [], [], timeout)[0]:
                raise TimeoutError(f"no answer within {timeout:.0f} s")
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                raise EOFError("the answers process ended")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    return exactly(struct.unpack("<Q", exactly(8))[0])


def _dump(obj: object) -> bytes:
    import torch

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def _load(payload: bytes) -> object:
    """Tensors, NumPy arrays and numbers, and plain containers only (torch's weights_only unpickler): never the
    learner's classes or code."""
    import numpy as np
    import torch

    core = getattr(np, "_core", None) or np.core  # NumPy 2, NumPy 1
    numpy = [core.multiarray._reconstruct, core.multiarray.scalar, np.ndarray, np.dtype,
             *{type(np.dtype(t)) for t in (np.float64, np.float32, np.float16, np.int64, np.int32, np.int16, np.int8,
                                           np.uint8, np.bool_, np.complex128, np.complex64)}]
    # a sparse tensor's indices are checked as it is built (one out of range would read outside its memory)
    with torch.serialization.safe_globals(numpy), torch.sparse.check_sparse_tensor_invariants():
        return torch.load(io.BytesIO(payload), weights_only=True)


# ---- the answers process -----------------------------------------------------------------------------------------

class LearnerName:
    """A learner's object named in a call's arguments (one answer handed to another: merge_heads(split_heads(x)))."""

    def __init__(self, name: str):
        self.name = name

    def __reduce__(self):
        return _learners_object, (self.name,)


_NAMESPACE: dict = {}  # in the answers process: the shell's namespace
_WITHOUT = None  # in the answers process: tfm.check.without


def _learners_object(name: str) -> object:
    return _NAMESPACE[name]


def _resolve(spec: tuple) -> object:
    """A refused object from its description (_describe): a PyTorch operation's name, a module's attribute, or a
    name of the notebook."""
    kind, *rest = spec
    if kind == "op":
        return rest[0]
    if kind == "main":
        return _NAMESPACE[rest[0]]
    module, qualname = rest
    obj = __import__(module, fromlist=["_"])
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _on_alarm(signum, frame):
    raise TimeoutError("this cell ran longer than the grader allows")


def serve(notebook: Path, requests: int, replies: int, timeout: int) -> None:
    """Run the rebuilt submission's locked and answer cells, then answer the checks' requests until they end."""
    from IPython.core.interactiveshell import InteractiveShell

    import tfm

    global _WITHOUT
    _WITHOUT = tfm.check.without  # taken before any learner's code runs: rebinding tfm.check.without changes nothing
    shell = InteractiveShell.instance()
    shell.run_cell(GUARD.read_text(encoding="utf-8"))  # the same refusals as in nbgrader's kernel
    signal.signal(signal.SIGALRM, _on_alarm)
    for cell in nbformat.read(notebook, as_version=4).cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or (meta.get("grade") and not meta.get("solution")):
            continue  # a check cell: the checks process runs the instructor's
        signal.alarm(timeout)
        with contextlib.suppress(BaseException):
            shell.run_cell(cell.source)
        signal.alarm(0)
    global _NAMESPACE
    _NAMESPACE = shell.user_ns
    _send(replies, _dump(("ready",)))
    while True:
        try:
            request = pickle.loads(_receive(requests))  # from the checks process: the instructor's code
        except EOFError:
            return
        _send(replies, _answer(request, timeout))


def _answer(request: tuple, timeout: int) -> bytes:
    import tfm

    kind, name, *rest = request
    if name not in _NAMESPACE:
        return _dump(("missing",))
    obj = _NAMESPACE[name]
    if kind == "get":
        if isinstance(obj, type):
            return _dump(("class",))
        if callable(obj):
            return _dump(("function",))
        try:
            return _dump(("value", obj))
        except Exception as error:  # not even picklable
            return _dump(("error", "TypeError", f"cannot be copied to the grader ({error})"))
    args, kwargs, refused = rest
    try:
        signal.alarm(timeout)
        with _WITHOUT(obj, *[_resolve(s) for s in refused], name=name) if refused else \
                contextlib.nullcontext():
            result = obj(*args, **kwargs)
        signal.alarm(0)
        return _dump(("value", result))
    except BaseException as error:  # noqa: BLE001 (whatever the learner's code raised is reported, not obeyed)
        signal.alarm(0)
        if isinstance(error, tfm.check.CheckFailed):
            return _dump(("refused", str(error)))
        try:
            return _dump(("error", type(error).__name__, str(error)[:2000]))
        except Exception:
            return _dump(("error", "Exception", "an error that cannot be reported"))


# ---- the checks process ------------------------------------------------------------------------------------------

class Unreadable(Exception):
    """The learner's object cannot be copied to the checks process, or a check needs what a copy cannot give."""


def _error_class(name: str) -> type:
    builtin = {"NotImplementedError": NotImplementedError, "NameError": NameError}.get(name)
    return builtin or type(name if name.isidentifier() else "LearnerError", (Exception,), {})


class Remote:
    """The learner's function, run in the answers process: its arguments go there, its result comes back."""

    def __init__(self, link: Link, name: str):
        self._link, self.__name__, self.__qualname__ = link, name, name
        self.refused: list[tuple] = []

    def __call__(self, *args, **kwargs):
        self._link.calls.append((self.__name__, args, kwargs, list(self.refused)))  # for the hidden tests
        return self._link.ask(("call", self.__name__, args, kwargs, self.refused))

    def __reduce__(self):
        return _learners_object, (self.__name__,)

    def __repr__(self) -> str:
        return f"<the learner's {self.__name__}>"


class Unread:
    """What the checks see of a learner's value that cannot be read apart (an Ellipsis, an object of their own)."""

    def __init__(self, why: str):
        self.why = why

    def __repr__(self) -> str:
        return f"<{self.why}>"


class Link:
    def __init__(self, requests: int, replies: int, timeout: int):
        self.requests, self.replies, self.timeout, self.dead = requests, replies, timeout, ""
        self.calls: list[tuple] = []  # the calls of the check now running

    def ask(self, request: tuple) -> object:
        import tfm

        if self.dead:
            raise TimeoutError(self.dead)
        try:
            payload = pickle.dumps(request)
        except Exception as error:
            raise Unreadable(f"the check's arguments cannot be sent apart ({error})") from None
        _send(self.requests, payload)
        try:
            reply = _receive(self.replies, self.timeout + 30)
        except (TimeoutError, EOFError) as error:
            self.dead = f"the answers process stopped answering ({error})"
            raise TimeoutError(self.dead) from None
        try:
            kind, *rest = _load(reply)
        except Exception:
            raise tfm.check.CheckFailed(
                f"{request[1]} gave an object the grader cannot read: return tensors, numbers, strings, or lists, "
                "tuples and dicts of them") from None
        if kind == "value":
            return rest[0]
        if kind == "refused":
            raise tfm.check.CheckFailed(str(rest[0]))
        if kind == "error":
            raise _error_class(str(rest[0]))(str(rest[1]))
        if kind == "missing":
            raise NameError(f"name {request[1]!r} is not defined")
        return kind  # "function" or "class", for get


def _describe(obj: object, namespace: dict) -> tuple:
    """How the answers process finds a refused object (see _resolve): by its module and name where it has one
    there, else by its name in the notebook (the chapter's reference layers)."""
    if isinstance(obj, str):
        return ("op", obj)
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if module and qualname and module != "__main__":
        with contextlib.suppress(Exception):
            if _resolve(("qual", module, qualname)) is obj:
                return ("qual", module, qualname)
    for key, value in namespace.items():
        if value is obj and not key.startswith("_"):
            return ("main", key)
    raise Unreadable(f"the refused {type(obj).__name__} cannot be named to the answers process")


def _stub_names(source: str) -> set[str]:
    from tools.course.tampering import _parse, bound_names

    tree = _parse(source)
    return bound_names(tree) if tree is not None else set()


def _label(grade_id: str) -> str:
    for suffix in CHECK_ID_SUFFIXES:
        if suffix in grade_id:
            return grade_id.rsplit(suffix, 1)[0]
    return grade_id


def run_checks(source: Path, release: Path, requests: int, replies: int, verdict: Path, timeout: int) -> None:
    """The instructor's locked and check cells, with the learner's names bound to the answers process."""
    from IPython.core.interactiveshell import InteractiveShell

    import tfm

    link = Link(requests, replies, timeout * 4)
    shell = InteractiveShell.instance()
    shell.ast_node_interactivity = "none"
    original = tfm.check.without

    @contextlib.contextmanager
    def without(fn, *answers, name=None):
        if isinstance(fn, Remote):  # refused where the learner's function runs
            fn.refused = [_describe(a, shell.user_ns) for a in answers]
            try:
                yield
            finally:
                fn.refused = []
        else:
            with original(fn, *answers, name=name):
                yield

    tfm.check.without = without
    stubs = {c.metadata["nbgrader"]["grade_id"]: c.source for c in nbformat.read(release, as_version=4).cells
             if c.metadata.get("nbgrader", {}).get("solution")}
    try:
        kind, *_ = _load(_receive(replies, READY_TIMEOUT_PER_CELL * max(1, len(stubs)) + 120))
    except (TimeoutError, EOFError) as error:
        link.dead = f"the answers never finished running ({error})"
    results: dict[str, str] = {}
    solutions: dict[str, list[str]] = {}  # exercise label -> the source version's answer cells (the solution)
    for cell in nbformat.read(source, as_version=4).cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code":
            continue
        if meta.get("solution"):  # the learner's names, from the answers process
            solutions.setdefault(_label(meta["grade_id"]), []).append(cell.source)
            for name in sorted(_stub_names(stubs.get(meta["grade_id"], ""))):
                shell.user_ns.pop(name, None)
                try:
                    got = link.ask(("get", name))
                except (NameError, TimeoutError):
                    continue
                except tfm.check.CheckFailed as error:  # a value the grader cannot read: the check sees so
                    got = Unread(str(error))
                kind = got if isinstance(got, str) else ""  # (a NumPy array compared with a string gives an array)
                shell.user_ns[name] = Remote(link, name) if kind in ("function", "class") else got
                if kind == "class":
                    results.setdefault(_label(meta["grade_id"]), "a class cannot be checked apart")
            continue
        link.calls = []
        outcome = shell.run_cell(cell.source)
        if meta.get("grade"):
            label = _label(meta["grade_id"])
            error = outcome.error_in_exec or outcome.error_before_exec
            if error is not None and label not in results:
                results[label] = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
            if label not in results and link.calls:
                results[label] = hidden_tests(link.calls, _solutions(solutions.get(label, []), shell.user_ns),
                                              link.ask)
            results.setdefault(label, "")
    verdict.write_text(json.dumps(results, indent=1), encoding="utf-8")


def _solutions(sources: list[str], namespace: dict) -> dict:
    """The instructor's functions of one exercise: its source answer cells run in a copy of the checks' namespace."""
    own = dict(namespace)
    try:
        for source in sources:
            exec(compile(source, "<the instructor's solution>", "exec"), own)  # noqa: S102 (the instructor's code)
    except Exception:
        return {}
    return {k: v for k, v in own.items() if callable(v) and not isinstance(v, Remote) and v is not namespace.get(k)}


# ---- the grader's side -------------------------------------------------------------------------------------------

def verdicts(source: Path, release: Path, submitted: Path, checks_folder: Path, env: dict[str, str],
             timeout: int = 180) -> dict[str, str]:
    """Exercise label -> "" where its check, run apart from the learner's code, passes, else why it failed.
    `source` and `release` are the instructor's two versions (the release's stubs name what the checks take from the
    learner, never the submission's own names); the answers run in `submitted`'s folder with `env` (the grading
    guard's environment), the checks in `checks_folder`."""
    checks_folder.mkdir(parents=True, exist_ok=True)
    requests_read, requests_write = os.pipe()
    replies_read, replies_write = os.pipe()
    verdict = checks_folder / "verdict.json"
    verdict.unlink(missing_ok=True)
    here = {**env, "PYTHONPATH": os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]), "MPLBACKEND": "Agg"}
    with open(checks_folder / "answers.log", "wb") as answers_log, open(checks_folder / "checks.log", "wb") as log:
        answers = subprocess.Popen(
            [*CHILD, "--serve", str(submitted), str(requests_read),
             str(replies_write), str(timeout)], cwd=submitted.parent, env=here, pass_fds=(requests_read,
                                                                                          replies_write),
            stdout=answers_log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        checks = subprocess.Popen(
            [*CHILD, "--check", str(source), str(release), str(requests_write),
             str(replies_read), str(verdict), str(timeout)], cwd=checks_folder,
            env={**here, "TMPDIR": str(checks_folder)}, pass_fds=(requests_write, replies_read), stdout=log,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        for fd in (requests_read, requests_write, replies_read, replies_write):
            os.close(fd)
        try:
            checks.wait(timeout=timeout * 20 + 600)
        except subprocess.TimeoutExpired:
            checks.kill()
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(answers.pid, signal.SIGKILL)
            answers.wait()
    if not verdict.exists():
        return {}
    return json.loads(verdict.read_text(encoding="utf-8"))


def survey(chapters: list[Path], course: Path) -> dict[str, str]:
    """Grade the instructor's version of each chapter apart: the exercises whose right answer fails there."""
    from tools.book.notebooks import ENVIRONMENT
    from tools.course.assignments import assignment_name, write_course

    found = {}
    for chapter in chapters:
        name = assignment_name(chapter)
        folder = course / name
        write_course(folder, [chapter], only_needed=True)
        source = folder / "source" / name / chapter.name
        started = time.perf_counter()
        release = folder / "release" / name / chapter.name
        env = {**os.environ, **ENVIRONMENT, "OMP_NUM_THREADS": "1"}
        result = verdicts(source, release, source, folder / "apart", env)
        failing = {label: why for label, why in result.items() if why}
        print(f"{chapter.name}: {len(result) - len(failing)} of {len(result)} checked apart "
              f"({time.perf_counter() - started:.0f} s); in the kernel only: {failing}", flush=True)
        found.update(failing)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve", nargs=4, metavar=("NOTEBOOK", "IN", "OUT", "TIMEOUT"), help=argparse.SUPPRESS)
    parser.add_argument("--check", nargs=6, help=argparse.SUPPRESS)
    parser.add_argument("--survey", nargs="*", type=Path, metavar="CHAPTER")
    parser.add_argument("--course", type=Path, default=ROOT / "build" / "apart-survey")
    args = parser.parse_args()
    if args.serve:
        notebook, requests, replies, timeout = args.serve
        serve(Path(notebook), int(requests), int(replies), int(timeout))
    elif args.check:
        source, release, requests, replies, verdict, timeout = args.check
        run_checks(Path(source), Path(release), int(requests), int(replies), Path(verdict), int(timeout))
    elif args.survey is not None:
        from tools.book.notebooks import notebooks

        chapters = args.survey or notebooks()
        found = {**{k: v for k, v in in_kernel().items() if not any(k.startswith(f"ch{p.name[:2]}-")
                                                                      for p in chapters)}, **survey(chapters,
                                                                                                     args.course)}
        SURVEY.write_text(json.dumps(dict(sorted(found.items())), indent=1) + "\n", encoding="utf-8")
        print(f"{len(found)} exercises checked in the kernel only, written to {SURVEY.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
