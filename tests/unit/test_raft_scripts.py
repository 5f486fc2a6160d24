"""Scripted tests of one KRaft voter (controller_quorum/raft.py), ported from Kafka's
KafkaRaftClientTest and KafkaRaftClientPreVoteTest (files `prevote-*`): each file of tests/unit/testdata/raft/ starts
a node and feeds it messages and time, and prints what it sent, recorded and became
(tests/datadriven.py says the format; `pytest --rewrite` rewrites the outputs).

Commands:
- `start voters=c1,c2,c3 [local=c1] [epoch=E voted=V leader=L] [log=1,1,2] [at=T] [key=value...]`:
  the node started at time T (0) from a stored election state and a log with entries of those
  epochs; other keys are RaftConfig's (`prevote=false`, `check_quorum=false`, `election_timeout_ms=...`);
- `deliver from=NODE [at=T]` and a message on the next line, a constructor of
  controller_quorum/messages.py (`VoteRequest(epoch=5, candidate='c2', ...)`);
- `tick at=T`: the node's timers at time T;
- `append at=T [records=N]`: the leader appends N records (topic records `t<offset>`);
- `shutdown at=T`: a graceful shutdown begins;
- `state`: only the node's state.

Each prints the messages sent (`send DST Message(...)`, `after-flush` when the message waits for
the election state's or log's flush), the events recorded (`emit Event(...)`), and the state:
`c1 LEADER epoch=5 leader=c1 voted=c1 log_end=3 hwm=None`.
"""

from __future__ import annotations

import random
from pathlib import Path

from actors.contract import Envelope, Output
from controller_quorum import messages
from controller_quorum.messages import LogEntry
from controller_quorum.metadata import TopicRecord
from controller_quorum.quorum_state import QUORUM_STATE_FILE, ElectionState, RaftState
from controller_quorum.raft import RaftConfig, RaftNode
from controller_quorum.raft_election import Candidate, Prospective
from controller_quorum.raft_leader import Leader
from controller_quorum.raft_resignation import Resigned
from controller_quorum.raft_log import LOG_FILE, RaftLog
from tests import datadriven
from tests.unit.raft_listener import RecordingListener

SCRIPTS = Path(__file__).parent / "testdata" / "raft"
MESSAGES = {name: getattr(messages, name) for name in dir(messages) if name[0].isupper()}
# RaftConfig's fields a script may set, and how their text reads.
CONFIG_KEYS = {name: type(default) for name, default in vars(RaftConfig()).items()}


def _value(text: str, kind: type):
    return datadriven.flag(text) if kind is bool else kind(text)


def _records(first: int, count: int) -> list[TopicRecord]:
    """Stand-ins for the metadata a log holds: topics t0, t1, ..."""
    return [TopicRecord(f"t{i}", f"id{i}") for i in range(first, first + count)]


def _stored_log(epochs: list[int]) -> bytes:
    log, out = RaftLog(), Output()
    log.append([LogEntry(i, epoch, record) for (i, epoch), record in zip(enumerate(epochs), _records(0, len(epochs)), strict=True)], out)
    return b"".join(op.data for op in out.storage)


def assert_state_objects(raft: RaftNode) -> None:
    """After every step, each state's object exists exactly in its state (raft.py's invariants)."""
    state = raft.state
    assert isinstance(raft.leader_state, Leader) == (state is RaftState.LEADER), (state, raft.leader_state)
    expected_round = {RaftState.PROSPECTIVE: Prospective, RaftState.CANDIDATE: Candidate}.get(state)
    assert (type(raft.election) if raft.election is not None else None) is expected_round, (state, raft.election)
    assert isinstance(raft.resigned, Resigned) == (state is RaftState.RESIGNED), (state, raft.resigned)


class RaftScript:
    """One node, driven by a script's commands in order."""

    def __init__(self) -> None:
        self.raft: RaftNode | None = None

    def __call__(self, case: datadriven.Case) -> str:
        out = Output()
        now = float(case.arg("at", "0"))
        if case.command == "start":
            self.raft = self._start(case, now, out)
        elif self.raft is None:
            raise datadriven.ScriptError(f"{case.where()}: expected `start` first")
        elif case.command == "deliver":
            if len(case.input) != 1:
                raise datadriven.ScriptError(f"{case.where()}: deliver: expected one message on the next line")
            payload = eval(case.input[0], {"__builtins__": {}}, MESSAGES)  # the script's own message
            self.raft.handle(Envelope(case.arg("from"), self.raft.local, payload), now, out)
        elif case.command == "tick":
            self.raft.tick(now, out)
        elif case.command == "append":
            self.raft.append(_records(self.raft.log.end_offset, int(case.arg("records", "1"))), now, out)
        elif case.command == "shutdown":
            self.raft.begin_shutdown(now, out)
        elif case.command != "state":
            raise datadriven.ScriptError(f"{case.where()}: unknown command {case.command!r}")
        assert_state_objects(self.raft)
        return "\n".join(self._printed(out))

    def _start(self, case: datadriven.Case, now: float, out: Output) -> RaftNode:
        voters = tuple(case.arg("voters").split(","))
        files = {}
        if "epoch" in case.args:
            stored = ElectionState(int(case.arg("epoch")), case.args.get("voted"), case.args.get("leader"))
            files[QUORUM_STATE_FILE] = stored.encode()
        if "log" in case.args:
            files[LOG_FILE] = _stored_log([int(e) for e in case.arg("log").split(",")])
        config = {}
        for key, text in case.args.items():
            if key in CONFIG_KEYS:
                config[key] = _value(text, CONFIG_KEYS[key])
        config.setdefault("raft_fsync", False)
        raft = RaftNode(case.arg("local", "c1"), voters, RaftConfig(**config), files, random.Random(3), RecordingListener(), out, now)
        raft.start(now, out)
        return raft

    def _printed(self, out: Output) -> list[str]:
        raft = self.raft
        lines = [f"send {e.dst} {e.payload!r}" + (" after-flush" if e.after_flush else "") for e in out.sends]
        lines += [f"emit {e!r}" for e in out.events]
        lines.append(f"{raft.local} {raft.state.name} epoch={raft.epoch} leader={raft.leader} voted={raft.quorum.voted} "
                     f"log_end={raft.log.end_offset} hwm={raft.high_watermark}")
        return lines


test_raft_script = datadriven.scripts_test(SCRIPTS, RaftScript)
