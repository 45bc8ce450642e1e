"""Vocabulary every layer of the engine shares: changelog columns, task result rows, paths, restart
signals, hooks, events, secrets and the pyiceberg shim. Imports nothing of the engine.
"""
