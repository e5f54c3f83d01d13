"""The connector registry maps names to connector objects and refuses unknown ones."""

from __future__ import annotations

import pytest

from engine import connector_registry as reg
from engine.errors import FeatureNotSupported


def test_register_and_lookup() -> None:
    marker = object()
    reg.register_source("unit_test_src", marker)
    reg.register_sink("unit_test_sink", marker)
    assert reg.source_connector("UNIT_TEST_SRC") is marker
    assert reg.sink_connector("unit_test_sink") is marker


def test_unknown_connector_is_not_supported() -> None:
    with pytest.raises(FeatureNotSupported, match="source connector 'nosuch'"):
        reg.source_connector("nosuch")
    with pytest.raises(FeatureNotSupported, match="sink connector 'bad name!'"):
        reg.sink_connector("bad name!")
