"""A student's server port on loopback, reachable only by the student and by root (the hub, its proxy).

Why: every single-user server listens on ``127.0.0.1``, and Unix accounts do not separate TCP
ports, so any process of another student (one not in the kernel's sandbox, which has its own
network) could connect to it. JupyterHub's spawners cannot put a server on a Unix socket, so the
hub adds one nftables rule per server, in a table of its own: a connection over ``lo`` to that
port from a socket whose owner is neither the student nor root is reset. The rule is made before
the server starts and removed when it stops (a rule of a server that died with the hub is removed
at the student's next start, by its comment). Kernels need no rule: the hub starts them with
Jupyter's ``ipc`` transport, Unix sockets in the student's 0700 runtime directory.

nftables is Debian's packet filter (``apt install nftables``); without it, or without root, the
guard is off and the hub logs it (docs/teaching.md).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

_TIMEOUT = 30
_CHAIN = "out"


class GuardError(RuntimeError):
    """nft is missing or refused a rule."""


def nft_path() -> str | None:
    """The ``nft`` binary, from the system's directories only."""
    return shutil.which("nft", path="/usr/sbin:/sbin:/usr/bin:/bin")


def _nft(*args: str) -> str:
    nft = nft_path()
    if nft is None:
        raise GuardError("nftables (nft) is not installed (Debian: apt install nftables)")
    done = subprocess.run([nft, *args], capture_output=True, text=True, timeout=_TIMEOUT,
                          stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise GuardError(f"nft {' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done.stdout


@dataclass(frozen=True)
class LoopbackGuard:
    """The hub's nftables table (one per hub: two hubs never remove each other's rules)."""

    table: str

    def _ensure_table(self) -> None:
        _nft("add", "table", "inet", self.table)
        _nft("add", "chain", "inet", self.table, _CHAIN,
             "{ type filter hook output priority 0 ; policy accept ; }")

    def rules(self) -> dict[int, str]:
        """Handle → comment of every rule in the table's chain (empty when there is no table)."""
        try:
            listing = _nft("-a", "list", "chain", "inet", self.table, _CHAIN)
        except GuardError:
            return {}
        found = {}
        for line in listing.splitlines():
            m = re.search(r'comment "([^"]*)".*# handle (\d+)', line)
            if m:
                found[int(m.group(2))] = m.group(1)
        return found

    def allow_only(self, port: int, uid: int, who: str) -> None:
        """Connections over loopback to ``port`` from anyone but ``uid`` and root are reset;
        ``who``'s earlier rules (a server that died with its hub) are removed first."""
        self.release(who)
        self._ensure_table()
        _nft("add", "rule", "inet", self.table, _CHAIN, "oifname", "lo", "tcp", "dport", str(int(port)),
             "meta", "skuid", "!=", "{", "0,", str(int(uid)), "}", "reject", "with", "tcp", "reset",
             "comment", f'"{_comment(who)}"')

    def release(self, who: str) -> None:
        """Remove ``who``'s rules; the table goes with the last rule."""
        rules = self.rules()
        for handle, comment in rules.items():
            if comment == _comment(who):
                _nft("delete", "rule", "inet", self.table, _CHAIN, "handle", str(handle))
        if rules and not self.rules():
            _nft("delete", "table", "inet", self.table)


def _comment(who: str) -> str:
    """The rule's comment naming its student (nft comments hold no double quote)."""
    return "server of " + re.sub(r'[^A-Za-z0-9_.-]', "_", who)
