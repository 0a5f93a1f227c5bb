"""Each agent as a model: the OpenAI-compatible Chat Completions API (docs/openai-api.md).

A door onto the runs of `app/chat/`: `POST /v1/chat/completions` starts a run with
`RunManager.start` and reads it through `live_events`, like `POST /api/v1/chat`.
"""
