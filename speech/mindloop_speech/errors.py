"""Failures the speech activities report.

Bad input can never succeed on a retry, so each kind is a non-retryable ApplicationError whose
`type` names the problem and whose message says what was wrong and what is accepted. An engine
that is not installed is non-retryable too: no retry installs it, `npm run setup` does.
"""
from __future__ import annotations

from typing import Any

from temporalio.exceptions import ApplicationError

NOT_AUDIO = "NotAudio"
EMPTY_AUDIO = "EmptyAudio"
AUDIO_TOO_LONG = "AudioTooLong"
UNSUPPORTED_SAMPLE_RATE = "UnsupportedSampleRate"
UNSUPPORTED_LANGUAGE = "UnsupportedLanguage"
BAD_INPUT = "BadInput"
ENGINE_UNAVAILABLE = "EngineUnavailable"
ENGINE_FAILED = "SpeechEngineFailed"

SETUP_HINT = "run `npm run setup` (installs the pinned speech engines and models into .tools/)"


class SpeechInputError(Exception):
    """Raised by the engine modules; turned into a non-retryable ApplicationError at the edge."""

    def __init__(self, kind: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.details = details

    def to_application_error(self) -> ApplicationError:
        return ApplicationError(self.message, self.details, type=self.kind, non_retryable=True)


def bad_input(message: str, **details: Any) -> SpeechInputError:
    return SpeechInputError(BAD_INPUT, message, **details)


def engine_unavailable(what: str, **details: Any) -> SpeechInputError:
    return SpeechInputError(ENGINE_UNAVAILABLE, f"{what}: {SETUP_HINT}", **details)
