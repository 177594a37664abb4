"""Shared test set-up: make the project root importable. Tests read nothing outside the repository: they use the
embedded default dataset (Python's own docs) or text they write themselves."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
