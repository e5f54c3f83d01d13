"""The engine's error tree: every user-facing failure is an `EngineError` carrying a SQLSTATE.

pgwire walks `__cause__` to the first `EngineError` and turns it into an ErrorResponse
(severity, SQLSTATE, message, detail, hint, position). Anything that is not an
`EngineError` is an internal error: logged with its traceback, answered as XX000.

Message style follows PostgreSQL: the primary message is lowercase with no final period;
detail and hint are full sentences. Streaming refusals use RisingWave's wording
(`Not supported: ...` with a HINT).
"""

from __future__ import annotations

from typing import ClassVar


class EngineError(Exception):
    """Base of all errors a client may see."""

    sqlstate: ClassVar[str] = "XX000"
    severity: ClassVar[str] = "ERROR"

    def __init__(
        self,
        message: str,
        *,
        detail: str | None = None,
        hint: str | None = None,
        position: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail
        self.hint = hint
        self.position = position
        # where it happened, PostgreSQL's CONTEXT (e.g. `COPY t, line 3, column a: "x"`);
        # set by the layer that knows, after the error is raised
        self.context: str | None = None

    def __str__(self) -> str:
        return self.message


# -- syntax and naming (class 42) ---------------------------------------------------------
class SqlSyntaxError(EngineError):
    sqlstate = "42601"


class UndefinedTable(EngineError):
    sqlstate = "42P01"


class UndefinedColumn(EngineError):
    sqlstate = "42703"


class UndefinedFunction(EngineError):
    sqlstate = "42883"


class UndefinedObject(EngineError):
    sqlstate = "42704"


class UndefinedParameter(EngineError):
    sqlstate = "42P02"


class DuplicateObject(EngineError):
    sqlstate = "42710"


class DuplicateTable(EngineError):
    sqlstate = "42P07"


class DuplicateSchema(EngineError):
    sqlstate = "42P06"


class DuplicateDatabase(EngineError):
    sqlstate = "42P04"


class InvalidSchemaName(EngineError):
    sqlstate = "3F000"


class DuplicateColumn(EngineError):
    sqlstate = "42701"


class AmbiguousColumn(EngineError):
    sqlstate = "42702"


class DatatypeMismatch(EngineError):
    sqlstate = "42804"


class IndeterminateDatatype(EngineError):
    """42P18: a value whose type nothing determines (an empty `ARRAY[]` without a cast)."""

    sqlstate = "42P18"


class GroupingError(EngineError):
    sqlstate = "42803"


class WindowingError(EngineError):
    sqlstate = "42P20"


class InvalidColumnReference(EngineError):
    sqlstate = "42P10"


class WrongObjectType(EngineError):
    sqlstate = "42809"


class InsufficientPrivilege(EngineError):
    sqlstate = "42501"


class DependentObjectsStillExist(EngineError):
    sqlstate = "2BP01"


class InvalidGrantOperation(EngineError):
    sqlstate = "0LP01"


class AmbiguousFunction(EngineError):
    sqlstate = "42725"


class DuplicateFunction(EngineError):
    sqlstate = "42723"


class InvalidFunctionDefinition(EngineError):
    """A function body that cannot be compiled or lacks its entry points."""

    sqlstate = "42P13"


# -- external routines (class 38) ------------------------------------------------------------
class ExternalRoutineException(EngineError):
    """An exception raised inside a user-defined function (PostgreSQL's class 38): the
    message is the Python error's type and text, never a traceback."""

    sqlstate = "38000"


# -- data exceptions (class 22) -------------------------------------------------------------
class DataError(EngineError):
    sqlstate = "22000"


class DivisionByZero(DataError):
    sqlstate = "22012"


class NumericValueOutOfRange(DataError):
    sqlstate = "22003"


class InvalidTextRepresentation(DataError):
    sqlstate = "22P02"


class InvalidDatetimeFormat(DataError):
    sqlstate = "22007"


class DatetimeFieldOverflow(DataError):
    sqlstate = "22008"


class StringDataRightTruncation(DataError):
    sqlstate = "22001"


class InvalidParameterValue(DataError):
    sqlstate = "22023"


class NullValueNotAllowed(DataError):
    sqlstate = "22004"


class SubstringError(DataError):
    sqlstate = "22011"


class InvalidPrecedingOrFollowingSize(DataError):
    sqlstate = "22013"


class InvalidJsonText(DataError):
    sqlstate = "22032"


class IntervalFieldOverflow(DataError):
    sqlstate = "22015"


class InvalidRegularExpression(DataError):
    sqlstate = "2201B"


class InvalidArgumentForPower(DataError):
    sqlstate = "2201F"


class InvalidRowCountInLimit(DataError):
    sqlstate = "2201W"


class InvalidRowCountInOffset(DataError):
    sqlstate = "2201X"


class CharacterNotInRepertoire(DataError):
    sqlstate = "22021"


class UntranslatableCharacter(DataError):
    sqlstate = "22P05"


class NotNullViolation(EngineError):
    sqlstate = "23502"


class UniqueViolation(EngineError):
    sqlstate = "23505"


# -- features, state, resources ----------------------------------------------------------------
class FeatureNotSupported(EngineError):
    """Refusals of SQL we do not run; message starts with `Not supported: `."""

    sqlstate = "0A000"


class UnconvertibleValue(FeatureNotSupported):
    """PostgreSQL's 0A000 for one value that has no image in the target type (a numeric
    NaN or Infinity cast to an integer): a failure of that row's value, so a streaming
    job makes it NULL and reports it as it does data errors (engine.expr.nonstrict)."""


class InvalidParameterName(EngineError):
    """Unknown session variable in SET/SHOW."""

    sqlstate = "42704"


class InvalidTransactionState(EngineError):
    sqlstate = "25000"


class ReadOnlyTransaction(EngineError):
    sqlstate = "25006"


class NoActiveSqlTransaction(EngineError):
    """SAVEPOINT / DECLARE CURSOR outside a transaction block."""

    sqlstate = "25P01"


class InvalidSavepointSpecification(EngineError):
    sqlstate = "3B001"


class ObjectNotInPrerequisiteState(EngineError):
    sqlstate = "55000"


class ObjectInUse(EngineError):
    sqlstate = "55006"


class InvalidCursorName(EngineError):
    sqlstate = "34000"


class DuplicateCursor(InvalidCursorName):
    sqlstate = "42P03"


class InvalidPreparedStatement(EngineError):
    sqlstate = "26000"


class ProtocolViolation(EngineError):
    sqlstate = "08P01"


class QueryCanceled(EngineError):
    sqlstate = "57014"


class OutOfMemory(EngineError):
    """A query would exceed its memory limit (`query_memory_limit`): refused, as
    PostgreSQL's "out of memory" class 53, instead of growing the server."""

    sqlstate = "53200"


class TooManyConnections(EngineError):
    sqlstate = "53300"
    severity = "FATAL"


class AdminShutdown(EngineError):
    sqlstate = "57P01"
    severity = "FATAL"


class InvalidAuthorization(EngineError):
    sqlstate = "28000"
    severity = "FATAL"


class InvalidPassword(EngineError):
    sqlstate = "28P01"
    severity = "FATAL"


class InvalidCatalogName(EngineError):
    """Unknown database at connect time."""

    sqlstate = "3D000"
    severity = "FATAL"


class UndefinedDatabase(EngineError):
    """An unknown database named by a statement (DROP DATABASE): an ERROR, not FATAL."""

    sqlstate = "3D000"


class ProgramLimitExceeded(EngineError):
    """A value beyond what the server can represent (54000: `chr(0)`, a NUL in text)."""

    sqlstate = "54000"


class StatementTooComplex(EngineError):
    """Nesting deeper than the parser, binder or evaluator can follow (54001)."""

    sqlstate = "54001"


class ConnectorError(EngineError):
    sqlstate = "58000"


class InternalError(EngineError):
    sqlstate = "XX000"


class EpochFailed(EngineError):
    """A barrier failed: its epoch was rolled back everywhere and the dataflow recovered
    from the last committed epoch (engine.stream.runtime). The SQLSTATE is the cause's
    when the cause is an engine error (a data error, an I/O error), else XX000."""

    sqlstate = "XX000"


def not_supported(what: str, hint: str | None = None) -> FeatureNotSupported:
    """Build the RisingWave-style refusal `Not supported: <what>`."""
    return FeatureNotSupported(f"Not supported: {what}", hint=hint)


def date_out_of_range(t: object = None) -> DatetimeFieldOverflow:
    """22008 for a date/timestamp beyond what Swell keeps (see engine/civil.py)."""
    kind = getattr(getattr(t, "kind", None), "name", "")
    what = (
        "date"
        if kind == "DATE"
        else "timestamp"
        if kind.startswith("TIMESTAMP")
        else ("date/time value")
    )
    return DatetimeFieldOverflow(
        f"{what} out of range",
        detail="Dates lie between 4714-11-24 BC and 5874897-12-31, timestamps between"
        " 4714-11-24 BC and 294247-01-10.",
    )
