"""A test that configures memoryd's logging leaves structlog as it found it (conftest's
`structlog_restored`): the configuration turns on cache_logger_on_first_use, and a module's
logger first used under it kept that configuration's processors for good, out of a later
test's `capture_logs` reach once another configuration replaced them. Whether a capture saw
its lines depended on which tests ran before it (8bb5580 worked round one such test). The
tests below run in this order (file order: CI's, and `-p no:randomly`'s)."""

from __future__ import annotations

import io

import structlog
from structlog.testing import capture_logs

from memoryd.daemon.logging import configure

# A module-level logger, as every memoryd module has.
log = structlog.get_logger("tests.log_config_isolation")


def test_a_module_logger_used_under_two_configurations() -> None:
    configure(stream=io.StringIO())
    log.info("cached with this configuration's processors")
    configure(stream=io.StringIO())  # as the logging tests end: another list


def test_the_next_tests_capture_sees_a_module_loggers_lines() -> None:
    assert structlog.get_config()["cache_logger_on_first_use"] is False
    with capture_logs() as logs:
        log.warning("seen")
    assert [entry["event"] for entry in logs] == ["seen"]
