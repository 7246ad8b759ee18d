"""The iptables chains of a node: kubelet and kube-proxy make ``KUBE-*`` chains, the CNI portmap
plugin ``CNI-*`` ones, in both IPv4 and IPv6 tables. `up` notes the chains there before it starts;
any chain of those prefixes that appeared since is the node's, and `down` removes it with every rule
that jumps to it, in one ``iptables-restore --noflush`` per table (as kube-proxy cleans up)."""

from __future__ import annotations

import subprocess

FAMILIES = ("iptables", "ip6tables")
TABLES = ("filter", "nat", "mangle")
PREFIXES = ("KUBE-", "CNI-", "MAGNETAR-")


def _save(family: str, table: str) -> str | None:
    try:
        out = subprocess.run([f"{family}-save", "-t", table], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def tables() -> list[str]:
    """The "family:table"s that exist: with iptables' nf_tables backend a table appears when first
    used, so `down` deletes the empty tables the node brought into being."""
    present = []
    for family in FAMILIES:
        try:
            out = subprocess.run([f"{family}-save"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        present += [
            f"{family}:{line[1:].strip()}" for line in out.stdout.splitlines() if line.startswith("*")
        ]
    return sorted(present)


def remove_new_empty_tables(before: list[str]) -> list[str]:
    removed = []
    for key in tables():
        family, table = key.split(":")
        if key in before or table not in TABLES or not _nf_tables(family):
            continue
        dump = _save(family, table) or ""
        # Only built-in chains (policy ACCEPT, no rules) left: nothing of anyone else's is in it.
        if any(line.startswith("-A ") for line in dump.splitlines()) or any(
            line.startswith(":") and line.split()[1] == "-" for line in dump.splitlines()
        ):
            continue
        nft_family = "ip" if family == "iptables" else "ip6"
        out = subprocess.run(["nft", "delete", "table", nft_family, table], capture_output=True, text=True)
        if out.returncode == 0:
            removed.append(f"{family} table {table}")
    return removed


def _nf_tables(family: str) -> bool:
    out = subprocess.run([family, "--version"], capture_output=True, text=True)
    return "nf_tables" in out.stdout


def chains() -> dict[str, list[str]]:
    """Chains of our prefixes per "family:table"."""
    found: dict[str, list[str]] = {}
    for family in FAMILIES:
        for table in TABLES:
            dump = _save(family, table)
            if dump is None:
                continue
            names = [line[1:].split()[0] for line in dump.splitlines() if line.startswith(":")]
            found[f"{family}:{table}"] = sorted(n for n in names if n.startswith(PREFIXES))
    return found


def new_chains(before: dict[str, list[str]]) -> dict[str, list[str]]:
    made = {}
    for key, names in chains().items():
        new = [n for n in names if n not in set(before.get(key, []))]
        if new:
            made[key] = new
    return made


def remove(made: dict[str, list[str]]) -> list[str]:
    removed = []
    for key, names in made.items():
        family, table = key.split(":")
        dump = _save(family, table)
        if dump is None:
            continue
        present = {line[1:].split()[0] for line in dump.splitlines() if line.startswith(":")}
        ours = [n for n in names if n in present]
        if not ours:
            continue
        script = _cleanup_script(dump, table, set(ours))
        out = subprocess.run([f"{family}-restore", "--noflush"], input=script, capture_output=True,
                             text=True, timeout=30)  # fmt: skip
        if out.returncode != 0:
            raise RuntimeError(f"{family}-restore -t {table} failed: {out.stderr.strip()}\n{script}")
        removed += [f"{family} {table} {n}" for n in ours]
    return removed


def _cleanup_script(dump: str, table: str, ours: set[str]) -> str:
    lines = [f"*{table}"]
    # Declaring a chain in --noflush mode empties it, so its own rules need not be listed.
    lines += [f":{name} - [0:0]" for name in sorted(ours)]
    for line in dump.splitlines():
        if not line.startswith("-A "):
            continue
        words = line.split()
        chain = words[1]
        target = _target(words)
        if chain not in ours and target in ours:
            lines.append("-D " + line[3:])
    lines += [f"-X {name}" for name in sorted(ours)]
    lines.append("COMMIT")
    return "\n".join(lines) + "\n"


def _target(words: list[str]) -> str | None:
    for flag in ("-j", "-g"):
        if flag in words:
            i = words.index(flag)
            if i + 1 < len(words):
                return words[i + 1]
    return None
