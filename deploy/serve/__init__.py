"""`manifold serve` and `manifold mcp`: the HTTP API and the MCP server (entry points over query/,
ingest's upstream client and shared/; nothing here is imported by those layers).

Modules: `models` (HTTP bodies beside `query.types`), `backend` (the profile's backend:
Kafka gateway or in-process service), `problems` (RFC 9457 documents, body and rate limits),
`mcp_tools` (the MCP tools), `app` (the FastAPI app), `run` (uvicorn and stdio runners).
"""
