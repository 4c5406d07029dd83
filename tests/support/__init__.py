"""Helpers shared by more than one test module.

A test module (``test_*.py``) never imports from another test module: importing one runs its
module-level code, drags its fixtures and marks along, and ties unrelated tests together.
Anything two test modules need lives here instead (``tests/unit/test_test_spine.py`` checks).
"""
