"""Exactly once: the snapshot-summary protocol and the catalog commit, staging, recovery, the commit
clock.
"""
