"""Mindloop's speech organ: a Temporal worker with speech-to-text and text-to-speech activities.

The TypeScript workflows schedule `transcribe`, `speak` and `speech_health` by name on the speech
task queues; this package is the worker that serves them (see docs/speech.md).
"""
