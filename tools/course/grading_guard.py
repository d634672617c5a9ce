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
This guards against accidents and careless code in a classroom, not against
a determined attacker (ctypes can still crash the process); grade untrusted work in a container.

Two settings make nbgrader score what the book's checks say: nbgrader reads a number that a test cell displays as
partial credit (a check that returns a rate would earn that fraction) and any text on stderr as a failure (a passing
check that triggers a library's warning would earn 0). So in the grading kernel no cell displays its last value, and
warnings are printed to stdout.
"""

import importlib.util
import os
import resource
import sys
import tempfile
import warnings

GRADING_REFUSED = "refused while grading"
_ALLOWED = tuple(os.path.realpath(p) + os.sep for p in (os.getcwd(), tempfile.gettempdir()))
_CHANGES = {"os.remove", "os.rmdir", "os.rename", "os.truncate", "shutil.rmtree", "os.chmod", "os.chown",
            "os.link", "os.symlink", "shutil.move"}
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


def _audit(event: str, args: tuple) -> None:
    if event in _PROCESSES:
        raise PermissionError(f"{GRADING_REFUSED}: starting a program ({event})")
    if event in _CHANGES:
        paths = [a for a in args[:2] if isinstance(a, (str, bytes, os.PathLike))]
        outside = [os.fsdecode(p) for p in paths if not _inside(p)]
        if outside:
            raise PermissionError(f"{GRADING_REFUSED}: {event} on {outside[0]}, outside the submission's folder")
    elif event == "open" and len(args) == 3 and args[0] is not None and _writes(args[1], args[2]):
        if not _inside(args[0]):
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
warnings.showwarning = _warn_to_stdout
get_ipython().ast_node_interactivity = "none"  # noqa: F821 (IPython defines it in start-up files)
