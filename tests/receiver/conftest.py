"""Every thread a receiver test starts must be gone when it ends: stop joins what start began."""

from __future__ import annotations

from tests.support.threads import no_thread_outlives_its_test

__all__ = ["no_thread_outlives_its_test"]
