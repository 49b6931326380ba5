"""Test suite for notifier."""
