"""Kernel start-up file for grading: a submission may not delete, rename or write files outside its own folder,
read the instructor's files, start programs, end its kernel, or take more memory and CPU time than its limits.

tools/course/grade.py copies this file into the IPython start-up folder of the kernels that nbgrader starts (through
IPYTHONDIR), so it runs before the first cell of every graded notebook and never in a learner's own Jupyter. It
installs an audit hook (PEP 578): an operation that would change a file outside the notebook's working directory
and the temporary folder, or start a process, raises PermissionError in the cell that asked for it, so that cell and
its exercise fail, and the grader records the refusal (the `GRADING_REFUSED` marker in the message). `os._exit`,
`os.abort` and `os.kill` of the kernel itself raise too: a submission that tries to end its kernel loses that
exercise, not the rest of its notebook. Reading a file under the folders named in GRADING_PRIVATE (the course
folder, with the instructor's version and its hidden tests, and the repository) is refused too, except the
submission's own folder, the temporary folder and the Python installation (`tfm` and its data among them). The
kernel's address space is limited to GRADING_MEMORY_GIB (default 8) and its CPU time to GRADING_CPU_SECONDS
(default 1800): an allocation beyond the first fails in the cell that asked for it, the second ends the kernel
(and grade.py regrades without the answer that did it). Both limits are hard: the submission cannot raise them.
The notebook's own code may not start a thread, and nothing may while a check runs the learner's function (the
refusals of tfm.check.without hold in the thread that runs it only); a thread a library started before, in a pool
the learner's code hands work to, is beyond this hook (tampering.py refuses `threading` and `concurrent`). No code
may open a folder outside the submission's and its temporary one, or a relative path that climbs
(`..`): so `os.open(name, dir_fd=fd)` cannot reach a file the path check would refuse. Creating folders outside the
submission's is refused like any other change, signalling by process descriptor (`signal.pidfd_send_signal`) like
`os.kill`, and so are the same functions by other names (`posix.kill`, `posix._exit`, `_posixsubprocess.fork_exec`),
links, and SQLite databases outside the submission's folder (SQLite opens its files itself). This guards against
accidents and careless code in a classroom, and against what Python code can do;
native code (ctypes, an extension) gets around any audit hook: grade untrusted work in a container.

Two settings make nbgrader score what the book's checks say: nbgrader reads a number that a test cell displays as
partial credit (a check that returns a rate would earn that fraction) and any text on stderr as a failure (a passing
check that triggers a library's warning would earn 0). So in the grading kernel no cell displays its last value, and
warnings are printed to stdout.
"""

import _posixsubprocess
import _thread
import importlib
import importlib.util
import os
import posix
import re
import resource
import sys
import tempfile
import threading
import warnings

GRADING_REFUSED = "refused while grading"
_CELL_FILE = re.compile(r"[/\\]ipykernel_\d+[/\\]")  # ipykernel's cells: <tmp>/ipykernel_<pid>/<hash>.py
_ALLOWED = tuple(os.path.realpath(p) + os.sep for p in (os.getcwd(), tempfile.gettempdir()))
_CHANGES = {"os.remove", "os.rmdir", "os.rename", "os.truncate", "shutil.rmtree", "os.chmod", "os.chown",
            "os.link", "os.symlink", "shutil.move", "os.mkdir"}
_PROCESSES = {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
              "pty.spawn"}
_PRIVATE = tuple(os.path.realpath(p) + os.sep for p in os.environ.get("GRADING_PRIVATE", "").split(os.pathsep) if p)
_TFM = importlib.util.find_spec("tfm")  # found, not imported: its folder, for an editable install in the repository
_READABLE = _ALLOWED + tuple(os.path.realpath(p) + os.sep for p in (
    sys.prefix, sys.base_prefix, os.environ.get("IPYTHONDIR", os.devnull),
    *((_TFM.submodule_search_locations or []) if _TFM else [])))
_WRITE_MODES = ("w", "a", "x", "+")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def _inside(path) -> bool:
    if isinstance(path, int):  # a file descriptor
        return True
    real = os.path.realpath(os.fsdecode(path)) + os.sep
    return real.startswith(_ALLOWED)


def _writes(mode, flags) -> bool:
    if isinstance(mode, str):  # open(path, mode)
        return any(m in mode for m in _WRITE_MODES)
    return bool(flags & _WRITE_FLAGS)  # os.open(path, flags)


def _started_in_a_cell() -> bool:
    """Whether the thread about to start is the notebook's own: the code that asked for it (`threading` aside) was
    compiled from a cell (`<ipython-input-…>`, or ipykernel's `…/ipykernel_<pid>/<hash>.py`), a function of the
    learner's included. A library that starts a thread of its own (matplotlib's font cache timer) may."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename == threading.__file__:
        frame = frame.f_back
    name = frame.f_code.co_filename if frame is not None else ""
    return name.startswith("<ipython-input-") or bool(_CELL_FILE.search(name))


def _refusing() -> bool:
    """Whether a check is running the learner's function without the library (tfm.check.without)."""
    check = sys.modules.get("tfm.check")
    return check is not None and getattr(check, "REFUSING", [0])[0] > 0


