"""Every CPU second of ``compactor compact --inline FILE --json``, whole process (issue 17,
round seventeen; the table in docs/bench-perf.md's round seventeen).

Runs the command in a child process (``PYTHONPATH=TREE``, from the tree's root; entered as
``python -m compactor`` is, through ``cli.entry``'s short exit where the tree has one) with ~40
functions of the inline path wrapped by an exclusive CPU timer each (a phase's time less that
of the wrapped phases it calls), every module import timed the same way
(``importlib._bootstrap._find_and_load``, grouped by top-level package), and each cyclic
collection timed (``gc.callbacks``) with the phase it ran in. The child's total user+system CPU
comes from ``os.wait4``; the exit is that total less the CPU at ``main``'s return. The rows add
up to the total::

    .venv/bin/python tools/cpu_account.py /tmp/s18/base /tmp/s18/small100000.jsonl
    .venv/bin/python tools/cpu_account.py . /tmp/s18/small100000.jsonl

(Wrapping costs a little: totals run ~1-3% above an unwrapped run's.)

``--faults`` (round eighteen): each phase's exclusive user and system CPU and minor page
faults instead, from ``getrusage`` (the system CPU of a big session is its page faults; at 300k
small events half of them are refaults of memory freed by an earlier phase)::

    .venv/bin/python tools/cpu_account.py /tmp/s19/base /tmp/s19/small300000.jsonl --faults
"""

import sys

_CHILD = r'''
import time
T_BOOT = time.process_time()
import sys, os, gc, importlib, json, resource, atexit
SELF = {}  # name -> [excl cpu, calls]; with --faults [excl user, sys, minor faults, calls]
STACK = []  # [name, start, child_time]
FAULTS = sys.argv[4:5] == ["--faults"]

def enter(name):
    STACK.append([name, time.process_time(), 0.0])

def leave():
    name, t0, child = STACK.pop()
    dt = time.process_time() - t0
    r = SELF.setdefault(name, [0.0, 0])
    r[0] += dt - child; r[1] += 1
    if STACK:
        STACK[-1][2] += dt

if FAULTS:
    _ru = resource.getrusage
    def _now():
        r = _ru(resource.RUSAGE_SELF)
        return (r.ru_utime, r.ru_stime, r.ru_minflt)

    def enter(name):
        STACK.append([name, _now(), [0.0, 0.0, 0]])

    def leave():
        name, t0, child = STACK.pop()
        t1 = _now()
        d = [t1[i] - t0[i] for i in range(3)]
        r = SELF.setdefault(name, [0.0, 0.0, 0, 0])
        for i in range(3):
            r[i] += d[i] - child[i]
        r[3] += 1
        if STACK:
            for i in range(3):
                STACK[-1][2][i] += d[i]

def wrap(fn, name):
    def w(*a, **k):
        enter(name)
        try:
            return fn(*a, **k)
        finally:
            leave()
    w.__wrapped__ = fn
    return w

import importlib._bootstrap as bs
_fl = bs._find_and_load
def _find_and_load(name, imp):
    enter("py-import:" + name.split(".")[0] if not name.startswith("compactor") else "py-import:compactor")
    try:
        return _fl(name, imp)
    finally:
        leave()
bs._find_and_load = _find_and_load

GC = [0.0, 0, 0]
GCW = {}
_gct = [0.0]
def gccb(phase, info):
    if phase == "start":
        _gct[0] = time.process_time()
    else:
        dt = time.process_time() - _gct[0]
        GC[0] += dt; GC[1] += 1; GC[2] += info.get("collected", 0)
        where = STACK[-1][0] if STACK else "-"
        g = GCW.setdefault(where + " gen%d" % info["generation"], [0.0, 0, 0])
        g[0] += dt; g[1] += 1; g[2] += info.get("collected", 0)
gc.callbacks.append(gccb)

enter("toplevel")
from compactor.cli import main as cli_main
import compactor.cli as cli
PH = [
    ("compactor.cli", "build_parser"),
    ("compactor.cli.common", "import_into"),
    ("compactor.cli.compact", "check_args"),
    ("compactor.cli.compact", "_inline_summarizer"),
    ("compactor.cli.compact", "default_target"),
    ("compactor.cli.compact", "print_outcome"),
    ("compactor.cli.config", "warn_unknown_variables"),
    ("compactor.cli", "cli_scope"),
    ("compactor.cli", "check_tenant_arg"),
    ("compactor.engine.measure", "quick_view_tokens"),
    ("compactor.engine.measure", "view_tokens"),
    ("compactor.engine.policy", "make_policy"),
    ("compactor.engine.compact", "prepare"),
    ("compactor.engine.compact", "plan"),
    ("compactor.engine.compact", "default_checkpoint_id"),
    ("compactor.engine.compact", "CoveredText"),
    ("compactor.engine.compact", "PrefixHash"),
    ("compactor.engine.compact", "HashLines"),
    ("compactor.engine.compact", "externalize_tool_results"),
    ("compactor.engine.compact", "_clear_lazily"),
    ("compactor.engine.compact", "apply_replacements"),
    ("compactor.engine.compact", "streamed_view_tokens"),
    ("compactor.engine.compact", "view_tokens"),
    ("compactor.engine.compact", "build_view"),
    ("compactor.engine.compact", "_indexed_view"),
    ("compactor.engine.compact", "safe_cut_points_both"),
    ("compactor.engine.compact", "choose_cut"),
    ("compactor.engine.compact", "summarize_range"),
    ("compactor.engine.compact", "validate"),
    ("compactor.engine.compact", "repair_candidate"),
    ("compactor.engine.compact", "realize_cleared"),
    ("compactor.engine.compact", "_result"),
    ("compactor.engine.compact", "Checkpoint"),
    ("compactor.engine.compact", "CompactionRecord"),
    ("compactor.engine.compact", "apply_layers"),
    ("compactor.engine.compact", "_compact"),
    ("compactor.engine.compact", "_keep_after"),
    ("compactor.engine.compact", "_shown_digests"),
    ("compactor.lifting.lift.Lifter", "state_at"),
    ("compactor.lifting.lift.Lifter", "__init__"),
    ("compactor.engine.candidates.Candidate", "complete_state"),
    ("compactor.engine.candidates.Candidate", "release"),
    ("compactor.engine.candidates.Picker", "pick"),
]
for mod, attr in PH:
    try:
        if mod.endswith((".Lifter", ".Candidate", ".Picker")):
            m, cls = mod.rsplit(".", 1)
            owner = getattr(importlib.import_module(m), cls)
        else:
            owner = importlib.import_module(mod)
        setattr(owner, attr, wrap(getattr(owner, attr), mod.split(".")[-1] + "." + attr))
    except (ImportError, AttributeError) as e:
        print("skip", mod, attr, e, file=sys.stderr)
leave()
SELF["toplevel(imports of the cli + this tool)"] = SELF.pop("toplevel")
T_PRE = time.process_time()
import io, contextlib
try:
    from compactor.cli import fast_exit
    fast_exit.enable()
except ImportError:
    fast_exit = None
enter("main(rest)")
rc = cli_main(["compact", "--inline", sys.argv[2], "--json", "--now", "2026-01-01T00:00:00Z"])
leave()
T_END = time.process_time()
out = {"boot": T_BOOT, "pre_main_total": T_PRE, "end_main": T_END,
       "phases": {k: [round(v[0], 3), v[1]] for k, v in sorted(SELF.items(), key=lambda kv: -kv[1][0])}
       if not FAULTS else
       {k: [round(v[0], 3), round(v[1], 3), v[2], v[3]] for k, v in sorted(SELF.items(), key=lambda kv: -(kv[1][0] + kv[1][1]))},
       "gc": GC, "gcw": GCW}
with open(sys.argv[3], "w") as f:
    json.dump(out, f, indent=1)
sys.stdout.flush()
if fast_exit is not None:
    fast_exit.leave(rc)
'''


