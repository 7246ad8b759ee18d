"""A message repeated many times passes once per interval, saying how many were held back; other
messages pass as they come."""

from __future__ import annotations

import logging

import pytest

from magnetar.common.repeated_logs import RepeatedMessages, throttle


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def logged(caplog: pytest.LogCaptureFixture) -> tuple[logging.Logger, Clock, pytest.LogCaptureFixture]:
    logger = logging.getLogger("tests.repeated")
    logger.filters.clear()
    clock = Clock()
    logger.addFilter(RepeatedMessages(10.0, clock))
    caplog.set_level(logging.INFO, logger="tests.repeated")
    return logger, clock, caplog


def test_a_repeated_message_passes_once_per_interval_with_the_count_held_back(
    logged: tuple[logging.Logger, Clock, pytest.LogCaptureFixture],
) -> None:
    logger, clock, caplog = logged
    for _ in range(40):  # five seconds of attempts, eight a second
        logger.warning("Connection dropped: %s", "Connection refused")
        clock.now += 0.125
    assert caplog.messages == ["Connection dropped: Connection refused"]
    for _ in range(48):  # six more: the one at ten seconds passes
        logger.warning("Connection dropped: %s", "Connection refused")
        clock.now += 0.125
    assert caplog.messages == [
        "Connection dropped: Connection refused",
        "Connection dropped: Connection refused (79 more like it in the last 10 s)",
    ]


def test_other_messages_pass_meanwhile_and_a_repeat_after_the_interval_passes_with_its_count(
    logged: tuple[logging.Logger, Clock, pytest.LogCaptureFixture],
) -> None:
    logger, clock, caplog = logged
    logger.info("Connecting to zk:2181")
    logger.warning("Session has expired")
    logger.info("Connecting to zk:2181")
    logger.info("Zookeeper connection established")
    clock.now += 30
    logger.info("Connecting to zk:2181")
    assert caplog.messages == [
        "Connecting to zk:2181",
        "Session has expired",
        "Zookeeper connection established",
        "Connecting to zk:2181 (1 more like it in the last 30 s)",
    ]


def test_throttling_a_logger_twice_puts_one_filter_on_it() -> None:
    logger = logging.getLogger("tests.repeated.twice")
    logger.filters.clear()
    throttle(logger)
    throttle(logger)
    assert sum(isinstance(f, RepeatedMessages) for f in logger.filters) == 1
