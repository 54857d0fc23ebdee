"""Who listens on a port (launchers/listeners.py), read from a fake /proc in the test's folder:
the listening socket inodes of /proc/net/tcp and tcp6, the process holding one (its fd links),
and the rule that only a holder positively seen outside the server's process group is "another
process" (anything unreadable is unknown, never someone else)."""

from __future__ import annotations

from pathlib import Path

from kvtune.launchers.listeners import Listener, listening_inodes, other_listener

HEAD = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
HEAD6 = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"


def row(local: str, state: str, inode: int) -> str:
    return f"   0: {local} 00000000:0000 {state} 00000000:00000000 00:00000000 00000000  1000  0 {inode} 1\n"


def process(proc: Path, pid: int, pgid: int, name: str | None = "srv", sockets: tuple[int, ...] = ()) -> None:
    (proc / str(pid) / "fd").mkdir(parents=True)
    (proc / str(pid) / "stat").write_text(f"{pid} ({name or '?'}) S 1 {pgid} {pgid} 0")
    if name is not None:
        (proc / str(pid) / "comm").write_text(name + "\n")
    (proc / str(pid) / "fd" / "0").symlink_to("/dev/null")
    for k, inode in enumerate(sockets, start=3):
        (proc / str(pid) / "fd" / str(k)).symlink_to(f"socket:[{inode}]")


def test_other_listener_reads_proc(tmp_path):
    """(moved from tests/unit/launchers/test_process.py) port 8080 (0x1F90) listens on inode 555."""
    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "tcp").write_text(HEAD + row("0100007F:1F90", "0A", 555))
    assert other_listener(8081, pgid=10, proc=tmp_path) is None  # nobody listens there
    assert other_listener(8080, pgid=10, proc=tmp_path) is None  # holder unseen: not "another"
    process(tmp_path, 10, 10)
    process(tmp_path, 42, 42, sockets=(555,))
    assert other_listener(8080, pgid=10, proc=tmp_path) == Listener(42, "srv")
    (tmp_path / "10" / "fd" / "4").symlink_to("socket:[555]")  # our group holds it too
    assert other_listener(8080, pgid=10, proc=tmp_path) is None


def test_listening_inodes_reads_ipv4_and_ipv6_and_only_the_listen_state(tmp_path):
    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "tcp").write_text(
        HEAD + row("0100007F:1F90", "0A", 555) + row("0100007F:1F90", "01", 556)  # 01: an established connection
    )
    (tmp_path / "net" / "tcp6").write_text(HEAD6 + row("00000000000000000000000000000000:1F90", "0A", 777))
    assert listening_inodes(8080, tmp_path) == {555, 777}
    assert listening_inodes(0x1F9, tmp_path) == set()  # 01F9 is not 1F90
    assert listening_inodes(8080, tmp_path / "missing") == set()


def test_a_holder_in_another_group_is_named_and_one_without_a_name_is_still_another(tmp_path):
    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "tcp6").write_text(HEAD6 + row("00000000000000000000000000000000:1F90", "0A", 9))
    process(tmp_path, 7, 7, name=None, sockets=(9,))  # comm unreadable
    found = other_listener(8080, pgid=10, proc=tmp_path)
    assert found == Listener(7, "?") and found.describe() == "pid 7 (?)"


def test_a_holder_whose_group_cannot_be_read_is_unknown_not_another_process(tmp_path):
    """It exited between the fd and the stat read, or its stat is unreadable: the module's rule
    says unknown is never "someone else" (this used to name it as another process)."""
    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "tcp").write_text(HEAD + row("0100007F:1F90", "0A", 5))
    process(tmp_path, 8, 8, sockets=(5,))
    assert other_listener(8080, pgid=10, proc=tmp_path) == Listener(8, "srv")  # seen: another
    (tmp_path / "8" / "stat").write_text("garbage")
    assert other_listener(8080, pgid=10, proc=tmp_path) is None
    (tmp_path / "8" / "stat").unlink()
    assert other_listener(8080, pgid=10, proc=tmp_path) is None
