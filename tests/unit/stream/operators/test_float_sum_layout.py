"""Float sum/avg/variance state layouts: views planned now keep the NaN / Infinity /
-Infinity counts and the compensation slots; the plan of a view stored before those
slots existed (no `fsp` in its aggregate) keeps building the older, shorter group rows,
which is what its stored state holds."""

from __future__ import annotations

from engine.plan.logical import AggSpec
from engine.plan.stream_codec import _agg_dec, _agg_enc
from engine.stream.operators.agg_calls import AggCall, make_impl
from engine.types import DOUBLE


def _impl(kind: str, stored: dict[str, object]) -> object:
    spec = _agg_dec(stored)
    call = AggCall(spec.kind, spec.arg, spec.type, float_specials=spec.float_specials)
    return make_impl(call, DOUBLE)


def test_new_plans_keep_the_special_counts_and_compensations() -> None:
    for kind, slots in (("sum", 6), ("avg", 6), ("var_samp", 7), ("stddev_pop", 7)):
        stored = _agg_enc(AggSpec(kind, 0, DOUBLE))
        assert stored["fsp"] is True
        assert _impl(kind, stored).n_slots == slots  # type: ignore[attr-defined]


def test_plans_stored_before_keep_the_older_rows() -> None:
    for kind, slots in (("sum", 2), ("avg", 2), ("var_samp", 5)):
        stored = _agg_enc(AggSpec(kind, 0, DOUBLE))
        del stored["fsp"]
        assert _agg_dec(stored).float_specials is False
        assert _impl(kind, stored).n_slots == slots  # type: ignore[attr-defined]
