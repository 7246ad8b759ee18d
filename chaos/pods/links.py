"""Cut and heal the links between regions whose brokers are pods of this machine's node.

Pods of every region sit on the node's bridge, and the node hands bridged traffic to iptables
(``net.bridge.bridge-nf-call-iptables``), so a cut is one DROP rule in the node's FORWARD path per
pair of addresses: connections that pods of one region opened to a broker of another (through
its Service or its pod address) stay open and carry nothing, as behind a local cluster's link
proxy. Only traffic into brokers is cut, as there: the configuration store and the clients on this
machine (whose traffic never crosses FORWARD) keep working. Rules match connections by their
origin and by the broker that answers (conntrack's original source and reply source), so a
Service address in between changes nothing.

Each rule names its pair of regions in a comment; healing deletes the rules of the pairs it is
asked to heal, and the chain once it is empty. A pod restarted during a cut comes back with a
new address its rules do not name. ``magnetar kube down`` removes a chain a failed run left.
"""

from __future__ import annotations

import os
import shlex
import subprocess

from chaoslib.exceptions import ActivityFailed

from magnetar.local.supervisor import ClusterState

CHAIN = "MAGNETAR-PARTITION"
#: the built-in chain the cuts hang off: pod-to-pod traffic, bridged or routed, crosses it
HOOK = "FORWARD"


def cut(state: ClusterState, regions: list[str] | None, from_regions: list[str] | None) -> list[str]:
    """Cut the links into ``regions``' brokers from ``from_regions``' pods (default: every other
    region); the links cut, as ``from->into``."""
    pairs = _pairs(state, regions, from_regions)
    _ensure_chain()
    for source, into in pairs:
        for origin in _addresses(state, source, brokers_only=False):
            for broker in _addresses(state, into, brokers_only=True):
                _iptables("-A", CHAIN, *_rule(origin, broker, _comment(source, into)))
    return [f"{source}->{into}" for source, into in pairs]


def heal(state: ClusterState, regions: list[str] | None, from_regions: list[str] | None) -> list[str]:
    """Delete the rules of the links ``cut`` made between these regions (as there); the chain
    goes with its last rule. The links healed, as ``from->into``."""
    pairs = _pairs(state, regions, from_regions)
    wanted = {_comment(source, into): f"{source}->{into}" for source, into in pairs}
    if not _chain_exists():
        return []
    healed: set[str] = set()
    rules = [shlex.split(line) for line in _iptables("-S", CHAIN).splitlines() if line.startswith("-A ")]
    # By number, from the last: iptables' listing does not always read back as the rule it names.
    for number, words in reversed(list(enumerate(rules, start=1))):
        comment = words[words.index("--comment") + 1] if "--comment" in words else None
        if comment in wanted:
            _iptables("-D", CHAIN, str(number))
            healed.add(wanted[comment])
    if not any(line.startswith("-A ") for line in _iptables("-S", CHAIN).splitlines()):
        _iptables("-D", HOOK, "-j", CHAIN)
        _iptables("-X", CHAIN)
    return sorted(healed)


Pair = tuple[str, str]


def _pairs(state: ClusterState, regions: list[str] | None, from_regions: list[str] | None) -> list[Pair]:
    known = sorted(state.regions)
    unknown = sorted((set(regions or []) | set(from_regions or [])) - set(known))
    if unknown:
        raise ActivityFailed(f"no region {', '.join(unknown)} among the pods' regions {', '.join(known)}")
    pairs = [(source, into) for into in regions or known for source in from_regions or known]
    pairs = [(source, into) for source, into in pairs if source != into]
    if not pairs:
        raise ActivityFailed(
            f"no link to cut between {', '.join(known) or 'no regions'}: partitions need two or more regions"
        )
    return pairs


def _addresses(state: ClusterState, region: str, *, brokers_only: bool) -> list[str]:
    found = [
        p.address for p in state.processes
        if p.region == region and p.address and (p.role == "broker" or not brokers_only)
    ]  # fmt: skip
    if not found:
        what = "broker pods" if brokers_only else "pods"
        raise ActivityFailed(f"no {what} with an address in region {region}: nothing to cut")
    return sorted(set(found))


def _rule(origin: str, broker: str, comment: str) -> list[str]:
    return [
        "-m", "conntrack", "--ctorigsrc", f"{origin}/32", "--ctreplsrc", f"{broker}/32",
        "-m", "comment", "--comment", comment, "-j", "DROP",
    ]  # fmt: skip


def _comment(source: str, into: str) -> str:
    return f"magnetar link {source}->{into}"


def _ensure_chain() -> None:
    if not _chain_exists():
        _iptables("-N", CHAIN)
        _iptables("-I", HOOK, "1", "-j", CHAIN)


def _chain_exists() -> bool:
    return _run("-n", "-L", CHAIN).returncode == 0


def _iptables(*args: str) -> str:
    done = _run(*args)
    if done.returncode != 0:
        raise ActivityFailed(f"iptables {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    if os.geteuid() != 0:
        raise ActivityFailed("cutting links between pods changes the node's iptables rules: run as root")
    return subprocess.run(["iptables", "-w", "5", *args], capture_output=True, text=True, timeout=30)
