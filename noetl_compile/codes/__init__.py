"""The diagnostic catalogue by family, one module per code letter (``entry.py``: what an entry
is). ``noetl_compile/rules.py`` assembles them into the one ``RULES`` table, in family order."""
