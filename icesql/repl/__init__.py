"""The interactive shell (prompt-toolkit). Import ``icesql.repl.shell`` only when a prompt is
needed: the pure parts (``scan``, ``completion``, ``redact``, ``commands``, ``format``) import
no prompt-toolkit."""
