"""fsspec's IO loop handler: an orphaned task's connection reset at DEBUG, the rest as asyncio logs it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import pytest

from reliable_kafka.util.fsspec_loop import install_on, quiet_unretrieved_connection_resets


class _ClientConnectionResetError(ConnectionResetError):
    """Like aiohttp's: a ConnectionResetError subclass."""


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    install_on(loop)
    yield loop
    loop.close()


def _loud(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_an_unretrieved_connection_reset_is_logged_at_debug_only(
    loop: asyncio.AbstractEventLoop, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    loop.call_exception_handler(
        {"message": "Task exception was never retrieved", "exception": _ClientConnectionResetError("closing")}
    )
    assert not _loud(caplog)
    assert any("connection reset" in r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG)


@pytest.mark.parametrize(
    "context",
    [
        {"message": "Task exception was never retrieved", "exception": ValueError("a bug")},
        {"message": "Unclosed client session", "exception": ConnectionResetError("reset")},
    ],
    ids=["another-exception", "another-message"],
)
def test_anything_else_goes_to_asyncio_s_own_handler(
    loop: asyncio.AbstractEventLoop, caplog: pytest.LogCaptureFixture, context: dict[str, object]
) -> None:
    loop.call_exception_handler(context)
    (record,) = _loud(caplog)
    assert record.name == "asyncio" and record.levelno == logging.ERROR
    assert record.getMessage() == context["message"]


def test_a_handler_already_installed_is_kept() -> None:
    loop = asyncio.new_event_loop()
    try:

        def mine(_loop: asyncio.AbstractEventLoop, _context: dict[str, object]) -> None:
            pass

        loop.set_exception_handler(mine)
        install_on(loop)
        assert loop.get_exception_handler() is mine
        loop.set_exception_handler(None)
        install_on(loop)
        assert loop.get_exception_handler() is quiet_unretrieved_connection_resets
    finally:
        loop.close()
