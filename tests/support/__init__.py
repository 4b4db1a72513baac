"""Helpers shared by the test rings, imported as ``support.<module>``.

``tests/conftest.py`` stays at the top, so pytest puts ``tests/`` on ``sys.path`` and every ring
(``tests/unit``, ``tests/stores``, ...) finds this package without being a package itself.
"""
