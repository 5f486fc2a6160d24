"""KRaft: Raft with Pre-Vote and Check Quorum, and the controller's metadata state machine (issue 3)."""
