"""The listener the Raft node tests give a RaftNode: it applies nothing and remembers the epochs
it was told it leads."""


class RecordingListener:
    def __init__(self) -> None:
        self.led: list[int] = []

    def on_commit(self, entries, now_ms, out) -> None:
        pass

    def on_become_leader(self, epoch, now_ms, out) -> None:
        self.led.append(epoch)

    def on_lose_leadership(self, now_ms, out) -> None:
        pass
