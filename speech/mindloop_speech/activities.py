"""The speech activities, by the names and JSON shapes the TypeScript workflows use.

  transcribe    {audio_path, language?, word_timestamps?} → {text, language, words, …}
  speak         {text, lang?, voice?, out_path}           → {audio_path, duration_s, …}
  speech_health {}                                        → {host, queue, device, stt, tts, voices}

The engines run in worker threads; the activity itself stays on the event loop, heartbeats every
couple of seconds with how far the work has got, and on cancellation tells the thread to stop at
its next check (between decoded frames, transcribed segments or synthesised sentences) before it
reports the cancel.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from temporalio import activity
from temporalio.exceptions import ApplicationError

from .audio import Cancelled
from .errors import ENGINE_FAILED, SpeechInputError, bad_input, engine_unavailable
from .stt import Progress, WhisperEngine, normalise_language
from .tts import MAX_TEXT_CHARS, Speaker

log = logging.getLogger("mindloop_speech.activities")

HEARTBEAT_EVERY_S = 2.0


@dataclass
class SpeechRuntime:
    queue: str
    device: str
    executor: concurrent.futures.ThreadPoolExecutor
    speaker: Speaker
    whisper: WhisperEngine | None = None
    whisper_error: str | None = None
    allowed_dirs: list[Path] = field(default_factory=list)


def _require_dict(payload: Any, name: str) -> dict[str, Any]:
    if payload is None:
        payload = {}
    if not isinstance(payload, dict):
        raise bad_input(f"{name} takes one JSON object, got {type(payload).__name__}")
    return payload


class SpeechActivities:
    def __init__(self, runtime: SpeechRuntime) -> None:
        self.rt = runtime

    def _path(self, payload: dict[str, Any], key: str) -> Path:
        value = payload.get(key)
        if not isinstance(value, str) or not value.strip():
            raise bad_input(f"{key} is required: the absolute path of a file on a disk this worker shares", field=key)
        path = Path(value)
        if not path.is_absolute():
            raise bad_input(f"{key} must be an absolute path, got '{value}'", field=key)
        resolved = path.resolve()
        if self.rt.allowed_dirs and not any(resolved.is_relative_to(d) for d in self.rt.allowed_dirs):
            raise bad_input(
                f"{key} {value} lies outside the folders this worker may use: {', '.join(map(str, self.rt.allowed_dirs))}",
                field=key,
            )
        return resolved

    async def _run(self, work: Callable[[threading.Event], dict[str, Any]], progress: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """Run `work` in the engine threads, heartbeating; map failures to their Temporal form."""
        cancelled = threading.Event()
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self.rt.executor, work, cancelled)
        try:
            while True:
                done, _ = await asyncio.wait({future}, timeout=HEARTBEAT_EVERY_S)
                if done:
                    return future.result()
                activity.heartbeat(progress())
        except asyncio.CancelledError:
            cancelled.set()
            # The thread stops at its next check; wait for it (still heartbeating, or the server
            # would time the activity out meanwhile) so the engine is free before we answer.
            loop_deadline = loop.time() + 60
            while not future.done() and loop.time() < loop_deadline:
                await asyncio.wait({future}, timeout=HEARTBEAT_EVERY_S)
                if not future.done():
                    activity.heartbeat({**progress(), "stage": "stopping"})
            if future.done() and not future.cancelled():
                future.exception()  # retrieved, so asyncio does not log it as never retrieved
            log.info("%s cancelled", activity.info().activity_type)
            raise
        except SpeechInputError as err:
            log.info("%s refused: %s: %s", activity.info().activity_type, err.kind, err.message)
            raise err.to_application_error() from None
        except Cancelled:
            raise asyncio.CancelledError() from None
        except ApplicationError:
            raise
        except Exception as err:
            log.exception("%s failed", activity.info().activity_type)
            # Retryable: an engine hiccup may pass; the workflow's retry policy bounds the tries.
            raise ApplicationError(f"{activity.info().activity_type}: {err.__class__.__name__}: {err}", type=ENGINE_FAILED) from err

    @activity.defn(name="transcribe")
    async def transcribe(self, payload: Any = None) -> dict[str, Any]:
        try:
            req = _require_dict(payload, "transcribe")
            audio_path = self._path(req, "audio_path")
            language = normalise_language(req.get("language"), "language")
            word_timestamps = req.get("word_timestamps", True)
            if not isinstance(word_timestamps, bool):
                raise bad_input("word_timestamps must be true or false")
            engine = self.rt.whisper
            if engine is None:
                raise engine_unavailable(f"speech-to-text is not available on this worker ({self.rt.whisper_error})")
            engine.check_language(language)
        except SpeechInputError as err:
            raise err.to_application_error() from None
        progress = Progress()
        return await self._run(lambda cancelled: engine.transcribe(audio_path, language, word_timestamps, cancelled, progress), progress.snapshot)

    @activity.defn(name="speak")
    async def speak(self, payload: Any = None) -> dict[str, Any]:
        try:
            req = _require_dict(payload, "speak")
            text = req.get("text")
            if not isinstance(text, str) or not text.strip():
                raise bad_input("text is required and must not be empty", field="text")
            if len(text) > MAX_TEXT_CHARS:
                raise bad_input(f"text has {len(text)} characters; the limit is {MAX_TEXT_CHARS} (split it)", field="text", limit=MAX_TEXT_CHARS)
            out_path = self._path(req, "out_path")
            if out_path.is_dir():
                raise bad_input(f"out_path {out_path} is a directory; name the WAV file to write", field="out_path")
            lang = req.get("lang")
            voice = req.get("voice")
            # Fails here, before any thread is busy, when no voice speaks the language.
            self.rt.speaker.choose(normalise_language(lang, "lang"), voice, text)
        except SpeechInputError as err:
            raise err.to_application_error() from None
        state = {"sentences": 0, "chars": len(text)}

        def progressed(sentences: int, _chars: int) -> None:
            state["sentences"] = sentences

        return await self._run(
            lambda cancelled: self.rt.speaker.speak(text.strip(), lang, voice, out_path, cancelled, progressed),
            lambda: {"stage": "speaking", **state},
        )

    @activity.defn(name="speech_health")
    async def speech_health(self, payload: Any = None) -> dict[str, Any]:
        return {
            "host": socket.gethostname(),
            "queue": self.rt.queue,
            "device": self.rt.device,
            "stt": [self.rt.whisper.backend] if self.rt.whisper else [],
            "tts": self.rt.speaker.backends,
            "voices": self.rt.speaker.voices(),
        }

    def all(self) -> list[Callable[..., Any]]:
        return [self.transcribe, self.speak, self.speech_health]
