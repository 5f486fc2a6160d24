"""The cluster's roles as pure actors (see contract.py); actors/runtime/ holds the drivers."""