def _parent() -> None:
    import os, sys, json, tempfile
    tree, file = sys.argv[1], os.path.abspath(sys.argv[2])
    fd_out, out = tempfile.mkstemp(suffix=".json"); os.close(fd_out)
    py = sys.executable
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    pid = os.fork()
    if pid == 0:
        os.chdir(tree)
        fd = os.open("/dev/null", os.O_WRONLY); os.dup2(fd, 1)
        os.execve(py, [py, os.path.abspath(__file__), "--child", file, out, *sys.argv[3:4]], env)
    _, st, ru = os.wait4(pid, 0)
    d = json.load(open(out))
    total = ru.ru_utime + ru.ru_stime
    print(f"total {total:.2f} (user {ru.ru_utime:.2f} sys {ru.ru_stime:.2f}, {ru.ru_minflt} minor faults) "
          f"peak {ru.ru_maxrss/1024:.0f} MB load {os.getloadavg()[0]:.2f}")
    print(f"boot {d['boot']:.3f}  end_main {d['end_main']:.3f}  teardown {total - d['end_main']:.3f}  gc {d['gc']}")
    acc = d['boot'] + (total - d['end_main'])
    if sys.argv[3:4] == ["--faults"]:
        print(f"  {'phase (exclusive)':45s} {'user':>7s} {'sys':>7s} {'faults':>8s} calls")
    for k, row in d["phases"].items():
        if len(row) == 4:  # --faults
            u, s, f, n = row
            acc += u + s
            if u + s >= 0.005: print(f"  {k:45s} {u:7.3f} {s:7.3f} {f:8d} {n}")
            continue
        v, n = row
        acc += v
        if v >= 0.005: print(f"  {k:55s} {v:7.3f} {n}")
    print("sum", round(acc, 3))
    for k, v in d["gcw"].items(): print("   gc", k, [round(v[0],3), v[1], v[2]])


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        exec(compile(_CHILD, __file__, "exec"), {"__name__": "__cpu_account__"})
    else:
        _parent()
