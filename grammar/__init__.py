"""The icesql grammar (``icesql.lark``), shipped inside the wheel as the package ``icesql.grammar``.

Read it with ``icesql.syntax.parser.grammar_text()``, which also finds it in a source tree.
"""

GRAMMAR_FILE = "icesql.lark"
