"""A slow link makes an external client's answers later: the harness waits that much longer
(ROUND_TRIPS round trips of slow-link's delay and jitter) before it counts the client as hung,
so the harness never breaks the client first; without a slow link the margin is MARGIN_S."""

import pytest

from workloads.external import MARGIN_S, ROUND_TRIPS, ExternalClient


@pytest.mark.parametrize("options, extra_s", [
    ({}, 0.0), ({"delay_ms": 500.0}, ROUND_TRIPS * 1.0), ({"delay_ms": "300", "jitter_ms": "100"}, ROUND_TRIPS * 0.8),
    ({"delay_ms": "nan"}, 0.0), ({"delay_ms": "-5"}, 0.0), ({"delay_ms": "soon"}, 0.0),
])
def test_the_hang_margin_grows_with_the_slow_links_delay(options, extra_s):
    c = ExternalClient({"command": "python3 client.py", **options})
    assert c.margin == pytest.approx(MARGIN_S + extra_s)
