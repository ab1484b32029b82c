"""One way to write a moment (runs.presenters.times and the |when filter)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from runs.presenters.times import absolute, iso, moment, relative

NOW = datetime(2026, 12, 4, 3, 25, 1, 250_000, tzinfo=UTC)


@pytest.mark.parametrize(
    ("delta", "words"),
    [
        (timedelta(seconds=5), "just now"),
        (timedelta(seconds=44), "just now"),
        (timedelta(seconds=50), "1 min ago"),
        (timedelta(seconds=200), "3 min ago"),
        (timedelta(seconds=150), "3 min ago"),  # half up, as shell.js
        (timedelta(minutes=59), "59 min ago"),
        (timedelta(hours=3), "3 h ago"),
        (timedelta(hours=35), "35 h ago"),
        (timedelta(days=2), "2 days ago"),
        (timedelta(days=1, hours=13), "2 days ago"),
        (timedelta(days=29), "29 days ago"),
        (timedelta(seconds=-90), "in 2 min"),
        (timedelta(days=-3), "in 3 days"),
    ],
)
def test_relative_words(delta, words):
    assert relative(NOW - delta, NOW) == words


def test_past_thirty_days_the_date_itself():
    assert relative(NOW - timedelta(days=40), NOW) == "2026-10-25"


def test_moment_reads_datetimes_and_protocol_text():
    assert moment("2026-12-04T03:25:01.250Z") == NOW
    assert moment("2026-12-04T04:25:01.25+01:00") == NOW
    assert moment(NOW.replace(tzinfo=None)) == NOW
    assert moment("yesterday") is None and moment("") is None and moment(None) is None and moment(3) is None


def test_absolute_and_iso():
    assert absolute(NOW) == "2026-12-04 03:25:01.250 UTC"
    assert absolute(NOW.replace(microsecond=0)) == "2026-12-04 03:25:01 UTC"
    assert iso(NOW) == "2026-12-04T03:25:01.250Z"


def test_when_filter_writes_a_time_element():
    from runs.templatetags.workbench import when

    html = str(when("2026-12-04T03:25:01.250Z"))
    assert html.startswith(
        '<time datetime="2026-12-04T03:25:01.250Z" title="2026-12-04 03:25:01.250 UTC" data-rel>'
    )
    assert when("<b>not a time</b>") == "<b>not a time</b>"  # plain text: the template escapes it
    assert when(None) == ""
