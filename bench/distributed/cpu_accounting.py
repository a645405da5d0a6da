"""CPU seconds of a distributed release, per backend, read from /proc (Linux).

A machine of this project has 2 cores, so the wall time of N nodes + a coordinator + the client
measures the machine, not deid. What does not depend on the machine is how much CPU each
process spends: the sampler below reads utime + stime of every backend that serves the request
(/proc/<pid>/stat, clock ticks) on the coordinator and on every node, before and after, and the
client thread's own CPU time. From those:

* total CPU of the release = coordinator + every node backend + the client;
* protocol waits = the time in which no tracked process was running or runnable (state R):
  round trips, fsync, lock waits -- what a machine with more cores would not take away;
* projected wall time on a machine with a core per node = the slowest node's CPU + the
  coordinator's CPU + the protocol's waits (nodes work at once; the coordinator's phases and
  the waits are on the critical path).

The backends are found without asking the servers (a query every few milliseconds would be
CPU on the nodes): the children of each member's postmaster whose command line names the
benchmark's database, or that are parallel workers, minus the watcher connections. A child that
lives shorter than a rescan (a parallel worker of a node's read) is never seen; its CPU is not
lost: the postmaster reaps it, and the kernel adds a reaped child's CPU to its parent's cutime +
cstime. So each member also counts the growth of its postmaster's cutime + cstime during the
request, less what the tracked backends that ended in it had spent (counted already) -- the
CPU of every child that ended while the request ran (an autovacuum worker too: a node pays
for that as well).
"""
import os
import threading
import time

TICK = os.sysconf("SC_CLK_TCK")


def stat(pid):
    """(state, cpu seconds) of a process, or None once it is gone. The fields after the command
    name (which may hold spaces and parentheses) start after the last ')'."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return rest[0], (int(rest[11]) + int(rest[12])) / TICK


def reaped(pid):
    """CPU seconds of the children a process has waited for (cutime + cstime), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(rest[13]) + int(rest[14])) / TICK


def parent(pid):
    s = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(s[1])


def children(ppid):
    """The pids whose parent is ppid (one pass over /proc)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if parent(int(d)) == ppid:
                    out.append(int(d))
            except (OSError, IndexError, ValueError):
                continue
    return out


def serves(pid, db):
    """A backend of database db, or a parallel worker (it works for one)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    return cmd.startswith("postgres: ") and (f" {db} " in cmd or "parallel worker" in cmd)


class Sampler:
    """Samples the backends of `members` ({name: postmaster pid}) every `interval` seconds
    between start() and stop(); `exclude` are pids not to count (the watchers)."""

    def __init__(self, members, db, exclude=(), interval=0.01, rescan=0.2):
        self.members, self.db, self.exclude = members, db, set(exclude)
        self.interval, self.rescan = interval, rescan
        self.first, self.last, self.owner = {}, {}, {}
        self.waits, self._stop, self.started = 0.0, threading.Event(), False
        self.reaped0, self.reaped1, self.gone = {}, {}, set()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _scan(self):
        for name, pm in self.members.items():
            for pid in children(pm):
                if pid not in self.owner and pid not in self.exclude and serves(pid, self.db):
                    self.owner[pid] = name
                    if self.started:        # born during the request: all its CPU is the request's
                        self.first[pid] = 0.0

    def _sample(self):
        running = False
        for pid in list(self.owner):
            s = stat(pid)
            if s is None:
                self.gone.add(pid)
                continue
            state, cpu = s
            self.first.setdefault(pid, cpu)
            self.last[pid] = cpu
            running = running or state == "R"
        return running

    def start(self):
        self.reaped0 = {name: reaped(pm) or 0.0 for name, pm in self.members.items()}
        self._scan()
        self._sample()              # the CPU a backend already had before the request
        self.started = True
        self.t0 = time.perf_counter()
        self._thread.start()

    def _run(self):
        next_scan = time.perf_counter() + self.rescan
        prev = time.perf_counter()
        while not self._stop.is_set():
            time.sleep(self.interval)
            now = time.perf_counter()
            if now >= next_scan:
                self._scan()
                next_scan = now + self.rescan
            if not self._sample():
                self.waits += now - prev
            prev = now

    def stop(self):
        self._stop.set()
        self._thread.join()
        self._scan()
        self._sample()
        self.wall = time.perf_counter() - self.t0
        self.reaped1 = {name: reaped(pm) or 0.0 for name, pm in self.members.items()}

    def cpu_by_member(self):
        """{member: CPU seconds its backends spent during the sampled window}, the children
        that ended unseen included (unseen_by_member)."""
        out = {name: 0.0 for name in self.members}
        for pid, name in self.owner.items():
            out[name] += self.last.get(pid, 0.0) - self.first.get(pid, 0.0)
        for name, s in self.unseen_by_member().items():
            out[name] += s
        return out

    def unseen_by_member(self):
        """{member: CPU seconds of its postmaster's children that ended during the window and
        were not tracked}: the growth of the postmaster's reaped CPU less the whole CPU of the
        tracked backends that ended (their last sample; the kernel adds a child's whole CPU
        at its end). Clipped at 0 (a child reaped a tick after the window's end)."""
        out = {}
        for name in self.members:
            grown = self.reaped1.get(name, 0.0) - self.reaped0.get(name, 0.0)
            ended = sum(self.last.get(p, 0.0) for p in self.gone if self.owner.get(p) == name)
            out[name] = max(0.0, grown - ended)
        return out