def _audit(event: str, args: tuple) -> None:
    if event in _PROCESSES:
        raise PermissionError(f"{GRADING_REFUSED}: starting a program ({event})")
    if event == "open" and args and isinstance(args[0], str | bytes | os.PathLike):
        path = os.fsdecode(args[0])
        # A relative path is resolved here against the working folder, but os.open(name, dir_fd=fd) resolves it
        # against the folder `fd` holds: so no relative path may climb (`..`), and no folder outside the
        # submission's and its temporary one may be opened at all (for its descriptor); every dir_fd then holds a
        # folder where the learner's code may write anyway, and where no link to outside can be made.
        if not os.path.isabs(path) and ".." in path.replace("\\", "/").split("/"):
            raise PermissionError(f"{GRADING_REFUSED}: opening {path}, a relative path that climbs out of its folder")
        real = os.path.realpath(path)
        if os.path.isdir(real) and not (real + os.sep).startswith(_ALLOWED):
            raise PermissionError(f"{GRADING_REFUSED}: opening the folder {path}, outside the submission's")
    if event in ("os.symlink", "os.link"):  # no answer needs one; resolved from its own folder, it can point anywhere
        raise PermissionError(f"{GRADING_REFUSED}: making a link ({event})")
    if event in ("os.kill", "os.killpg", "signal.pthread_kill"):  # whichever module the function is reached from
        raise PermissionError(f"{GRADING_REFUSED}: ending or signalling a process ({event})")
    if event == "sqlite3.connect" and args and isinstance(args[0], str | bytes | os.PathLike) \
            and os.fsdecode(args[0]) != ":memory:" and not _inside(args[0]):  # SQLite opens its files itself
        raise PermissionError(f"{GRADING_REFUSED}: opening the database {os.fsdecode(args[0])}, outside the "
                              f"submission's folder")
    if event in _CHANGES:
        paths = [a for a in args[:2] if isinstance(a, (str, bytes, os.PathLike))]
        outside = [os.fsdecode(p) for p in paths if not _inside(p)]
        if outside:
            raise PermissionError(f"{GRADING_REFUSED}: {event} on {outside[0]}, outside the submission's folder")
    elif event == "open" and len(args) == 3 and args[0] is not None and _writes(args[1], args[2]):
        if not _inside(args[0]) and os.fsdecode(args[0]) != os.devnull:  # (torch imports dill, which writes there)
            raise PermissionError(f"{GRADING_REFUSED}: writing {os.fsdecode(args[0])}, outside the submission's folder")
    elif event == "open" and args and args[0] is not None and not isinstance(args[0], int) and _PRIVATE:
        real = os.path.realpath(os.fsdecode(args[0])) + os.sep
        if real.startswith(_PRIVATE) and not real.startswith(_READABLE):
            raise PermissionError(f"{GRADING_REFUSED}: reading {os.fsdecode(args[0])}, one of the instructor's files")


def _refuse(*_args, **_kwargs):
    raise PermissionError(f"{GRADING_REFUSED}: ending or signalling the kernel")


def _warn_to_stdout(message, category, filename, lineno, file=None, line=None):
    print(warnings.formatwarning(message, category, filename, lineno, line), end="")


sys.addaudithook(_audit)
_MEMORY = int(float(os.environ.get("GRADING_MEMORY_GIB", "8")) * (1 << 30))
_CPU = int(os.environ.get("GRADING_CPU_SECONDS", "1800"))
resource.setrlimit(resource.RLIMIT_AS, (_MEMORY, _MEMORY))
resource.setrlimit(resource.RLIMIT_CPU, (_CPU, _CPU))
os._exit = os.abort = os.kill = os.killpg = _refuse
posix._exit = posix.abort = _refuse  # the same functions as os's, reached by another name: no audit event


def _refuse_programs(*_args, **_kwargs):
    raise PermissionError(f"{GRADING_REFUSED}: starting a program (_posixsubprocess.fork_exec)")


_posixsubprocess.fork_exec = _refuse_programs  # what subprocess calls after its own audit event: none of its own
for _module in map(importlib.import_module, ("signal", "_signal", "os", "posix")):  # by a process descriptor
    for _name in ("pidfd_send_signal", "pidfd_open"):
        if hasattr(_module, _name):
            setattr(_module, _name, _refuse)


def _guard_threads(start):
    """`_thread.start_new_thread`, refused for the notebook's own code and, while a check runs the learner's function
    without the library, for anyone (Python 3.11 raises no audit event for a new thread, so the function itself is
    replaced, in every module that holds it)."""
    def start_new_thread(function, args, kwargs=None, /):
        if _started_in_a_cell() or _refusing():  # it would run outside the refusals of tfm.check.without
            raise PermissionError(f"{GRADING_REFUSED}: starting a thread")
        return start(function, args) if kwargs is None else start(function, args, kwargs)
    return start_new_thread


_thread.start_new_thread = _thread.start_new = threading._start_new_thread = _guard_threads(_thread.start_new_thread)
warnings.showwarning = _warn_to_stdout
get_ipython().ast_node_interactivity = "none"  # noqa: F821 (IPython defines it in start-up files)
