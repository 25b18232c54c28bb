"""What the attack candidates saw from inside, checked the same way on CPU
(attacks.sh, tests/fixtures/attacks) and on the GPU (gpu_attacks.sh,
tests/fixtures/gpu_attacks): each attack leaves a note KIND.<pid> in
$PKB_ATTACK_DIR saying what it got (a write refused, a port unreachable).
"""
import glob
import os


class Notes:
    def __init__(self, directory):
        self.notes = {os.path.basename(p): open(p).read().strip() for p in glob.glob(directory + "/*.*")}
        self.bad = False

    def of(self, kind):
        """The notes of one kind; a rank's number after it is dropped (store0, store1: store)."""
        return [v for k, v in self.notes.items() if k.rsplit(".", 1)[0].rstrip("0123456789") == kind]

    def check(self, cond, what):
        print(("ok   " if cond else "FAIL ") + what)
        self.bad |= not cond


def check_referee_attacks(n, privileged):
    """Issue 21's attacks on the referee, which both suites run: a forged
    rank_<r>.json, verdict keys through the contestant's store and, where the
    contestant is the worker user in a network namespace of its own
    (`privileged`: pkb as root), killing, stopping or tracing its referee and
    connecting to the store's port. Their outcomes are checked by the caller."""
    forges = n.of("forge")
    n.check(bool(forges), f"a result was forged: {sorted(set(forges))}")
    stores = n.of("store")
    n.check(bool(stores) and all("store_reply" in v for v in stores), f"verdict keys written through the proxy store: {stores}")
    if not privileged:
        return
    n.check(all(v != "written" for v in forges), "as the worker user no forged result was written")
    kills, stops, nets, traces = n.of("kill"), n.of("stop"), n.of("net"), n.of("trace")
    n.check(bool(kills) and all(v != "killed" for v in kills), f"the contestant could not kill its referee: {kills}")
    n.check(bool(stops) and all(v != "stopped" for v in stops), f"the contestant could not stop its referee: {stops}")
    n.check(bool(nets) and all(v.endswith("connected 0") for v in nets), f"the contestant reached no port: {nets}")
    n.check(bool(traces) and all("attached" not in v and "mem opened" not in v for v in traces),
            f"the contestant could not trace its referee: {traces}")


def check_fd_writes(n, label):
    """The candidate that writes through every file descriptor it holds listed
    them first ("open ..."): its referee kills it once the garbage reaches the
    control channel, possibly before the writes are done."""
    fds = n.of("fds")
    n.check(bool(fds) and all(v.startswith("open ") for v in fds), f"{label} listed its fds before writing to them: {fds}")


def check_stopped_without_cpu(n, record, label):
    """A burner-thread candidate's contestants were stopped while the reference
    was timed, and used no CPU time meanwhile (the kernel's account)."""
    stops = [c["contestant"].get("stopped", {}) for c in record.get("contestants", [])]
    n.check(len(stops) > 0 and all(s.get("times", 0) > 0 for s in stops), f"{label}'s contestants were stopped: {stops}")
    n.check(all(s.get("cpu_s", 1) <= 0.05 + 0.05 * s.get("wall_s", 0) for s in stops),
            f"{label}'s burner threads used no CPU time while stopped")