def postmaster_of(conn):
    """The postmaster pid of a server this process reaches over a local socket."""
    return parent(conn.info.backend_pid)


def summary(cpu, client_cpu, waits, wall):
    """The accounting of one release: {member: CPU s} of the coordinator ('coord') and the nodes,
    the client's CPU, the waits and the wall time -> totals and the projection."""
    nodes = {m: s for m, s in cpu.items() if m != "coord"}
    slowest = max(nodes.values(), default=0.0)
    return {"cpu": {m: round(s, 3) for m, s in cpu.items()}, "client_cpu": round(client_cpu, 3),
            "cpu_total": round(sum(cpu.values()) + client_cpu, 3),
            "cpu_slowest_node": round(slowest, 3), "cpu_coord": round(cpu.get("coord", 0.0), 3),
            "waits": round(waits, 3), "wall": round(wall, 3),
            "projected_wall": round(slowest + cpu.get("coord", 0.0) + waits, 3)}


def fit(points, min_fixed=None):
    """The cost model of docs/sharding.md fitted to measured (nodes, accounting) pairs of one
    method at one size R: the slowest node's CPU = a / N + b (its share of the rows plus a fixed
    part), the coordinator's CPU = c + d * N, the waits = e + f * log2(N) (PL/Proxy sends a
    phase to every node at once and waits for the last: the waits grow with the slowest of N
    round trips, not their sum); least squares, each coefficient clipped at 0. `min_fixed`:
    a floor of b measured apart (a node's CPU for a request on a source of next to no rows) --
    from 1, 2 and 4 nodes alone b is the difference of two large noisy numbers and may come
    out below what a node pays for nothing; then b is that floor and only a is fitted.
    Returns the coefficients and a function projecting the wall time (one core per node) for
    any N."""
    import numpy as np
    ns = np.array([n for n, _ in points], float)

    def line(xs, ys):
        coef, *_ = np.linalg.lstsq(np.column_stack([xs, np.ones_like(xs)]), np.array(ys, float),
                                   rcond=None)
        return [max(0.0, float(c)) for c in coef]

    slowest = np.array([p["cpu_slowest_node"] for _, p in points], float)
    a, b = line(1 / ns, slowest)
    if min_fixed is not None and b < min_fixed:
        b = float(min_fixed)
        a = max(0.0, float(np.dot(1 / ns, slowest - b) / np.dot(1 / ns, 1 / ns)))
    d, c = line(ns, [p["cpu_coord"] for _, p in points])
    f, e = line(np.log2(ns), [p["waits"] for _, p in points])
    coef = {"node_per_share": a, "node_fixed": b, "coord_fixed": c, "coord_per_node": d,
            "waits_fixed": e, "waits_per_node": f}

    def project(n):
        return a / n + b + c + d * n + e + f * np.log2(n)
    return coef, project
