"""Shared test set-up: make the project root importable and locate ../shared (optional)."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

# Real text for some tests; absent for users who clone the project (those tests skip).
SHARED_DATA = os.path.join(os.path.dirname(ROOT), "shared", "data")
