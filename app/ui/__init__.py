"""The console at `/ui`: server-rendered pages over the same services as the REST API."""
