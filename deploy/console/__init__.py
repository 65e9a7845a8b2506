"""The operator console (`/console` on `manifold serve`, both profiles): documents, stages, dead
letters, answers and the audit log in one place, server-rendered (Jinja2 + htmx shipped in
`static/`, no build step). `routes.install` mounts it; `data.ConsoleData` is what it reads and
does, through the same services as the CLI (`ingest.lifecycle`, the version ledger, the
reconciler, `dlq_tools.service`); `auth` holds sessions, roles and CSRF."""
