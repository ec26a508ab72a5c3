"""Code the tests share: helpers, fixtures and worker scripts, imported as `support.NAME`.

Test modules import from here and never from each other (`tests/test_suite_rules.py` checks it).
"""
