"""The speech worker: loads the engines once, then polls one speech task queue.

    PYTHONPATH=speech .tools/venv/bin/python -m mindloop_speech.worker \
        --address 127.0.0.1:7233 --namespace default [--queue speech-cpu] [--device auto]

`--device auto` (the default) uses CUDA when CTranslate2 sees a CUDA device, else the CPU; the
queue defaults to `speech-gpu` on CUDA and `speech-cpu` on the CPU, so routing picks a host by
the queue it schedules on. Once polling it prints one line to stdout,
`speech worker polling <queue> on <address> (stt <backend>, tts <backends>)`; everything else
goes to stderr. SIGINT or SIGTERM stops polling and lets running activities finish.
"""
from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import logging
import os
import signal
import sys
import time
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client
from temporalio.worker import Worker

from .activities import SpeechActivities, SpeechRuntime
from .errors import SETUP_HINT, SpeechInputError
from .models import default_whisper_dir
from .stt import WhisperEngine
from .tts import Speaker

log = logging.getLogger("mindloop_speech.worker")

QUEUE_GPU = "speech-gpu"
QUEUE_CPU = "speech-cpu"


def cuda_devices() -> int:
    try:
        import ctranslate2

        return int(ctranslate2.get_cuda_device_count())
    except Exception as err:  # noqa: BLE001 - no CUDA runtime is the same as no GPU here
        log.info("no CUDA (%s)", err)
        return 0


def resolve_device(requested: str) -> str:
    if requested == "cpu":
        return "cpu"
    count = cuda_devices()
    if requested == "cuda":
        if count == 0:
            raise SystemExit("speech worker: --device cuda, but CTranslate2 sees no CUDA device (use --device cpu or auto)")
        return "cuda"
    return "cuda" if count > 0 else "cpu"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m mindloop_speech.worker", description="Mindloop's speech worker (STT and TTS activities on Temporal).")
    p.add_argument("--address", default=os.environ.get("TEMPORAL_ADDRESS", "127.0.0.1:7233"))
    p.add_argument("--namespace", default=os.environ.get("TEMPORAL_NAMESPACE", "default"))
    p.add_argument("--queue", default=None, help=f"task queue (default: {QUEUE_GPU} on CUDA, {QUEUE_CPU} on the CPU)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default=os.environ.get("MINDLOOP_SPEECH_DEVICE", "auto"))
    p.add_argument("--concurrency", type=int, default=2, help="speech activities run at once (default 2)")
    p.add_argument("--cpu-threads", type=int, default=0, help="CTranslate2 threads per transcription (0: its default)")
    p.add_argument("--model-dir", type=Path, default=None, help=f"Whisper model directory (default {default_whisper_dir()})")
    p.add_argument("--allow-dir", type=Path, action="append", default=[], help="only read and write audio under these folders (repeatable; default: anywhere)")
    p.add_argument("--connect-timeout", type=float, default=60.0, help="seconds to keep trying to reach Temporal")
    args = p.parse_args(argv)
    if args.concurrency < 1:
        p.error("--concurrency must be at least 1")
    return args


async def connect(address: str, namespace: str, timeout_s: float) -> Client:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return await Client.connect(address, namespace=namespace)
        except Exception as err:  # noqa: BLE001 - the server may still be starting
            if time.monotonic() >= deadline:
                raise SystemExit(f"speech worker: cannot reach Temporal at {address}: {err}") from err
            log.info("Temporal at %s not reachable yet (%s); retrying", address, err)
            await asyncio.sleep(1.0)


async def main_async(args: argparse.Namespace) -> int:
    device = resolve_device(args.device)
    queue = args.queue or (QUEUE_GPU if device == "cuda" else QUEUE_CPU)
    executor = concurrent.futures.ThreadPoolExecutor(max_workers=args.concurrency, thread_name_prefix="speech")
    loop = asyncio.get_running_loop()

    def load_whisper() -> tuple[WhisperEngine | None, str | None]:
        try:
            return WhisperEngine(device, args.model_dir, args.cpu_threads), None
        except SpeechInputError as err:
            log.error("speech-to-text is off: %s", err.message)
            return None, err.message
        except Exception as err:  # noqa: BLE001 - the worker still speaks without it
            log.exception("speech-to-text is off: the Whisper model did not load")
            return None, f"the Whisper model did not load ({err}); {SETUP_HINT}"

    # Both engines load before polling starts, so the ready line means ready.
    whisper_job = loop.run_in_executor(executor, load_whisper)
    speaker_job = loop.run_in_executor(None, lambda: Speaker(use_cuda=device == "cuda"))
    whisper, whisper_error = await whisper_job
    if whisper is None and device == "cuda" and args.device == "auto":
        # A GPU that cannot run Whisper (no cuBLAS, say) must not take the GPU queue: jobs are
        # routed there first and would only fail. This host serves as a CPU one instead.
        log.warning("Whisper did not load on CUDA (%s); serving on the CPU", whisper_error)
        device = "cpu"
        queue = args.queue or QUEUE_CPU
        whisper, whisper_error = await loop.run_in_executor(executor, load_whisper)
        speaker_job = loop.run_in_executor(None, lambda: Speaker(use_cuda=False))
    elif whisper is None and device == "cuda":
        raise SystemExit(f"speech worker: --device cuda, but Whisper did not load on CUDA ({whisper_error}); use --device auto or cpu")
    speaker = await speaker_job
    runtime = SpeechRuntime(
        queue=queue,
        device=device,
        executor=executor,
        speaker=speaker,
        whisper=whisper,
        whisper_error=whisper_error,
        allowed_dirs=[d.resolve() for d in args.allow_dir],
    )
    client = await connect(args.address, args.namespace, args.connect_timeout)
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    worker = Worker(
        client,
        task_queue=queue,
        activities=SpeechActivities(runtime).all(),
        max_concurrent_activities=args.concurrency + 2,  # a health check still gets a slot when the engines are busy
        graceful_shutdown_timeout=timedelta(seconds=30),
    )
    async with worker:
        stt = whisper.backend if whisper else "none"
        tts = ",".join(speaker.backends) or "none"
        print(f"speech worker polling {queue} on {args.address} (stt {stt}, tts {tts})", flush=True)
        await stop.wait()
        log.info("stopping: no new activities; running ones may finish")
    executor.shutdown(wait=False, cancel_futures=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(stream=sys.stderr, level=os.environ.get("LOG_LEVEL", "INFO").upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = parse_args(argv)
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
